import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/kube.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';

const ROTATE = 'usergroup.dev/rotate-requested-at';
const PENDING = 'usergroup.dev/rotation-pending';
const HANDLED = 'usergroup.dev/rotation-handled';
const TOKEN_SHA = 'usergroup.dev/token-sha256';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Every token this file ever saw, for the final "no secrets anywhere" check. */
const seenTokens = new Set<string>();
const handles: OperatorHandle[] = [];
/** Controllers started by the running test, whose logs are printed if it fails. */
let testHandles: OperatorHandle[] = [];
const envs: TestEnv[] = [];

async function tokenOf(env: TestEnv, secretName: string): Promise<string | undefined> {
  const token = await env.secretToken(secretName);
  if (token) seenTokens.add(token);
  return token;
}

async function start(env: TestEnv, mode: 'in-process' | 'process' = 'in-process'): Promise<OperatorHandle> {
  const handle = await env.startOperator({ mode });
  handles.push(handle);
  testHandles.push(handle);
  return handle;
}

/** Successful rotations of one group, counted by the simulator. */
function rotationsOf(env: TestEnv, userGroupId: string): number {
  return env.sim.stats(env.apiKey).rotationsByUserGroupId[userGroupId] ?? 0;
}

/** Every POST /api/user the simulator saw for this env's key, whatever its outcome. */
function rotateCalls(env: TestEnv): number {
  return Object.values(env.calls().rotate).reduce((a, b) => a + b, 0);
}

/** Waits until the UserGroup is Synced and its Secret holds exactly the service's current token. */
async function waitInSync(env: TestEnv, name: string, userGroupId: string, timeoutMs = 60_000): Promise<{ ug: UserGroupObject; token: string }> {
  const ug = await env.waitForReady(name, 'Synced', 'True', timeoutMs);
  const token = await eventually(
    `Secret ${name} to hold the service's token of ${userGroupId}`,
    async () => {
      const token = await tokenOf(env, name);
      const sim = env.simGroup(userGroupId);
      return token && sha256(token) === sim?.tokenSha256 ? token : undefined;
    },
    timeoutMs,
  );
  return { ug, token };
}

/** Waits until a rotation request value is recorded as handled, the Secret follows the service, and Ready is Synced. */
async function waitHandled(
  env: TestEnv,
  name: string,
  userGroupId: string,
  value: string,
  timeoutMs = 60_000,
): Promise<{ ug: UserGroupObject; token: string }> {
  return eventually(
    `rotation request "${value}" of ${name} to be handled`,
    async () => {
      const ug = await env.getUserGroup(name);
      const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
      if (ug.status?.rotation?.lastHandledRequest !== value || ready?.status !== 'True' || ready.reason !== 'Synced') return undefined;
      const secret = await env.getSecret(name);
      const token = await tokenOf(env, name);
      const sim = env.simGroup(userGroupId);
      if (!token || sha256(token) !== sim?.tokenSha256) return undefined;
      if (secret?.metadata?.annotations?.[PENDING] !== undefined) return undefined;
      return { ug, token };
    },
    timeoutMs,
  );
}

async function waitForEvent(env: TestEnv, name: string, reason: string, type: 'Normal' | 'Warning', noteIncludes = ''): Promise<void> {
  await eventually(
    `a ${type} Event ${reason} about ${name}`,
    async () => {
      const events = await env.eventsFor(name);
      return events.some((e) => e.reason === reason && e.type === type && (e.note ?? '').includes(noteIncludes)) ? true : undefined;
    },
    30_000,
  );
}

/** Rotates a token directly at the service, behind the operator's back. */
async function rotateAtService(
  env: TestEnv,
  currentToken: string,
): Promise<{ status: number; body: { success: number; message?: string; user_group?: { token?: string } } }> {
  const res = await fetch(`${env.sim.url}/api/user`, {
    method: 'POST',
    headers: { authorization: `Token ${env.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ current_token: currentToken }),
  });
  const body = (await res.json()) as { success: number; message?: string; user_group?: { token?: string } };
  if (body.user_group?.token) seenTokens.add(body.user_group.token);
  return { status: res.status, body };
}

describe('token rotation', () => {
  let env: TestEnv;

  beforeAll(async () => {
    env = await TestEnv.create('rotation');
    envs.push(env);
  });
  afterEach((ctx) => {
    env.sim.setFaults({});
    if (ctx.task.result?.state === 'fail') {
      for (const h of testHandles) console.error(`controller log (last 60 lines):\n${h.logs.slice(-60).join('\n')}`);
    }
    testHandles = [];
  });
  afterAll(async () => {
    await Promise.all(envs.map((e) => e.close()));
  });

  it('rotates exactly once per annotation value, and never removes the annotation', async () => {
    const op = await start(env);
    try {
      await env.createUserGroup('once', { userGroupId: 'rot-once', name: 'Once' });
      const { token: original } = await waitInSync(env, 'once', 'rot-once');
      expect(rotationsOf(env, 'rot-once')).toBe(0);

      await env.requestRotation('once', '1');
      const { ug, token: first } = await waitHandled(env, 'once', 'rot-once', '1');
      expect(first).not.toBe(original);
      expect(sha256(first)).toBe(env.simGroup('rot-once')?.tokenSha256);
      expect(ug.status?.rotation?.lastHandledRequest).toBe('1');
      expect(ug.status?.rotation?.lastRotationTime).toBeDefined();
      expect(Number.isNaN(Date.parse(ug.status?.rotation?.lastRotationTime ?? ''))).toBe(false);
      expect(rotationsOf(env, 'rot-once')).toBe(1);
      const secret = await env.getSecret('once');
      expect(secret?.metadata?.annotations?.[HANDLED]).toBe('1');
      expect(secret?.metadata?.annotations?.[PENDING]).toBeUndefined();
      expect(secret?.metadata?.annotations?.[TOKEN_SHA]).toBe(sha256(first));
      await waitForEvent(env, 'once', 'TokenRotated', 'Normal', '"1"');

      // The old token is dead at the service: rotating it is refused.
      const stale = await rotateAtService(env, original);
      expect(stale.body.success).toBe(0);
      expect(stale.status).toBe(400);
      expect(rotationsOf(env, 'rot-once')).toBe(1);

      // Re-applying the same value, touching another annotation, even changing the spec: no new rotation.
      const callsBefore = rotateCalls(env);
      await env.requestRotation('once', '1');
      await env.patchUserGroup('once', { metadata: { annotations: { 'example.com/touched': 'yes' } } });
      await env.patchUserGroup('once', { spec: { name: 'Once Renamed' } });
      await env.waitForReady('once');
      await eventually('the rename to reach the service', async () => (env.simGroup('rot-once')?.name === 'Once Renamed' ? true : undefined));
      await sleep(4_000);
      expect(rotationsOf(env, 'rot-once')).toBe(1);
      expect(rotateCalls(env)).toBe(callsBefore);
      expect(await tokenOf(env, 'once')).toBe(first);
      expect(sha256(first)).toBe(env.simGroup('rot-once')?.tokenSha256);
      expect((await env.getUserGroup('once')).status?.rotation?.lastHandledRequest).toBe('1');

      // A new value rotates once more.
      await env.requestRotation('once', '2');
      const { token: second } = await waitHandled(env, 'once', 'rot-once', '2');
      expect(second).not.toBe(first);
      expect(second).not.toBe(original);
      await sleep(2_000);
      expect(rotationsOf(env, 'rot-once')).toBe(2);
      expect(rotateCalls(env)).toBe(callsBefore + 1);
      expect((await env.getSecret('once'))?.metadata?.annotations?.[HANDLED]).toBe('2');

      // The controller never removes the request annotation (nor the unrelated one).
      const final = await env.getUserGroup('once');
      expect(final.metadata.annotations?.[ROTATE]).toBe('2');
      expect(final.metadata.annotations?.['example.com/touched']).toBe('yes');
    } finally {
      await op.stop();
    }
  });

  it('rotates exactly once a request made while the controller was down', async () => {
    const first = await start(env);
    let original: string;
    try {
      await env.createUserGroup('offline', { userGroupId: 'rot-offline', name: 'Offline' });
      ({ token: original } = await waitInSync(env, 'offline', 'rot-offline'));
    } finally {
      await first.stop();
    }
    await env.requestRotation('offline', 'while-down');
    await sleep(1_000);
    expect(rotationsOf(env, 'rot-offline')).toBe(0);

    const second = await start(env);
    try {
      const { token } = await waitHandled(env, 'offline', 'rot-offline', 'while-down');
      expect(token).not.toBe(original);
      await sleep(3_000);
      expect(rotationsOf(env, 'rot-offline')).toBe(1);
      expect(await tokenOf(env, 'offline')).toBe(token);
      expect((await env.getUserGroup('offline')).metadata.annotations?.[ROTATE]).toBe('while-down');
    } finally {
      await second.stop();
    }
  });

  it('a controller killed between the POST and the Secret write converges to the service token with no second POST', async () => {
    const first = await start(env, 'process');
    let original: string;
    try {
      await env.createUserGroup('crash', { userGroupId: 'rot-crash', name: 'Crash' });
      ({ token: original } = await waitInSync(env, 'crash', 'rot-crash'));
    } catch (err) {
      await first.stop();
      throw err;
    }
    env.sim.resetStats(env.apiKey);

    // The service applies a call after the delay, even if the client has gone away by then.
    env.sim.setFaults({ latencyMs: 6_000 });
    await env.requestRotation('crash', 'c1');
    await eventually(
      'the rotation-pending annotation (POST about to be / in flight)',
      async () => {
        const secret = await env.getSecret('crash');
        return secret?.metadata?.annotations?.[PENDING] === 'c1' ? true : undefined;
      },
      30_000,
      50,
    );
    // The POST follows the pending write within milliseconds; leave it a moment to leave the process.
    await sleep(1_000);
    expect(rotationsOf(env, 'rot-crash')).toBe(0);
    await first.kill();

    await eventually('the in-flight rotation to be applied at the service', async () => (rotationsOf(env, 'rot-crash') === 1 ? true : undefined), 30_000);
    // The crash window was really hit: the Secret still holds the old token, with the intent recorded.
    const stranded = await env.getSecret('crash');
    expect(await tokenOf(env, 'crash')).toBe(original);
    expect(stranded?.metadata?.annotations?.[PENDING]).toBe('c1');
    expect(sha256(original)).not.toBe(env.simGroup('rot-crash')?.tokenSha256);
    expect((await env.getUserGroup('crash')).status?.rotation?.lastHandledRequest).toBeUndefined();

    env.sim.setFaults({});
    const second = await start(env, 'process');
    try {
      const { ug, token } = await waitHandled(env, 'crash', 'rot-crash', 'c1');
      expect(token).not.toBe(original);
      expect(sha256(token)).toBe(env.simGroup('rot-crash')?.tokenSha256);
      expect(ug.status?.rotation?.lastHandledRequest).toBe('c1');
      const secret = await env.getSecret('crash');
      expect(secret?.metadata?.annotations?.[PENDING]).toBeUndefined();
      expect(secret?.metadata?.annotations?.[HANDLED]).toBe('c1');
      await sleep(3_000);
      expect(rotationsOf(env, 'rot-crash')).toBe(1);
      expect(rotateCalls(env)).toBe(1);
      expect(await tokenOf(env, 'crash')).toBe(token);
      await waitForEvent(env, 'crash', 'TokenRotated', 'Normal', '"c1"');
    } finally {
      await second.stop();
    }
  });

  it('a request after the token was rotated behind the operator revokes the token current at the service, not the stale one', async () => {
    const op = await start(env);
    try {
      await env.createUserGroup('stale', { userGroupId: 'rot-stale', name: 'Stale' });
      const { token: original } = await waitInSync(env, 'stale', 'rot-stale');
      env.sim.resetStats(env.apiKey);

      // Rotated elsewhere (the company's backend, a restored backup): the Secret's token is no longer current.
      const elsewhere = await rotateAtService(env, original);
      expect(elsewhere.body.success).toBe(1);
      const leaked = elsewhere.body.user_group?.token ?? '';
      expect(leaked).toMatch(/^[A-Za-z0-9]{64}$/);
      expect(await tokenOf(env, 'stale')).toBe(original);

      await env.requestRotation('stale', 's1');
      const { token: stored } = await waitHandled(env, 'stale', 'rot-stale', 's1');
      await sleep(2_000);
      // The request revoked the token the service held when it was asked (`leaked`): one more rotation, ours.
      expect(stored).not.toBe(leaked);
      expect(stored).not.toBe(original);
      expect(rotationsOf(env, 'rot-stale')).toBe(2);
      expect(env.calls().rotate.ok).toBe(2);
      expect(env.calls().rotate.unknown_token).toBe(0);
      expect(sha256(stored)).toBe(env.simGroup('rot-stale')?.tokenSha256);
      expect((await rotateAtService(env, leaked)).body.success).toBe(0);
      const status = (await env.getUserGroup('stale')).status as { rotation?: { lastRevoked?: Record<string, string> } } | undefined;
      expect(status?.rotation?.lastRevoked).toMatchObject({ request: 's1', by: 'ThisController' });
      await waitForEvent(env, 'stale', 'TokenRotated', 'Normal', '"s1"');
    } finally {
      await op.stop();
    }
  });

  it('rotates ten UserGroups requested at once, each exactly once', async () => {
    const op = await start(env);
    try {
      const ids = Array.from({ length: 10 }, (_, i) => i);
      await Promise.all(ids.map((i) => env.createUserGroup(`multi-${i}`, { userGroupId: `rot-multi-${i}`, name: `Multi ${i}` })));
      const before = await Promise.all(ids.map((i) => waitInSync(env, `multi-${i}`, `rot-multi-${i}`, 90_000)));
      env.sim.resetStats(env.apiKey);

      await Promise.all(ids.map((i) => env.requestRotation(`multi-${i}`, `value-${i}`)));
      const after = await Promise.all(ids.map((i) => waitHandled(env, `multi-${i}`, `rot-multi-${i}`, `value-${i}`, 90_000)));
      await sleep(3_000);
      for (const i of ids) {
        expect(after[i]?.token).not.toBe(before[i]?.token);
        expect(rotationsOf(env, `rot-multi-${i}`)).toBe(1);
        expect(sha256((await tokenOf(env, `multi-${i}`)) ?? '')).toBe(env.simGroup(`rot-multi-${i}`)?.tokenSha256);
      }
      expect(env.calls().rotate.ok).toBe(10);
      expect(rotateCalls(env)).toBe(10);
    } finally {
      await op.stop();
    }
  });

  it('does not mark a request handled when a refused rotation left the held token current (success 0 on the POST)', async () => {
    // A scripted fault source: planCall takes exactly three draws per call (jitter, spike, fault);
    // the fault draw is 0 (fault) while `armed` > 0 and 0.99 (no fault) otherwise.
    let draws = 0;
    let spared = 0;
    let armed = 0;
    const random = (): number => {
      const slot = draws++ % 3;
      if (slot < 2) return 0;
      if (spared > 0) {
        spared -= 1;
        return 0.99;
      }
      if (armed > 0) {
        armed -= 1;
        return 0;
      }
      return 0.99;
    };
    const own = await TestEnv.create('rotation-sz', { random });
    envs.push(own);
    const op = await start(own);
    try {
      await own.createUserGroup('zero', { userGroupId: 'rot-zero', name: 'Zero' });
      const { token: original } = await waitInSync(own, 'zero', 'rot-zero');
      own.sim.setFaults({ successZeroRate: 0.5 });
      // The next call (the PUT that reads the current token) is answered; the one after it (the POST) with
      // {"success":0}: the service rotated nothing.
      spared = 1;
      armed = 1;
      await own.requestRotation('zero', 'z1');
      await eventually('the POST to be answered with success 0', async () => (own.calls().rotate.injected_success_zero === 1 ? true : undefined));
      // Whatever path the controller takes, a request recorded as handled must mean a rotated token:
      // the held token was current, so the refusal was not "rotated elsewhere".
      const { token } = await waitHandled(own, 'zero', 'rot-zero', 'z1');
      const notes = (await own.eventsFor('zero')).map((e) => `${e.type} ${e.reason}: ${e.note}`).join('\n');
      expect(rotationsOf(own, 'rot-zero'), `request "z1" was marked handled; Events:\n${notes}`).toBe(1);
      expect(token).not.toBe(original);
    } finally {
      await op.stop();
    }
  });

  it('never puts a token or the API key into logs, Events or status', async () => {
    expect(seenTokens.size).toBeGreaterThan(10);
    const logs = handles.flatMap((h) => h.logs);
    expect(logs.length).toBeGreaterThan(0);
    const texts: string[] = [...logs];
    for (const e of envs) {
      const events = await e.events.listNamespacedEvent({ namespace: e.namespace });
      texts.push(...events.items.map((ev) => JSON.stringify(ev)));
      const ugs = (await e.custom.listNamespacedCustomObject({
        group: 'usergroup.dev',
        version: 'v1',
        namespace: e.namespace,
        plural: 'usergroups',
      })) as { items: UserGroupObject[] };
      texts.push(...ugs.items.map((ug) => JSON.stringify(ug)));
    }
    const secrets = [...envs.map((e) => e.apiKey), ...seenTokens];
    for (const text of texts) {
      for (const secret of secrets) expect(text.includes(secret), `a secret leaked into: ${text.slice(0, 300)}`).toBe(false);
    }
  });
});
