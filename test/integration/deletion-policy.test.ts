import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, CoordinationV1Api, PatchStrategy, setHeaderOptions, type V1ManagedFieldsEntry, type V1Secret } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TOKEN_RECORD_ANNOTATION } from '../../src/api/constants.js';
import { API_KEY_SECRET_TYPE } from '../../src/controller/connections.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { group, TestEnv, version, type OperatorHandle } from '../support/operator.js';
import { startRecordingProxy, type RecordedRequest, type RecordingProxy } from '../support/recording-proxy.js';
import { createUserGroupAs, deleteUserGroupAs, rewriteSecretAs, secretIn as secretInAsAdmin, sha256, tenantIdentity, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * spec.deletionPolicy against a real apiserver and kube-controller-manager (garbage collection and namespace
 * deletion really happen): Retain costs nothing and leaves the token valid; Rotate rotates once before the object
 * goes, also when its namespace is deleted; a service that fails holds a deletion no longer than
 * --deletion-rotation-timeout; suspended objects get no call. Then what tenants (real identities under a namespace
 * editor's Role) can do with the new surface: nothing. Every call is counted at a proxy in front of the simulator.
 */

const FINALIZER = 'usergroup.dev/rotate-on-delete';
/** --deletion-rotation-timeout, short for the test. */
const LIMIT_S = 10;
/** How long the simulator holds a call before it answers (the window in which a test deletes a UserGroup). */
const HOLD_MS = 3_000;
/** How long after its first pass the namespace controller looks again at content held by finalizers (finalizerEstimateSeconds 15 → 15/2+1 s), plus slack. */
const NAMESPACE_RECHECK_MS = 8_000 + 3_000;
const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Meta {
  name: string;
  uid?: string;
  finalizers?: string[];
  deletionTimestamp?: string | Date;
  managedFields?: V1ManagedFieldsEntry[];
}

const notFound = (err: unknown): boolean => err instanceof ApiException && err.code === 404;

/** Waits until the namespace is gone: the limit, plus room for the namespace controller's own 8 s cadence. */
async function namespaceGone(env: TestEnv, name: string): Promise<void> {
  await eventually(
    `namespace ${name} gone`,
    async () => {
      try {
        await env.core.readNamespace({ name });
        return undefined;
      } catch (err) {
        return notFound(err) ? true : undefined;
      }
    },
    LIMIT_S * 1000 + 60_000,
    250,
  );
}

describe('spec.deletionPolicy', () => {
  let env: TestEnv;
  let proxy: RecordingProxy;
  let operator: OperatorHandle;
  let a: Tenant;
  let b: Tenant;
  let c: Tenant;
  let doomed: string;
  let tenantSim: Simulator | undefined;
  const namespaces: string[] = [];

  beforeAll(async () => {
    env = await TestEnv.create('del');
    proxy = await startRecordingProxy(env.sim.url);
    for (const prefix of ['del-a', 'del-b', 'del-c', 'del-ns']) namespaces.push(await createNamespace(prefix, env.kc));
    [a, b, c] = (await Promise.all(namespaces.slice(0, 3).map((ns) => tenantIdentity(ns, env.kc)))) as [Tenant, Tenant, Tenant];
    doomed = namespaces[3] ?? '';
    await env.putClusterService(env.defaultService, {
      url: proxy.url,
      tenants: [
        { namespaces: [...namespaces], userGroupIds: { prefix: '{namespace}.' }, adoption: 'Keep' },
        { namespaces: [a.namespace, b.namespace], userGroupIds: { prefix: 'shared.' }, adoption: 'Keep' },
      ],
    });
    operator = await env.startOperator({ args: ['--namespaces', namespaces.join(','), '--deletion-rotation-timeout', `${LIMIT_S}s`] });
  }, 120_000);

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail')
      console.error(
        ifAssigned(operator)
          ?.logs.filter((l) => /deletion|finaliz|rotat/i.test(l))
          .slice(-40)
          .join('\n'),
      );
  });

  afterAll(async () => {
    await ifAssigned(env)?.close();
    await ifAssigned(proxy)?.stop();
    await tenantSim?.stop();
    for (const ns of namespaces) await deleteNamespace(ns, ifAssigned(env)?.kc).catch(() => undefined);
  });

  // --- What the test sees, as the admin ---------------------------------------------------------------

  async function ugIn(
    ns: string,
    name: string,
  ): Promise<{ metadata: Meta; status?: { conditions?: { type: string; status: string; reason: string }[] } } | undefined> {
    try {
      return (await env.custom.getNamespacedCustomObject({ group, version, namespace: ns, plural: 'usergroups', name })) as never;
    } catch (err) {
      if (notFound(err)) return undefined;
      throw err;
    }
  }

  const secretIn = (ns: string, name: string): Promise<V1Secret | undefined> => secretInAsAdmin({ env }, ns, name);

  async function tokenIn(ns: string, name: string): Promise<string> {
    const data = (await secretIn(ns, name))?.data?.['token'];
    if (data === undefined) throw new Error(`no token in ${ns}/${name}`);
    return Buffer.from(data, 'base64').toString('utf8');
  }

  /** Synced, and the finalizers on the UserGroup and its Secret are as `finalized` says. */
  async function waitSynced(ns: string, name: string, finalized: boolean): Promise<void> {
    await eventually(
      `${ns}/${name} synced with finalizers ${finalized ? 'on' : 'off'}`,
      async () => {
        const ug = await ugIn(ns, name);
        const ready = ug?.status?.conditions?.find((x) => x.type === 'Ready');
        if (ready?.reason !== 'Synced') return undefined;
        const secret = await secretIn(ns, name);
        const on = (list: string[] | undefined): boolean => list?.includes(FINALIZER) === true;
        return secret && on(ug?.metadata.finalizers) === finalized && on(secret.metadata?.finalizers) === finalized ? true : undefined;
      },
      60_000,
    );
  }

  async function waitGone(ns: string, name: string, timeoutMs = 30_000): Promise<number> {
    return (await waitHeld(ns, name, timeoutMs)).goneAt;
  }

  /** Waits until the UserGroup is gone; how long it was held from its deletionTimestamp (whole seconds), as far as seen. */
  async function waitHeld(ns: string, name: string, timeoutMs: number): Promise<{ goneAt: number; heldMs: number }> {
    let deletedAt: number | undefined;
    await eventually(
      `${ns}/${name} gone`,
      async () => {
        const ug = await ugIn(ns, name);
        if (ug?.metadata.deletionTimestamp !== undefined) deletedAt ??= new Date(ug.metadata.deletionTimestamp).getTime();
        return ug ? undefined : true;
      },
      timeoutMs,
      100,
    );
    const goneAt = Date.now();
    return { goneAt, heldMs: deletedAt === undefined ? 0 : goneAt - deletedAt };
  }

  const posts = (): number => proxy.requests.filter((r) => r.method === 'POST').length;
  const postsWith = (token: string): number => proxy.postsWith(token).length;
  const valid = (userGroupId: string, token: string): boolean =>
    env.sim.groups(env.apiKey).find((g) => g.userGroupId === userGroupId)?.tokenSha256 === sha256(token);
  const deletions = async (result: string): Promise<number> =>
    (await operator.operator?.metrics.deleteRotations.get())?.values.find((v) => v.labels.result === result)?.value ?? 0;
  const reasons = async (ns: string, name: string): Promise<string[]> =>
    (await env.events.listNamespacedEvent({ namespace: ns })).items.filter((e) => e.regarding?.name === name).map((e) => `${e.type} ${e.reason}`);

  // --- The behaviour ---------------------------------------------------------------------------------

  it('Retain (the default): no finalizer, no metadata write, no call; the Secret is kept (the namespace its owner), the claim stays, the token stays valid', async () => {
    const id = `${a.namespace}.keep`;
    await createUserGroupAs(a, 'keep', { userGroupId: id, name: 'Keep' });
    await waitSynced(a.namespace, 'keep', false);
    const ug = await ugIn(a.namespace, 'keep');
    // The operator's only write to the UserGroup is its status: no finalizer, nothing else in metadata.
    expect((ug?.metadata.managedFields ?? []).filter((m) => m.manager === 'usergroup-operator').map((m) => m.subresource)).toEqual(['status']);
    expect((await secretIn(a.namespace, 'keep'))?.metadata?.finalizers ?? []).toEqual([]);
    const token = await tokenIn(a.namespace, 'keep');
    const before = posts();
    const calls = proxy.requests.length;

    await deleteUserGroupAs(a, 'keep');
    await waitGone(a.namespace, 'keep', 10_000);
    // The garbage collector removes the UserGroup's reference and leaves the Secret to its other owner, the namespace.
    const kept = await eventually(
      "the token Secret kept, the UserGroup's reference gone",
      async () => {
        const s = await secretIn(a.namespace, 'keep');
        return s?.metadata?.ownerReferences?.map((o) => o.kind).join() === 'Namespace' ? s : undefined;
      },
      60_000,
    );
    expect(kept.data?.['token'] && Buffer.from(kept.data['token'], 'base64').toString('utf8')).toBe(token);
    expect(posts()).toBe(before);
    expect(proxy.requests.length).toBe(calls);
    expect((await env.claims([a.namespace])).map((x) => x.spec.userGroupId)).toContain(id);
    expect(valid(id, token)).toBe(true);
  });

  it('Rotate: exactly one POST with the held token when the UserGroup is deleted; the old token no longer works', async () => {
    const id = `${a.namespace}.rot`;
    await createUserGroupAs(a, 'rot', { userGroupId: id, name: 'Rot', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'rot', true);
    const token = await tokenIn(a.namespace, 'rot');
    const before = posts();
    const rotated = await deletions('rotated');

    await deleteUserGroupAs(a, 'rot');
    await waitGone(a.namespace, 'rot');
    expect(postsWith(token)).toBe(1);
    expect(posts() - before).toBe(1);
    expect(valid(id, token)).toBe(false);
    // Counted and told just after the finalizer went (Events are written from a queue).
    await eventually('the rotated deletion counted', async () => ((await deletions('rotated')) === rotated + 1 ? true : undefined), 5_000);
    await eventually('the Event', async () => ((await reasons(a.namespace, 'rot')).includes('Normal TokenRotatedOnDelete') ? true : undefined), 10_000);
    await eventually('the token Secret garbage-collected', async () => ((await secretIn(a.namespace, 'rot')) ? undefined : true), 60_000);
  });

  // --- Deleted between the first PUT and the token Secret ----------------------------------------------

  /** The token in a recorded answer of the service (user_group.token), if it has one. */
  const answerToken = (r: RecordedRequest): string | undefined => {
    try {
      const token = (JSON.parse(r.response ?? '') as { user_group?: { token?: unknown } }).user_group?.token;
      return typeof token === 'string' ? token : undefined;
    } catch {
      return undefined;
    }
  };

  /**
   * After a Rotate UserGroup deleted before its Secret held a token: the token the PUTs handed out (every PUT
   * answers with the same one) is rotated exactly once, and neither it nor the rotation's new token is in any Secret
   * of the namespace or in a log line of the controllers.
   */
  async function expectRotatedOnce(ns: string, name: string, id: string, postsBefore: number, logs: readonly string[]): Promise<void> {
    const handed = [...new Set(proxy.putsFor(id).map(answerToken))].filter((t) => t !== undefined);
    expect(handed, 'the token the PUTs answered with').toHaveLength(1);
    const token = handed[0] ?? '';
    expect(env.sim.stats(env.apiKey).rotationsByUserGroupId[id]).toBe(1);
    expect(postsWith(token)).toBe(1);
    expect(posts() - postsBefore).toBe(1);
    expect(valid(id, token)).toBe(false);
    const fresh = proxy.postsWith(token).map(answerToken)[0];
    expect(fresh, 'the rotation answered with the new token').toBeDefined();
    expect(valid(id, fresh ?? '')).toBe(true);
    await eventually('the Event', async () => ((await reasons(ns, name)).includes('Normal TokenRotatedOnDelete') ? true : undefined), 10_000);
    await eventually('no token Secret left', async () => ((await secretIn(ns, name)) ? undefined : true), 60_000);
    const stored = (await env.core.listNamespacedSecret({ namespace: ns })).items.flatMap((x) =>
      Object.values(x.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8')),
    );
    for (const value of [token, fresh ?? '']) {
      expect(stored.some((v) => v.includes(value))).toBe(false);
      expect(logs.some((l) => l.includes(value))).toBe(false);
    }
  }

  it('Rotate, deleted while its first PUT is on its way: the finalizer was on before the PUT, the token it handed out rotated once, never stored or logged after', async () => {
    const id = `${a.namespace}.held`;
    const before = posts();
    // The simulator holds every call HOLD_MS before it applies and answers it.
    env.sim.setFaults({ latencyMs: HOLD_MS });
    try {
      await createUserGroupAs(a, 'held', { userGroupId: id, name: 'Held', deletionPolicy: 'Rotate' });
      await eventually('the first PUT on its way', async () => (proxy.putsFor(id).length > 0 ? true : undefined), 30_000, 20);
      // Read while that PUT is held: a finalizer written after the sync could not be there yet.
      expect((await ugIn(a.namespace, 'held'))?.metadata.finalizers).toContain(FINALIZER);
      await deleteUserGroupAs(a, 'held');
    } finally {
      env.sim.setFaults({});
    }
    expect(proxy.putsFor(id)[0]?.response, 'the deletion came before the PUT was answered').toBeUndefined();
    await waitGone(a.namespace, 'held');
    await expectRotatedOnce(a.namespace, 'held', id, before, operator.logs);
  });

  it('Rotate, the controller stopped between its first PUT and its Secret, the UserGroup deleted meanwhile: the restarted controller learns the token with a PUT and rotates it once', async () => {
    const id = `${a.namespace}.crash`;
    const args = ['--namespaces', namespaces.join(','), '--deletion-rotation-timeout', `${LIMIT_S}s`];
    await operator.stop();
    // No grace period: the stop cuts the PUT off in flight, and nothing after it is written.
    const stopped = await env.startOperator({ args: [...args, '--shutdown-grace-period', '0s'] });
    operator = stopped;
    const before = posts();
    env.sim.setFaults({ latencyMs: HOLD_MS });
    try {
      await createUserGroupAs(a, 'crash', { userGroupId: id, name: 'Crash', deletionPolicy: 'Rotate' });
      await eventually('the first PUT on its way', async () => (proxy.putsFor(id).length > 0 ? true : undefined), 30_000, 20);
      // The PUT reached the proxy whole; a moment more and the simulator has read it too (it then applies it after
      // HOLD_MS even with its client gone, as a service whose answer is lost on the way back).
      await sleep(300);
      await stopped.stop();
      await eventually(
        'the group created at the service',
        async () => (env.sim.groups(env.apiKey).some((g) => g.userGroupId === id) ? true : undefined),
        HOLD_MS + 10_000,
      );
    } finally {
      env.sim.setFaults({});
    }
    expect(proxy.putsFor(id)).toHaveLength(1);
    expect(proxy.putsFor(id)[0]?.clientClosedAt, 'the controller gone before the answer').toBeDefined();
    expect(await secretIn(a.namespace, 'crash')).toBeUndefined();
    expect((await ugIn(a.namespace, 'crash'))?.metadata.finalizers).toContain(FINALIZER);
    await deleteUserGroupAs(a, 'crash');

    operator = await env.startOperator({ args });
    await waitGone(a.namespace, 'crash');
    // One more PUT, the restarted controller's: the service has no read.
    expect(proxy.putsFor(id)).toHaveLength(2);
    await expectRotatedOnce(a.namespace, 'crash', id, before, [...stopped.logs, ...operator.logs]);
  });

  it("a namespace's deletion: one POST per Rotate UserGroup, and the namespace is gone within the limit", async () => {
    const ids = ['one', 'two'].map((n) => `${doomed}.${n}`);
    for (const [i, id] of ids.entries()) {
      await env.custom.createNamespacedCustomObject({
        group,
        version,
        namespace: doomed,
        plural: 'usergroups',
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'UserGroup',
          metadata: { name: `g${i}` },
          spec: { userGroupId: id, name: id, deletionPolicy: 'Rotate' },
        },
      });
    }
    for (let i = 0; i < ids.length; i++) await waitSynced(doomed, `g${i}`, true);
    const tokens = await Promise.all(ids.map((_, i) => tokenIn(doomed, `g${i}`)));
    const before = posts();

    const start = Date.now();
    await env.core.deleteNamespace({ name: doomed });
    // The namespace controller may delete the token Secrets before it reaches the UserGroups: do it first, for sure.
    for (let i = 0; i < ids.length; i++) await env.core.deleteNamespacedSecret({ namespace: doomed, name: `g${i}` });
    let heldMs = 0;
    for (let i = 0; i < ids.length; i++) heldMs = Math.max(heldMs, (await waitHeld(doomed, `g${i}`, LIMIT_S * 1000 + 30_000)).heldMs);
    await namespaceGone(env, doomed);
    const tookMs = Date.now() - start;
    console.log(
      `namespace deletion with ${ids.length} Rotate UserGroups: UserGroups held at most ${heldMs} ms from their deletionTimestamp, the namespace gone after ${tookMs} ms (limit ${LIMIT_S} s)`,
    );
    for (const [i, token] of tokens.entries()) {
      expect(postsWith(token), `POSTs with the token of ${ids[i]}`).toBe(1);
      expect(valid(ids[i] ?? '', token)).toBe(false);
    }
    expect(posts() - before).toBe(ids.length);
    // The rotations hold the deletion for moments; the namespace controller, finding content with finalizers on
    // its first pass, looks again 15/2+1 = 8 s later (its finalizer estimate): the namespace goes at the limit
    // plus that re-check at the latest.
    expect(heldMs).toBeLessThan(LIMIT_S * 1000);
    expect(tookMs).toBeLessThan(LIMIT_S * 1000 + NAMESPACE_RECHECK_MS);
  });

  it('the service failing: the deletion is held no longer than --deletion-rotation-timeout, then goes with a Warning and the metric', async () => {
    const id = `${a.namespace}.down`;
    await createUserGroupAs(a, 'down', { userGroupId: id, name: 'Down', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'down', true);
    const token = await tokenIn(a.namespace, 'down');
    const abandoned = await deletions('abandoned');
    env.sim.setFaults({ errorRate: 1 });
    try {
      await deleteUserGroupAs(a, 'down');
      const deletionTimestamp = (await ugIn(a.namespace, 'down'))?.metadata.deletionTimestamp;
      const goneAt = await waitGone(a.namespace, 'down', LIMIT_S * 1000 + 30_000);
      // deletionTimestamp has whole seconds: the hold is at least the limit less one second.
      const heldMs = goneAt - new Date(deletionTimestamp ?? 0).getTime();
      console.log(`a deletion with the service failing was held ${heldMs} ms (limit ${LIMIT_S} s)`);
      expect(heldMs).toBeGreaterThanOrEqual(LIMIT_S * 1000 - 1000);
      expect(heldMs).toBeLessThan(LIMIT_S * 1000 + 12_000);
      expect(postsWith(token)).toBeGreaterThanOrEqual(1);
    } finally {
      env.sim.setFaults({});
    }
    expect(valid(id, token)).toBe(true);
    await eventually('the abandoned deletion counted', async () => ((await deletions('abandoned')) === abandoned + 1 ? true : undefined), 5_000);
    await eventually(
      'the Warning',
      async () => ((await reasons(a.namespace, 'down')).includes('Warning RotationOnDeleteAbandoned') ? true : undefined),
      10_000,
    );
  });

  it('suspended: the finalizers go, and the deletion makes no call', async () => {
    const id = `${a.namespace}.susp`;
    await createUserGroupAs(a, 'susp', { userGroupId: id, name: 'Susp', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'susp', true);
    const token = await tokenIn(a.namespace, 'susp');
    await a.custom.patchNamespacedCustomObject(
      { group, version, namespace: a.namespace, plural: 'usergroups', name: 'susp', body: { spec: { suspend: true } } },
      MERGE,
    );
    await eventually(
      'the finalizers removed from the suspended UserGroup and its Secret',
      async () => {
        const ug = await ugIn(a.namespace, 'susp');
        const secret = await secretIn(a.namespace, 'susp');
        return !ug?.metadata.finalizers?.includes(FINALIZER) && !secret?.metadata?.finalizers?.includes(FINALIZER) ? true : undefined;
      },
      30_000,
    );
    const before = posts();
    await deleteUserGroupAs(a, 'susp');
    await waitGone(a.namespace, 'susp', 10_000);
    expect(posts()).toBe(before);
    expect(valid(id, token)).toBe(true);
  });

  // --- What a tenant can do with it ----------------------------------------------------------------

  it("attack: Rotate on a UserGroup whose id another namespace holds, with the finalizer set by hand, then deleted: no call, the holder's token still works", async () => {
    await createUserGroupAs(a, 'holder', { userGroupId: 'shared.x', name: 'Holder' });
    await waitSynced(a.namespace, 'holder', false);
    const holderToken = await tokenIn(a.namespace, 'holder');
    const before = proxy.requests.length;
    await createUserGroupAs(b, 'squat', { userGroupId: 'shared.x', name: 'Squat', deletionPolicy: 'Rotate' });
    await waitForReasonIn(b.namespace, 'squat', 'UserGroupIdClaimed');
    // The tenant puts the operator's finalizer on its object itself.
    await b.custom.patchNamespacedCustomObject(
      { group, version, namespace: b.namespace, plural: 'usergroups', name: 'squat', body: { metadata: { finalizers: [FINALIZER] } } },
      MERGE,
    );
    await deleteUserGroupAs(b, 'squat');
    await waitGone(b.namespace, 'squat', 15_000);
    const caused = proxy.requests.length - before;
    console.log(`attack a: ${caused} service calls caused`);
    expect(caused).toBe(0);
    expect(postsWith(holderToken)).toBe(0);
    expect(valid('shared.x', holderToken)).toBe(true);
  });

  it("attack: another namespace's token written into the tenant's own Secret, then its Rotate UserGroup deleted: no call with the foreign token", async () => {
    const victimId = `${b.namespace}.victim`;
    await createUserGroupAs(b, 'victim', { userGroupId: victimId, name: 'Victim' });
    await waitSynced(b.namespace, 'victim', false);
    const foreign = await tokenIn(b.namespace, 'victim');
    await createUserGroupAs(a, 'thief', { userGroupId: `${a.namespace}.thief`, name: 'Thief', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'thief', true);
    const own = await tokenIn(a.namespace, 'thief');
    const before = posts();
    await rewriteSecretAs(a, 'thief', (s) => {
      s.data = { token: Buffer.from(foreign).toString('base64') };
    });
    await deleteUserGroupAs(a, 'thief');
    await waitGone(a.namespace, 'thief');
    console.log(`attack b: ${posts() - before} POSTs, ${postsWith(own)} with the tenant's own token`);
    expect(postsWith(foreign)).toBe(0);
    expect(valid(victimId, foreign)).toBe(true);
    // Its own token may have been restored to the Secret before the deletion was seen: at most that one rotated.
    expect(posts() - before).toBe(postsWith(own));
    expect(postsWith(own)).toBeLessThanOrEqual(1);
  });

  it("attack: another namespace's token written into the tenant's own Secret with its token record removed, then its Rotate UserGroup deleted: the deletion learns the tenant's own token, the foreign one is never sent", async () => {
    const victimId = `${b.namespace}.victim2`;
    await createUserGroupAs(b, 'victim2', { userGroupId: victimId, name: 'Victim2' });
    await waitSynced(b.namespace, 'victim2', false);
    const foreign = await tokenIn(b.namespace, 'victim2');
    const thiefId = `${a.namespace}.thief2`;
    await createUserGroupAs(a, 'thief2', { userGroupId: thiefId, name: 'Thief2', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'thief2', true);
    const before = { posts: posts(), puts: proxy.putsFor(thiefId).length, victimPuts: proxy.putsFor(victimId).length };
    // No record left to vouch for the data: the deletion path treats it as no token held and asks the service.
    await rewriteSecretAs(a, 'thief2', (s) => {
      s.data = { token: Buffer.from(foreign).toString('base64') };
      delete s.metadata?.annotations?.[TOKEN_RECORD_ANNOTATION];
    });
    await deleteUserGroupAs(a, 'thief2');
    await waitGone(a.namespace, 'thief2');
    const caused = { posts: posts() - before.posts, puts: proxy.putsFor(thiefId).length - before.puts };
    console.log(`attack b2: ${caused.puts} PUTs for the tenant's own id, ${caused.posts} POSTs, ${postsWith(foreign)} with the foreign token`);
    expect(postsWith(foreign)).toBe(0);
    expect(valid(victimId, foreign)).toBe(true);
    expect(proxy.putsFor(victimId).length).toBe(before.victimPuts);
    // A restore of its own token before the deletion was seen, then the deletion's learning PUT: its own id only.
    expect(caused.puts).toBeLessThanOrEqual(2);
    expect(caused.posts).toBe(1);
  });

  it("attack: a tenant's own service that hangs the rotation, and the operator's finalizer on a Retain object: its namespace is still gone within the limit", async () => {
    const key = `key-${randomBytes(16).toString('hex')}`;
    tenantSim = await startSimulator({ apiKeys: [key] });
    await c.core.createNamespacedSecret({
      namespace: c.namespace,
      body: { metadata: { name: 'mine-key' }, type: API_KEY_SECRET_TYPE, stringData: { apiKey: key } },
    });
    await c.custom.createNamespacedCustomObject({
      group,
      version,
      namespace: c.namespace,
      plural: 'usergroupservices',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'UserGroupService',
        metadata: { name: 'mine' },
        spec: { url: tenantSim.url, apiKeySecretRef: { name: 'mine-key' }, allowInsecure: true },
      },
    });
    await createUserGroupAs(c, 'block', { userGroupId: 'block', name: 'Block', serviceRef: { name: 'mine' }, deletionPolicy: 'Rotate' });
    await waitSynced(c.namespace, 'block', true);
    await createUserGroupAs(c, 'plain', { userGroupId: `${c.namespace}.plain`, name: 'Plain' });
    await waitSynced(c.namespace, 'plain', false);
    await c.custom.patchNamespacedCustomObject(
      { group, version, namespace: c.namespace, plural: 'usergroups', name: 'plain', body: { metadata: { finalizers: [FINALIZER] } } },
      MERGE,
    );
    tenantSim.setFaults({ hangRate: 1 });
    const before = posts();

    const start = Date.now();
    await env.core.deleteNamespace({ name: c.namespace });
    let heldMs = 0;
    for (const name of ['block', 'plain']) heldMs = Math.max(heldMs, (await waitHeld(c.namespace, name, LIMIT_S * 1000 + 30_000)).heldMs);
    await namespaceGone(env, c.namespace);
    const tookMs = Date.now() - start;
    const tenantPosts = tenantSim.stats(key).operations.rotate;
    console.log(
      `attack c: UserGroups held at most ${heldMs} ms from their deletionTimestamp, the namespace in ${tookMs} ms; POSTs to the tenant's service ${JSON.stringify(tenantPosts)}; shared service POSTs ${posts() - before}`,
    );
    // Held at most the limit (deletionTimestamp has whole seconds: one more, and a moment to let go).
    expect(heldMs).toBeLessThan(LIMIT_S * 1000 + 2_000);
    // The namespace controller's own passes come on top: it reaches the UserGroups seconds after the namespace's
    // deletion began, and looks again 8 s after it found them held.
    expect(tookMs).toBeLessThan(LIMIT_S * 1000 + 2 * NAMESPACE_RECHECK_MS);
    expect(posts() - before).toBe(0);
    expect(tenantPosts.ok + tenantPosts.injected_hang).toBeLessThanOrEqual(1);
  });

  it('--rotate-on-delete=false (before a rollback below 0.3.0): every finalizer removed, none added, the Lease says released; a deletion then makes no call', async () => {
    const id = `${a.namespace}.off`;
    await createUserGroupAs(a, 'off', { userGroupId: id, name: 'Off', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'off', true);
    const token = await tokenIn(a.namespace, 'off');
    const lease = `deletion-policy-${randomBytes(3).toString('hex')}`;
    const leaseState = async (): Promise<string | undefined> => {
      try {
        return (await env.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: env.namespace, name: lease })).metadata?.annotations?.[
          'usergroup.dev/rotate-on-delete'
        ];
      } catch (err) {
        if (notFound(err)) return undefined;
        throw err;
      }
    };
    const withLease = ['--leader-elect', '--leader-election-namespace', env.namespace, '--leader-election-id', lease];
    // First as the chart runs it by default: its Lease says it keeps the finalizers.
    await operator.stop();
    operator = await env.startOperator({ args: ['--namespaces', namespaces.join(','), '--deletion-rotation-timeout', `${LIMIT_S}s`, ...withLease] });
    await eventually('the Lease says active', async () => ((await leaseState()) === 'active' ? true : undefined), 30_000);
    // Then the documented step before a rollback.
    await operator.stop();
    const before = posts();
    operator = await env.startOperator({
      args: ['--namespaces', namespaces.join(','), '--deletion-rotation-timeout', `${LIMIT_S}s`, '--rotate-on-delete=false', ...withLease],
    });
    await waitSynced(a.namespace, 'off', false);
    await eventually('the Lease says released', async () => ((await leaseState()) === 'released' ? true : undefined), 30_000);
    const left = (await operator.operator?.metrics.rotateOnDeleteFinalizers.get())?.values[0]?.value;
    expect(left).toBe(0);
    // A new Rotate UserGroup gets none either, and a deletion makes no call: the token stays valid.
    await createUserGroupAs(a, 'off2', { userGroupId: `${a.namespace}.off2`, name: 'Off2', deletionPolicy: 'Rotate' });
    await waitSynced(a.namespace, 'off2', false);
    await deleteUserGroupAs(a, 'off');
    await waitGone(a.namespace, 'off', 10_000);
    expect(posts()).toBe(before);
    expect(valid(id, token)).toBe(true);
  });

  async function waitForReasonIn(ns: string, name: string, reason: string): Promise<void> {
    await eventually(
      `${ns}/${name} Ready reason ${reason}`,
      async () => ((await ugIn(ns, name))?.status?.conditions?.find((x) => x.type === 'Ready')?.reason === reason ? true : undefined),
      30_000,
    );
  }
});
