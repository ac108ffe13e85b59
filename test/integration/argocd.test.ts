import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/kube.js';
import { argoCdActionPatch, runArgoCdLua } from '../support/lua.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';

/**
 * The Argo CD health check and rotate action (deploy/argocd) run by the real Lua 5.1 on UserGroups
 * the real controller put into each state, fetched from the apiserver exactly as Argo CD sees them.
 *
 * UPDATE_ARGOCD_FIXTURES=1 also saves those objects to test/fixtures/argocd/ for the unit test
 * (managedFields dropped, the random test namespace renamed "customers").
 */

const ROTATE = 'usergroup.dev/rotate-requested-at';
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const DIR = fileURLToPath(new URL('../../deploy/argocd/', import.meta.url));
const HEALTH = fs.readFileSync(path.join(DIR, 'health.lua'), 'utf8');
const DISCOVERY = fs.readFileSync(path.join(DIR, 'actions/discovery.lua'), 'utf8');
const ACTION = fs.readFileSync(path.join(DIR, 'actions/rotate/action.lua'), 'utf8');
const FIXTURES = fileURLToPath(new URL('../fixtures/argocd/', import.meta.url));

interface Health {
  status: string;
  message: string;
}

const health = (ug: UserGroupObject): Health => runArgoCdLua(HEALTH, ug, { name: 'health.lua' }) as Health;
const rotateDisabled = (ug: UserGroupObject): unknown =>
  (runArgoCdLua(DISCOVERY, ug, { name: 'discovery.lua' }) as { rotate?: { disabled?: unknown } }).rotate?.disabled;

describe('Argo CD health check and rotate action on real UserGroups', () => {
  let env: TestEnv;
  let operator: OperatorHandle | undefined;
  const operators: OperatorHandle[] = [];

  async function startOperator(): Promise<OperatorHandle> {
    const op = await env.startOperator();
    operators.push(op);
    return op;
  }

  function saveFixture(name: string, ug: UserGroupObject): void {
    if (process.env['UPDATE_ARGOCD_FIXTURES'] !== '1') return;
    const copy = JSON.parse(JSON.stringify(ug).replaceAll(env.namespace, 'customers')) as { metadata: Record<string, unknown> };
    delete copy.metadata['managedFields'];
    fs.mkdirSync(FIXTURES, { recursive: true });
    fs.writeFileSync(path.join(FIXTURES, `${name}.json`), `${JSON.stringify(copy, null, 2)}\n`);
  }

  beforeAll(async () => {
    env = await TestEnv.create('argocd');
  });
  afterEach((ctx) => {
    env.sim.setFaults({});
    if (ctx.task.result?.state === 'fail') {
      for (const op of operators) console.error(`controller log (last 40 lines):\n${op.logs.slice(-40).join('\n')}`);
    }
  });
  afterAll(async () => {
    await env?.close();
  });

  it('is Progressing before any controller has written status, Healthy once Synced', async () => {
    await env.createUserGroup('early', { userGroupId: 'argo-early', name: 'Early' });
    const fresh = await env.getUserGroup('early');
    expect(fresh.status).toBeUndefined();
    expect(health(fresh)).toEqual({ status: 'Progressing', message: 'Waiting for the controller to report the Ready condition' });
    saveFixture('no-status', fresh);

    operator = await startOperator();
    const synced = await env.waitForReady('early');
    expect(health(synced)).toEqual({ status: 'Healthy', message: 'Synced: user group synced; token in Secret early' });
    expect(rotateDisabled(synced)).toBe(false);
    saveFixture('synced', synced);
  });

  it('is Suspended for a suspended group, whose rotate action is disabled', async () => {
    await env.createUserGroup('paused', { userGroupId: 'argo-paused', name: 'Paused', suspend: true });
    const paused = await env.waitForReady('paused', 'Suspended');
    expect(health(paused)).toEqual({ status: 'Suspended', message: 'Suspended: spec.suspend is true: the operator makes no call to the service' });
    expect(rotateDisabled(paused)).toBe(true);
    saveFixture('suspended', paused);
  });

  it('is Degraded when a person must act: a missing UserGroupService, a request the service rejects', async () => {
    await env.createUserGroup('orphan', { userGroupId: 'argo-orphan', name: 'Orphan', serviceRef: { name: 'no-such-service' } });
    const orphan = await env.waitForReady('orphan', 'ConnectionNotFound', 'False', 60_000);
    const ready = orphan.status?.conditions?.find((c) => c.type === 'Ready');
    expect(health(orphan)).toEqual({ status: 'Degraded', message: `ConnectionNotFound: ${ready?.message ?? ''}` });
    expect(health(orphan).message).toContain('no-such-service');
    saveFixture('connection-not-found', orphan);

    env.sim.setFaults({ successZeroRate: 1 });
    await env.createUserGroup('refused', { userGroupId: 'argo-refused', name: 'Refused' });
    const refused = await env.waitForReady('refused', 'Rejected');
    expect(health(refused).status).toBe('Degraded');
    expect(health(refused).message).toMatch(/^Rejected: PUT \/api\/user/);
    saveFixture('rejected', refused);
  });

  it('is Progressing while the controller retries ServiceUnavailable / RateLimited, then Healthy', async () => {
    env.sim.setFaults({ errorRate: 1 });
    await env.createUserGroup('flaky', { userGroupId: 'argo-flaky', name: 'Flaky' });
    const flaky = await env.waitForReady('flaky', 'ServiceUnavailable');
    expect(health(flaky).status).toBe('Progressing');
    expect(health(flaky).message).toMatch(/^ServiceUnavailable: PUT \/api\/user .*503/);
    saveFixture('service-unavailable', flaky);

    env.sim.setFaults({ rateLimitRate: 1, retryAfterSeconds: 1 });
    await env.createUserGroup('limited', { userGroupId: 'argo-limited', name: 'Limited' });
    const limited = await env.waitForReady('limited', 'RateLimited');
    expect(health(limited).status).toBe('Progressing');
    expect(health(limited).message).toMatch(/^RateLimited: .*429/);
    saveFixture('rate-limited', limited);

    env.sim.setFaults({});
    expect(health(await env.waitForReady('flaky')).status).toBe('Healthy');
    expect(health(await env.waitForReady('limited')).status).toBe('Healthy');
  });

  it('is Progressing until the controller observes a new spec or handles a rotation; the rotate action rotates the token', async () => {
    // Empty maps in the spec come back from Lua as [] and Argo CD restores them (cleanReturnedObj): the patch must still be the annotation alone.
    await env.createUserGroup('rot', { userGroupId: 'argo-rot', name: 'Rot', tokenSecret: { labels: {}, annotations: {} } });
    await env.waitForReady('rot');
    const tokenBefore = await env.secretToken('rot');
    expect(tokenBefore).toBeTruthy();

    // With no controller running, nothing the next steps ask for can be done yet.
    await operator?.stop();

    const renamed = await env.patchUserGroup('early', { spec: { name: 'Early Renamed' } });
    expect(renamed.metadata.generation).toBe(2);
    expect(renamed.status?.observedGeneration).toBe(1);
    expect(health(renamed)).toEqual({ status: 'Progressing', message: 'Waiting for the controller to observe generation 2 (status describes 1)' });
    saveFixture('spec-not-observed', renamed);

    // The action as Argo CD runs it: on the live object, then a merge patch of the difference.
    const live = await env.getUserGroup('rot');
    expect(rotateDisabled(live)).toBe(false);
    const patch = argoCdActionPatch(live, runArgoCdLua(ACTION, live, { name: 'action.lua' }));
    expect(patch).toEqual({ metadata: { annotations: { [ROTATE]: expect.stringMatching(TIMESTAMP) } } });
    const requested = (patch as { metadata: { annotations: Record<string, string> } }).metadata.annotations[ROTATE] ?? '';
    await env.patchUserGroup('rot', patch);

    const pending = await env.getUserGroup('rot');
    expect(pending.metadata.annotations?.[ROTATE]).toBe(requested);
    expect(pending.metadata.generation).toBe(live.metadata.generation); // metadata only: no new generation
    expect(pending.spec).toEqual(live.spec);
    expect(health(pending)).toEqual({
      status: 'Progressing',
      message: `Waiting for the controller to rotate the token (${ROTATE} = ${requested}, last handled: none)`,
    });
    saveFixture('rotation-pending', pending);

    operator = await startOperator();
    const handled = await eventually(`rotation request ${requested} to be handled`, async () => {
      const ug = await env.getUserGroup('rot');
      return ug.status?.rotation?.lastHandledRequest === requested ? ug : undefined;
    }, 60_000);
    const tokenAfter = await env.secretToken('rot');
    expect(tokenAfter).toBeTruthy();
    expect(tokenAfter).not.toBe(tokenBefore);
    expect(health(await env.waitForReady('rot'))).toEqual({ status: 'Healthy', message: 'Synced: user group synced; token in Secret rot' });
    expect(handled.metadata.annotations?.[ROTATE]).toBe(requested);
    expect(health(await env.waitForReady('early')).status).toBe('Healthy');
    saveFixture('rotated', await env.getUserGroup('rot'));

    // A second click within the same second (clock pinned to the first one): still a new value, so a second rotation.
    const again = await env.getUserGroup('rot');
    const second = argoCdActionPatch(again, runArgoCdLua(ACTION, again, { name: 'action.lua', clock: Date.parse(requested) / 1000 }));
    expect(second).toEqual({ metadata: { annotations: { [ROTATE]: `${requested}-1` } } });
    await env.patchUserGroup('rot', second);
    await eventually(`rotation request ${requested}-1 to be handled`, async () =>
      (await env.getUserGroup('rot')).status?.rotation?.lastHandledRequest === `${requested}-1` ? true : undefined, 60_000);
    const tokenThird = await env.secretToken('rot');
    expect(tokenThird).toBeTruthy();
    expect(tokenThird).not.toBe(tokenAfter);
    expect(tokenThird).not.toBe(tokenBefore);
  });
});
