import { CoordinationV1Api, PatchStrategy, setHeaderOptions, type EventsV1Event } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_REQUEST_BUDGETS, type RequestBudgetOptions } from '../../src/controller/request-budget.js';
import { decodeDebts, REQUEST_BUDGETS_ANNOTATION } from '../../src/controller/request-budget-record.js';
import { SHARD_GROUP_LABEL } from '../../src/kube/shard-membership.js';
import { killAllControllers, msgIs, signalAndWait, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { LEADER_ARGS, LEASE_MS, SHARD_ARGS } from '../support/leader-lease.js';
import { group, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { annotateUserGroupAs, createUserGroupAs, tenantIdentity, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * Every tenant-triggered call is budgeted per namespace (request-budget.ts), against the real apiserver, the real
 * controller process and the simulator: a tenant, as its own ServiceAccount under a namespace editor's Role, writes
 * new rotation and sync requests in a loop for a minute and gets no more calls than its namespace's budgets allow,
 * nothing it asked for last is dropped, and another namespace's new UserGroup syncs at once meanwhile. The budgets
 * survive a leader change (the Lease carries them) and a shard's namespaces moving to another replica.
 */

const ROTATE = 'usergroup.dev/rotate-requested-at';
const SYNC = 'usergroup.dev/sync-requested-at';

afterAll(killAllControllers);

async function userGroupIn(env: TestEnv, namespace: string, name: string): Promise<UserGroupObject> {
  return (await env.custom.getNamespacedCustomObject({ group, version, namespace, plural: 'usergroups', name })) as UserGroupObject;
}

const ready = (ug: UserGroupObject): boolean => {
  const c = ug.status?.conditions?.find((x) => x.type === 'Ready');
  return c?.status === 'True' && c.reason === 'Synced' && ug.status?.observedGeneration === ug.metadata.generation;
};

async function waitSynced(env: TestEnv, namespace: string, name: string, timeoutMs = 60_000): Promise<UserGroupObject> {
  return eventually(
    `${namespace}/${name} Ready=True Synced`,
    async () => {
      const ug = await userGroupIn(env, namespace, name);
      return ready(ug) ? ug : undefined;
    },
    timeoutMs,
    100,
  );
}

async function eventsIn(env: TestEnv, namespace: string, reason: string): Promise<EventsV1Event[]> {
  return (await env.events.listNamespacedEvent({ namespace })).items.filter((e) => e.reason === reason);
}

/** The calls the simulator counted for these ids, by kind: PUTs (upserts) and POSTs (rotations). */
function callsFor(env: TestEnv, ids: readonly string[]): { puts: number; posts: number } {
  const stats = env.sim.stats(env.apiKey);
  const sum = (byId: Readonly<Record<string, number>>): number => ids.reduce((n, id) => n + (byId[id] ?? 0), 0);
  return { puts: sum(stats.upsertsByUserGroupId), posts: sum(stats.rotationsByUserGroupId) };
}

const allowed = (budget: RequestBudgetOptions, ms: number): number => budget.burst + Math.floor((ms / 60_000) * budget.perMinute);

const budgetArgs = (b: { sync: RequestBudgetOptions; rotation: RequestBudgetOptions }): string[] => [
  '--sync-request-burst',
  String(b.sync.burst),
  '--sync-requests-per-minute',
  String(b.sync.perMinute),
  '--rotation-request-burst',
  String(b.rotation.burst),
  '--rotation-requests-per-minute',
  String(b.rotation.perMinute),
];

// =============================================================================================

describe('a tenant writing requests in a loop for a minute', () => {
  let env: TestEnv;
  let flood: Tenant;
  let quiet: Tenant;

  beforeAll(async () => {
    env = await TestEnv.create('rb-ops');
    flood = await tenantIdentity(await createNamespace('rb-flood', env.kc), env.kc);
    quiet = await tenantIdentity(await createNamespace('rb-quiet', env.kc), env.kc);
    await env.putClusterService(env.defaultService, {
      url: env.sim.url,
      tenants: [{ namespaces: [flood.namespace, quiet.namespace], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
    // The operator as shipped: the default budgets (10 at once, then 10 a minute, for each kind).
    await env.startOperator({ mode: 'process', args: ['--namespaces', `${flood.namespace},${quiet.namespace}`] });
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
    for (const t of [ifAssigned(flood), ifAssigned(quiet)]) if (t) await deleteNamespace(t.namespace, env.kc).catch(() => undefined);
  });

  it('gets at most its budgets in service calls, has its last requests answered, and another namespace syncs in under 2 s meanwhile', async () => {
    const budgets = DEFAULT_REQUEST_BUDGETS;
    const names = Array.from({ length: 5 }, (_, i) => `flood-${i}`);
    const ids = names.map((n) => `${flood.namespace}.${n}`);
    for (const [i, name] of names.entries()) await createUserGroupAs(flood, name, { userGroupId: ids[i] ?? '', name: `Flood ${i}` });
    for (const name of names) await waitSynced(env, flood.namespace, name);
    const before = callsFor(env, ids);

    const floodMs = 60_000;
    const started = Date.now();
    let round = 0;
    let writes = 0;
    const looping = (async () => {
      while (Date.now() - started < floodMs) {
        round++;
        const value = `v-${String(round)}`;
        await Promise.all(names.map((name) => annotateUserGroupAs(flood, name, { [ROTATE]: value, [SYNC]: value })));
        writes += names.length;
      }
    })();

    // A third of the way in, another tenant of the same account creates a UserGroup.
    await sleep(floodMs / 3);
    const quietId = `${quiet.namespace}.newcomer`;
    const createdAt = Date.now();
    await createUserGroupAs(quiet, 'newcomer', { userGroupId: quietId, name: 'Newcomer' });
    await waitSynced(env, quiet.namespace, 'newcomer', 30_000);
    const quietSyncMs = Date.now() - createdAt;

    await looping;
    const stoppedAt = Date.now();
    const last = `v-${String(round)}`;
    const duringLoop = callsFor(env, ids);
    // Nothing dropped: the values written last are handled, within what the budget needs for one request per group.
    const drainBoundMs = Math.ceil((names.length / Math.min(budgets.sync.perMinute, budgets.rotation.perMinute)) * 60_000) + 10_000;
    await eventually(
      'every group to handle the last rotation and sync request',
      async () => {
        const ugs = await Promise.all(names.map((n) => userGroupIn(env, flood.namespace, n)));
        return ugs.every((ug) => ug.status?.rotation?.lastHandledRequest === last && ug.status.lastHandledSyncRequest === last) ? true : undefined;
      },
      drainBoundMs + 30_000,
      250,
    );
    const drainedMs = Date.now() - stoppedAt;
    const elapsedMs = Date.now() - started;
    const after = callsFor(env, ids);
    const puts = after.puts - before.puts;
    const posts = after.posts - before.posts;
    const minutes = elapsedMs / 60_000;
    const stats = env.sim.stats(env.apiKey);
    console.log(
      `[request budgets] ${String(writes)} annotation writes (rotate and sync) on ${String(names.length)} groups in ${(floodMs / 1000).toFixed(0)} s by the tenant's ServiceAccount; ` +
        `over ${(elapsedMs / 1000).toFixed(1)} s (loop + drain): sync PUTs ${String(puts)} (budget ${String(budgets.sync.burst)} + ${String(budgets.sync.perMinute)}/min × ${minutes.toFixed(2)} min = ${String(allowed(budgets.sync, elapsedMs))}; ${(puts / minutes).toFixed(1)}/min), ` +
        `rotation POSTs ${String(posts)} (budget ${String(allowed(budgets.rotation, elapsedMs))}; ${(posts / minutes).toFixed(1)}/min); during the loop alone ${String(duringLoop.puts - before.puts)} PUTs, ${String(duringLoop.posts - before.posts)} POSTs; ` +
        `last values handled ${(drainedMs / 1000).toFixed(1)} s after the loop stopped (bound ${(drainBoundMs / 1000).toFixed(0)} s); other namespace's new UserGroup Ready=True in ${String(quietSyncMs)} ms`,
    );

    expect(puts).toBeLessThanOrEqual(allowed(budgets.sync, elapsedMs));
    expect(posts).toBeLessThanOrEqual(allowed(budgets.rotation, elapsedMs));
    // The budget, not a lack of requests, held the tenant: it asked for far more and got at least its burst.
    expect(writes).toBeGreaterThan(10 * (budgets.sync.burst + budgets.rotation.burst));
    expect(puts).toBeGreaterThanOrEqual(budgets.sync.burst);
    expect(posts).toBeGreaterThanOrEqual(budgets.rotation.burst);
    // Every call is counted by id: no POST was refused (a refused one names no group), no PUT failed.
    expect(stats.operations.rotate.ok).toBe(Object.values(stats.rotationsByUserGroupId).reduce((a, b) => a + b, 0));
    expect(stats.operations.upsert.created + stats.operations.upsert.updated).toBe(Object.values(stats.upsertsByUserGroupId).reduce((a, b) => a + b, 0));
    expect(drainedMs).toBeLessThanOrEqual(drainBoundMs);
    expect(quietSyncMs).toBeLessThan(2_000);
    // Told, once per slot: both kinds of waiting Event were written in the flooded namespace, none in the other.
    await eventually('the waiting Events', async () =>
      (await eventsIn(env, flood.namespace, 'RotationRequestWaiting')).length > 0 && (await eventsIn(env, flood.namespace, 'SyncRequestWaiting')).length > 0
        ? true
        : undefined,
    );
    const waiting = await eventsIn(env, flood.namespace, 'RotationRequestWaiting');
    expect(waiting[0]?.note).toMatch(
      /^rotation request "v-\d+" waits \d+s for its turn: rotation requests in this namespace are limited to 10 at once, then 10 a minute$/,
    );
    expect([...(await eventsIn(env, quiet.namespace, 'RotationRequestWaiting')), ...(await eventsIn(env, quiet.namespace, 'SyncRequestWaiting'))]).toEqual([]);
  }, 300_000);
});

// =============================================================================================

/** A Lease's record of what the budgets owe, as the reader sees it now. */
async function leaseDebts(env: TestEnv, name: string): Promise<ReturnType<typeof decodeDebts>> {
  const lease = await env.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: env.namespace, name });
  return decodeDebts(lease.metadata?.annotations?.[REQUEST_BUDGETS_ANNOTATION], Date.now());
}

/** Small budgets, so that a spent one is plain to see: 2 rotations at once, then one every 30 s. */
const SMALL = { sync: { burst: 2, perMinute: 2 }, rotation: { burst: 2, perMinute: 2 } };
const SLOT_MS = 60_000 / SMALL.rotation.perMinute;

const rotationsOf = (env: TestEnv, id: string): number => env.sim.stats(env.apiKey).rotationsByUserGroupId[id] ?? 0;

/** Requests a rotation of each group and waits until each is handled; returns when the last was seen handled. */
async function rotateAll(env: TestEnv, names: readonly string[], value: string): Promise<number> {
  await Promise.all(names.map((n) => env.requestRotation(n, value)));
  await eventually(
    `${names.join(', ')} rotated for ${value}`,
    async () =>
      (await Promise.all(names.map((n) => env.getUserGroup(n)))).every((ug) => ug.status?.rotation?.lastHandledRequest === value) ? true : undefined,
    30_000,
    100,
  );
  return Date.now();
}

describe('a leader change does not refill the budgets', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('rb-lead');
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  it('spent by the leader, recorded on its Lease: after a SIGKILL the new leader makes the namespace wait for the same slot', async () => {
    const args = [...LEADER_ARGS(env, 'rb-lead'), ...budgetArgs(SMALL)];
    const a = env.spawnController(args);
    const b = env.spawnController(args);
    const leader = await eventually('a leader', async () => [a, b].find((c) => c.logs.some(msgIs('became leader'))), 30_000, 100);
    const standby = leader === a ? b : a;
    for (const i of [1, 2, 3]) await env.createUserGroup(`g${i}`, { userGroupId: `lc-${i}`, name: `Group ${i}` });
    for (const i of [1, 2, 3]) await env.waitForReady(`g${i}`);

    // The leader spends the namespace's burst of rotations; its next renewal records the debt on the Lease.
    const spentAt = await rotateAll(env, ['g1', 'g2'], 'spend');
    const recorded = await eventually('the debt on the Lease', async () => (await leaseDebts(env, 'rb-lead')).rotation.get(env.namespace), 10_000, 100);
    await signalAndWait(leader, 'SIGKILL');
    // While nobody leads, the tenant asks for one more rotation.
    await env.requestRotation('g3', 'after');
    const took = await waitLog(standby, 'became leader', msgIs('became leader'), LEASE_MS + 20_000);

    const waiting = await eventually(
      'the new leader to say the request waits',
      async () => (await env.eventsFor('g3')).find((e) => e.reason === 'RotationRequestWaiting'),
      20_000,
      100,
    );
    expect(waiting.reportingInstance).toBe(standby.identity());
    expect(rotationsOf(env, 'lc-3')).toBe(0);
    await eventually('g3 rotated at its slot', async () => (rotationsOf(env, 'lc-3') === 1 ? true : undefined), 2 * SLOT_MS + 10_000, 100);
    const rotatedAfterMs = Date.now() - spentAt;
    console.log(
      `[request budgets] leader change: debt on the Lease ${String(Math.round(recorded / 1000))} s when the leader was killed; the new leader took over ${String(took.at - spentAt)} ms after the burst was spent, ` +
        `said "${String(waiting.note)}", and rotated g3 ${String(rotatedAfterMs)} ms after the burst (a slot every ${String(SLOT_MS / 1000)} s; a refilled budget would have rotated it at the takeover)`,
    );
    // A budget that started full on the new leader would have rotated g3 at once, at the takeover (within ~LEASE_MS).
    expect(rotatedAfterMs).toBeGreaterThanOrEqual(SLOT_MS - 3_000);
    expect(took.at - spentAt).toBeLessThan(SLOT_MS - 10_000);
    expect(rotationsOf(env, 'lc-1') + rotationsOf(env, 'lc-2')).toBe(2);
  });
});

// =============================================================================================

describe("a shard's namespaces moving to another replica keep their budgets", () => {
  let env: TestEnv;
  const namespaces: string[] = [];
  beforeAll(async () => {
    env = await TestEnv.create('rb-shard');
    for (let i = 0; i < 4; i++) namespaces.push(await createNamespace(`rb-sh${String(i)}`, env.kc));
    await env.putClusterService(env.defaultService, { url: env.sim.url, tenants: [{ namespaces, userGroupIds: { prefix: '' }, adoption: 'Keep' }] });
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
    for (const ns of namespaces) await deleteNamespace(ns, env.kc).catch(() => undefined);
  });

  it('a replica that leaves (SIGTERM: its Lease deleted) hands what it spent to the one taking its namespaces over', async () => {
    const args = [...SHARD_ARGS(env, 'rb-shard', namespaces), ...budgetArgs(SMALL)];
    const replicas: ControllerProcess[] = [env.spawnController(args), env.spawnController(args)];
    await Promise.all(replicas.map((r) => waitLog(r, 'two members', (e) => e.json?.['msg'] === 'shard view settled' && e.json['members'] === 2, 60_000)));
    const custom = (ns: string, name: string, spec: Record<string, unknown>): Promise<unknown> =>
      env.custom.createNamespacedCustomObject({
        group,
        version,
        namespace: ns,
        plural: 'usergroups',
        body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name }, spec },
      });
    for (const ns of namespaces) for (const i of [1, 2, 3]) await custom(ns, `g${String(i)}`, { userGroupId: `${ns}.g${String(i)}`, name: `G${String(i)}` });
    for (const ns of namespaces) for (const i of [1, 2, 3]) await waitSynced(env, ns, `g${String(i)}`);
    // A namespace and the replica whose share it is (it logged that namespace's syncs); rendezvous hashing may give
    // either replica all four, so the leaver is whichever owns the first namespace.
    const ownerOf = (n: string): ControllerProcess | undefined =>
      replicas.find((r) => r.logs.some((l) => l.json?.['msg'] === 'user group synced' && String(l.json['usergroup']).startsWith(`${n}/`)));
    const ns = namespaces[0];
    const leaver = ns === undefined ? undefined : ownerOf(ns);
    const stayer = replicas.find((r) => r !== leaver);
    if (!ns || !leaver || !stayer) throw new Error('no replica logged the first namespace');
    const id = (i: number): string => `${ns}.g${String(i)}`;

    const patch = (name: string, value: string): Promise<unknown> =>
      env.custom.patchNamespacedCustomObject(
        { group, version, namespace: ns, plural: 'usergroups', name, body: { metadata: { annotations: { [ROTATE]: value } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const rotated = (i: number): number => env.sim.stats(env.apiKey).rotationsByUserGroupId[id(i)] ?? 0;
    await Promise.all(['g1', 'g2'].map((n) => patch(n, 'spend')));
    await eventually('both rotated', async () => (rotated(1) === 1 && rotated(2) === 1 ? true : undefined), 30_000, 100);
    const spentAt = Date.now();
    // The leaver's Lease (the only replica working on that namespace) records the debt before it leaves.
    const leases = env.kc.makeApiClient(CoordinationV1Api);
    await eventually(
      "the debt on the leaver's Lease",
      async () => {
        const list = await leases.listNamespacedLease({ namespace: env.namespace, labelSelector: `${SHARD_GROUP_LABEL}=rb-shard` });
        return list.items.some((l) => decodeDebts(l.metadata?.annotations?.[REQUEST_BUDGETS_ANNOTATION], Date.now()).rotation.has(ns)) ? true : undefined;
      },
      10_000,
      100,
    );
    const stayerLogs = stayer.logs.length;
    await signalAndWait(leaver, 'SIGTERM');
    await waitLog(stayer, 'one member', (e) => e.json?.['msg'] === 'shard view settled' && e.json['members'] === 1, 30_000, stayerLogs);
    const askedAt = Date.now();
    await patch('g3', 'after');
    await eventually('g3 rotated at its slot', async () => (rotated(3) === 1 ? true : undefined), 2 * SLOT_MS + 10_000, 100);
    const rotatedAfterMs = Date.now() - spentAt;
    const waiting = (await env.events.listNamespacedEvent({ namespace: ns })).items.find(
      (e) => e.reason === 'RotationRequestWaiting' && e.regarding?.name === 'g3',
    );
    console.log(
      `[request budgets] shard move: the remaining replica took ${ns} over and was asked ${String(askedAt - spentAt)} ms after the leaver spent the burst; it rotated g3 ${String(rotatedAfterMs)} ms after, saying "${String(waiting?.note)}"`,
    );
    // Asked well before the slot: a budget that started full on the remaining replica would have rotated g3 at once.
    expect(askedAt - spentAt).toBeLessThan(SLOT_MS - 10_000);
    const stayerIdentity = stayer.logs.find((l) => l.json?.['msg'] === 'sharing the namespaces with the other replicas')?.json?.['identity'];
    expect(waiting?.reportingInstance).toBe(stayerIdentity);
    expect(rotatedAfterMs).toBeGreaterThanOrEqual(SLOT_MS - 4_000);
  });
});
