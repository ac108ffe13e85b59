import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllControllers, msgIs, signalAndWait, waitLog } from '../support/controller-process.js';
import { eventually } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { waitInSync, waitRotationHandled } from '../support/service-sync.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * The log lines of a controller process: JSON, one per step, with the UserGroup and a reconcile id,
 * nothing secret; and --log-level.
 */

// Controller processes come from env.spawnController, which keeps each one's exit code and logs
// visible; whatever a test leaves running is killed at the end.
afterAll(killAllControllers);

describe('logs', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('logs');
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  it('one JSON line per step with the UserGroup key and a reconcile id; nothing secret in them', async () => {
    const c = env.spawnController([]);
    await waitLog(c, 'workers started', msgIs('workers started'));
    await env.createUserGroup('log-a', { userGroupId: 'logs-a', name: 'Logs A' });
    const first = await waitInSync(env, 'log-a', 'logs-a');
    await env.patchUserGroup('log-a', { spec: { name: 'Logs A renamed' } });
    await eventually('rename at the service', async () => (env.simGroup('logs-a')?.name === 'Logs A renamed' ? true : undefined));
    await env.requestRotation('log-a', 'logs-1');
    const second = await waitRotationHandled(env, 'log-a', 'logs-a', 'logs-1');
    await env.createUserGroup('log-b', { userGroupId: 'logs-b', name: 'Logs B', serviceRef: { name: 'missing' } });
    await env.waitForReady('log-b', 'ConnectionNotFound', 'False');
    await sleep(500);

    expect(c.logs.length).toBeGreaterThan(5);
    for (const line of c.logs) {
      expect(line.json, `not JSON: ${line.text}`).toBeDefined();
      expect(typeof line.json?.['level']).toBe('string');
      expect(typeof line.json?.['msg']).toBe('string');
      expect(Number.isNaN(Date.parse(String(line.json?.['time'])))).toBe(false);
    }
    const key = `${env.namespace}/log-a`;
    const synced = c.logs.filter((l) => l.json?.['msg'] === 'user group synced' && l.json['usergroup'] === key);
    const rotated = c.logs.filter((l) => l.json?.['msg'] === 'token rotated' && l.json['usergroup'] === key);
    expect(synced).toHaveLength(2); // create, rename
    expect(rotated).toHaveLength(1);
    const ids = [...synced, ...rotated].map((l) => l.json?.['reconcileId']);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}$/);
    expect(new Set(ids).size).toBe(3); // one reconcile id per reconcile
    expect(synced[0]?.json?.['created']).toBe(true);
    expect(synced[1]?.json?.['created']).toBe(false);
    // Every line that has a reconcile id names the UserGroup, and an id never spans two UserGroups.
    const owners = new Map<string, string>();
    for (const l of c.logs.filter((x) => x.json?.['reconcileId'] !== undefined)) {
      const id = String(l.json?.['reconcileId']);
      const ug = String(l.json?.['usergroup']);
      expect(ug).toMatch(new RegExp(`^${env.namespace}/`));
      if (owners.has(id)) expect(owners.get(id)).toBe(ug);
      owners.set(id, ug);
    }
    const blocked = c.logs.find((l) => l.json?.['usergroup'] === `${env.namespace}/log-b` && l.json['reason'] === 'ConnectionNotFound');
    expect(blocked?.json?.['reconcileId']).toMatch(/^[0-9a-f]{8}$/);
    // Nothing secret in any line.
    const all = [...c.logs.map((l) => l.text), ...c.stderr].join('\n');
    for (const secret of [first.token, second, env.apiKey]) expect(all.includes(secret)).toBe(false);
  });

  it('--log-level warn prints warnings only', async () => {
    env.sim.setFaults({ errorRate: 1 });
    const c = env.spawnController(['--log-level', 'warn']);
    try {
      await env.createUserGroup('log-warn', { userGroupId: 'logs-warn', name: 'Warn' });
      await env.waitForReady('log-warn', 'ServiceUnavailable', 'False');
      await waitLog(c, 'service call failed', msgIs('service call failed'));
      env.sim.setFaults({});
      await waitInSync(env, 'log-warn', 'logs-warn');
      await sleep(500);
    } finally {
      env.sim.setFaults({});
    }
    expect(c.logs.length).toBeGreaterThan(0);
    for (const line of c.logs) expect(['warn', 'error', 'fatal'], line.text).toContain(line.json?.['level']);
    expect(c.logs.some(msgIs('user group synced'))).toBe(false);
    expect(c.logs.some(msgIs('caches synced'))).toBe(false);
    await signalAndWait(c, 'SIGTERM');
  });
});
