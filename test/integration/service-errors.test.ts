import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Faults } from '../../src/sim/faults.js';
import { eventually } from '../support/kube.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';

const PENDING = 'usergroup.dev/rotation-pending';
const TOKEN_SHA = 'usergroup.dev/token-sha256';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Every token seen in a Secret during this file, and every API key used, for the final check. */
const seenTokens = new Set<string>();
const apiKeys = new Set<string>();
const envs: TestEnv[] = [];
const handles: OperatorHandle[] = [];
let testHandles: OperatorHandle[] = [];

async function newEnv(prefix: string): Promise<TestEnv> {
  const env = await TestEnv.create(prefix);
  envs.push(env);
  apiKeys.add(env.apiKey);
  return env;
}

async function start(env: TestEnv, options: Parameters<TestEnv['startOperator']>[0] = {}): Promise<OperatorHandle> {
  const handle = await env.startOperator(options);
  handles.push(handle);
  testHandles.push(handle);
  return handle;
}

async function tokenOf(env: TestEnv, secretName: string): Promise<string | undefined> {
  const token = await env.secretToken(secretName);
  if (token) seenTokens.add(token);
  return token;
}

function readyOf(ug: UserGroupObject): { status: string; reason: string; message: string } | undefined {
  return ug.status?.conditions?.find((c) => c.type === 'Ready');
}

/** Synced, and the Secret holds the service's current token (and a matching sha annotation). */
async function waitSynced(env: TestEnv, name: string, userGroupId: string, timeoutMs = 90_000): Promise<string> {
  await env.waitForReady(name, 'Synced', 'True', timeoutMs);
  return eventually(
    `Secret ${name} to hold the service's token of ${userGroupId}`,
    async () => {
      const secret = await env.getSecret(name);
      const token = await tokenOf(env, name);
      const sim = env.simGroup(userGroupId);
      return token && sha256(token) === sim?.tokenSha256 && secret?.metadata?.annotations?.[TOKEN_SHA] === sim.tokenSha256 ? token : undefined;
    },
    timeoutMs,
  );
}

/** A Warning Event (events.k8s.io) with that reason whose note names the condition reason. */
async function waitForWarning(env: TestEnv, name: string, eventReason: 'SyncFailed' | 'RotationFailed', conditionReason: string): Promise<void> {
  await eventually(
    `a Warning Event ${eventReason} (${conditionReason}) about ${name}`,
    async () => {
      const events = await env.eventsFor(name);
      return events.some((e) => e.reason === eventReason && e.type === 'Warning' && (e.note ?? '').includes(conditionReason)) ? true : undefined;
    },
    30_000,
  );
}

describe('service errors', () => {
  let env: TestEnv;

  beforeAll(async () => {
    env = await newEnv('svcerr');
    // A real child process: a crash would end it, and every later case would fail.
    await start(env, { mode: 'process' });
    testHandles = [];
  });
  afterEach((ctx) => {
    for (const e of envs) e.sim.setFaults({});
    if (ctx.task.result?.state === 'fail') {
      for (const h of testHandles.length > 0 ? testHandles : handles) console.error(`controller log (last 60 lines):\n${h.logs.slice(-60).join('\n')}`);
    }
    testHandles = [];
  });
  afterAll(async () => {
    await Promise.all(envs.map((e) => e.close()));
  });

  it('401: a wrong API key gives Ready=False Unauthorized and a Warning Event, retried slowly, no crash', async () => {
    const own = await newEnv('svcerr-auth');
    const wrongKey = `wrong-${randomBytes(16).toString('hex')}`;
    apiKeys.add(wrongKey);
    await start(own, { apiKey: wrongKey });

    await own.createUserGroup('unauth', { userGroupId: 'err-401', name: 'Unauthorized' });
    const ug = await own.waitForReady('unauth', 'Unauthorized');
    const ready = readyOf(ug);
    expect(ready?.message).toMatch(/401/);
    expect(ready?.message).toMatch(/API key/i);
    await waitForWarning(own, 'unauth', 'SyncFailed', 'Unauthorized');
    expect(await own.getSecret('unauth')).toBeUndefined();
    expect(own.simGroup('err-401')).toBeUndefined();
    expect(own.sim.stats().operations.upsert.unauthorized).toBeGreaterThanOrEqual(1);

    // Still alive and reconciling: a second group gets the same verdict.
    await own.createUserGroup('unauth-2', { userGroupId: 'err-401-b', name: 'Unauthorized too' });
    await own.waitForReady('unauth-2', 'Unauthorized');
    await waitForWarning(own, 'unauth-2', 'SyncFailed', 'Unauthorized');

    // Retried slowly: no hammering of the service with a key it refuses.
    const before = own.sim.stats().operations.upsert.unauthorized;
    await sleep(5_000);
    expect(own.sim.stats().operations.upsert.unauthorized).toBe(before);
  });

  it('429 with Retry-After: waited out without a failure at first, RateLimited once only 429s came back for 30 s, Synced once it lifts', async () => {
    env.sim.setFaults({ rateLimitRate: 1, retryAfterSeconds: 1 });
    await env.createUserGroup('limited', { userGroupId: 'err-429', name: 'Limited' });
    // The account's limit is shared with every cluster on it: a neighbour's load is no failure of this group.
    await eventually('a 429 to reach the controller', async () => (env.calls().upsert.injected_429 >= 3 ? true : undefined));
    expect(readyOf(await env.getUserGroup('limited'))?.reason).not.toBe('RateLimited');
    expect((await env.eventsFor('limited')).filter((e) => e.type === 'Warning')).toEqual([]);
    const ug = await env.waitForReady('limited', 'RateLimited', 'False', 60_000);
    expect(readyOf(ug)?.message).toMatch(/429/);
    await waitForWarning(env, 'limited', 'SyncFailed', 'RateLimited');
    expect(await env.getSecret('limited')).toBeUndefined();

    // Retry-After: 1 s → over 3 s about 3 calls, never a tight retry loop.
    const before = env.calls().upsert.injected_429;
    await sleep(3_000);
    const during = env.calls().upsert.injected_429 - before;
    expect(during).toBeGreaterThanOrEqual(1);
    expect(during).toBeLessThanOrEqual(4);

    env.sim.setFaults({});
    await waitSynced(env, 'limited', 'err-429');
  });

  it('5xx: ServiceUnavailable with a Warning Event, Synced once the service recovers', async () => {
    env.sim.setFaults({ errorRate: 1 });
    await env.createUserGroup('unavailable', { userGroupId: 'err-5xx', name: 'Unavailable' });
    const ug = await env.waitForReady('unavailable', 'ServiceUnavailable');
    expect(readyOf(ug)?.message).toMatch(/503/);
    await waitForWarning(env, 'unavailable', 'SyncFailed', 'ServiceUnavailable');
    expect(await env.getSecret('unavailable')).toBeUndefined();

    env.sim.setFaults({});
    await waitSynced(env, 'unavailable', 'err-5xx');
  });

  it('5xx during a rotation: RotationFailed, the held token kept, then exactly one rotation once the service recovers', async () => {
    await env.createUserGroup('rot-unavailable', { userGroupId: 'err-5xx-rotate', name: 'Rotation unavailable' });
    const original = await waitSynced(env, 'rot-unavailable', 'err-5xx-rotate');

    env.sim.setFaults({ errorRate: 1 });
    await env.requestRotation('rot-unavailable', 'r1');
    await env.waitForReady('rot-unavailable', 'ServiceUnavailable');
    await waitForWarning(env, 'rot-unavailable', 'RotationFailed', 'ServiceUnavailable');
    expect(await tokenOf(env, 'rot-unavailable')).toBe(original);
    expect(sha256(original)).toBe(env.simGroup('err-5xx-rotate')?.tokenSha256);
    expect((await env.getUserGroup('rot-unavailable')).status?.rotation?.lastHandledRequest).toBeUndefined();

    env.sim.setFaults({});
    const token = await eventually(
      'the rotation to complete after the outage',
      async () => {
        const ug = await env.getUserGroup('rot-unavailable');
        const ready = readyOf(ug);
        const secret = await env.getSecret('rot-unavailable');
        const t = await tokenOf(env, 'rot-unavailable');
        const sim = env.simGroup('err-5xx-rotate');
        return ug.status?.rotation?.lastHandledRequest === 'r1' &&
          ready?.reason === 'Synced' &&
          t &&
          sha256(t) === sim?.tokenSha256 &&
          secret?.metadata?.annotations?.[PENDING] === undefined
          ? t
          : undefined;
      },
      90_000,
    );
    expect(token).not.toBe(original);
    await sleep(2_000);
    expect(env.sim.stats(env.apiKey).rotationsByUserGroupId['err-5xx-rotate']).toBe(1);
  });

  it('timeouts: a hung service gives ServiceUnavailable mentioning the timeout, Synced once it answers', async () => {
    const own = await newEnv('svcerr-timeout');
    await start(own, { args: ['--service-timeout', '1s'] });
    own.sim.setFaults({ hangRate: 1 });
    await own.createUserGroup('hung', { userGroupId: 'err-timeout', name: 'Hung' });
    const ug = await own.waitForReady('hung', 'ServiceUnavailable');
    expect(readyOf(ug)?.message).toMatch(/timed out/i);
    await waitForWarning(own, 'hung', 'SyncFailed', 'ServiceUnavailable');
    expect(own.calls().upsert.injected_hang).toBeGreaterThanOrEqual(1);
    expect(await own.getSecret('hung')).toBeUndefined();

    own.sim.setFaults({});
    await waitSynced(own, 'hung', 'err-timeout');
  });

  it('other 4xx (413): Rejected with the service message, Synced once the spec is fixed', async () => {
    // A service stricter than the operator's own limits: this simulator takes bodies up to 4 KiB only.
    const strict = await TestEnv.create('err-413', { maxBodyBytes: 4_096 });
    try {
      await strict.startOperator();
      const blob = 'x'.repeat(8_000);
      await strict.createUserGroup('too-large', { userGroupId: 'err-413', name: 'Too large', properties: { blob } });
      const ug = await strict.waitForReady('too-large', 'Rejected');
      const message = readyOf(ug)?.message ?? '';
      expect(message).toMatch(/413/);
      expect(message).toContain('request body is larger than 4096 bytes');
      await waitForWarning(strict, 'too-large', 'SyncFailed', 'Rejected');
      expect(strict.calls().upsert.payload_too_large).toBeGreaterThanOrEqual(1);
      expect(await strict.getSecret('too-large')).toBeUndefined();
      expect(strict.simGroup('err-413')).toBeUndefined();

      await strict.patchUserGroup('too-large', { spec: { properties: { blob: null, plan: 'small' } } });
      await waitSynced(strict, 'too-large', 'err-413');
      expect(strict.simGroup('err-413')?.properties).toEqual({ plan: 'small' });
    } finally {
      await strict.close();
    }
  });

  const invalid: { knob: keyof Faults; slug: string; reason: string; message: RegExp }[] = [
    { knob: 'malformedJsonRate', slug: 'malformed', reason: 'InvalidResponse', message: /not JSON/ },
    { knob: 'missingTokenRate', slug: 'missing-token', reason: 'InvalidResponse', message: /token.*missing/ },
    { knob: 'emptyTokenRate', slug: 'empty-token', reason: 'InvalidResponse', message: /token.*empty/ },
    { knob: 'successZeroRate', slug: 'success-zero', reason: 'Rejected', message: /success 0/ },
  ];
  for (const c of invalid) {
    it(`invalid answer (${c.knob}): ${c.reason}, a Warning Event, no token overwritten, Synced once cleared`, async () => {
      const existing = `${c.slug}-old`;
      const fresh = `${c.slug}-new`;
      await env.createUserGroup(existing, { userGroupId: `err-${existing}`, name: 'Before' });
      const held = await waitSynced(env, existing, `err-${existing}`);

      env.sim.setFaults({ [c.knob]: 1 });
      // A spec change forces a PUT for the synced group; the new group needs one to exist at all.
      await env.patchUserGroup(existing, { spec: { name: 'After' } });
      await env.createUserGroup(fresh, { userGroupId: `err-${fresh}`, name: 'Fresh' });
      for (const name of [existing, fresh]) {
        const ug = await env.waitForReady(name, c.reason);
        expect(readyOf(ug)?.message).toMatch(c.message);
      }
      await Promise.all([existing, fresh].map((name) => waitForWarning(env, name, 'SyncFailed', c.reason)));

      // Nothing the broken answers said reached a Secret.
      const secret = await env.getSecret(existing);
      expect(await tokenOf(env, existing)).toBe(held);
      expect(secret?.metadata?.annotations?.[TOKEN_SHA]).toBe(sha256(held));
      expect(await env.getSecret(fresh)).toBeUndefined();
      expect(env.simGroup(`err-${existing}`)?.name).toBe('Before');

      env.sim.setFaults({});
      expect(await waitSynced(env, existing, `err-${existing}`)).toBe(held);
      expect(env.simGroup(`err-${existing}`)?.name).toBe('After');
      await waitSynced(env, fresh, `err-${fresh}`);
    });
  }

  it('never puts the API key or a token into logs, Events or status, and never crashed a reconcile', async () => {
    const texts: string[] = [];
    const logs = handles.flatMap((h) => h.logs);
    expect(logs.length).toBeGreaterThan(0);
    texts.push(...logs);
    for (const e of envs) {
      const events = await e.events.listNamespacedEvent({ namespace: e.namespace });
      expect(events.items.length).toBeGreaterThan(0);
      texts.push(...events.items.map((ev) => `${ev.note ?? ''} ${JSON.stringify(ev)}`));
      const ugs = (await e.custom.listNamespacedCustomObject({
        group: 'usergroup.dev',
        version: 'v1',
        namespace: e.namespace,
        plural: 'usergroups',
      })) as { items: UserGroupObject[] };
      texts.push(...ugs.items.map((ug) => JSON.stringify(ug.status ?? {})));
      // The final tokens too, not only those read along the way.
      const secrets = await e.core.listNamespacedSecret({ namespace: e.namespace });
      for (const s of secrets.items) for (const v of Object.values(s.data ?? {})) seenTokens.add(Buffer.from(v, 'base64').toString('utf8'));
    }
    expect(seenTokens.size).toBeGreaterThanOrEqual(10);
    const secrets = [...apiKeys, ...[...seenTokens].filter((t) => t.length >= 16)];
    for (const text of texts) {
      for (const secret of secrets) expect(text.includes(secret), `a secret leaked into: ${text.slice(0, 300)}`).toBe(false);
    }
    // Every failure above was a handled outcome, never an exception out of a reconcile.
    expect(logs.filter((l) => l.includes('"reconcile failed"') || l.includes('"reconcile threw"'))).toEqual([]);
  });
});
