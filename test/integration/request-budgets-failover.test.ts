import { CoordinationV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeDebts, REQUEST_BUDGETS_ANNOTATION } from '../../src/controller/request-budget-record.js';
import { SHARD_GROUP_LABEL } from '../../src/kube/shard-membership.js';
import { killAllControllers, msgIs, signalAndWait, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { LEADER_ARGS, LEASE_MS, SHARD_ARGS } from '../support/leader-lease.js';
import { group, TestEnv, version } from '../support/operator.js';
import { budgetArgs, ROTATE, waitSynced } from '../support/request-budgets.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * The per-namespace request budgets (request-budget.ts) survive a failover, against the real apiserver, the real
 * controller processes and the simulator: what the leader spent is on its Lease when it is SIGKILLed, and a shard
 * replica that leaves hands what it spent to the one taking its namespaces over; either way a namespace that spent its
 * burst waits for the same slot. What the budgets allow a tenant writing requests in a loop is
 * request-budgets.test.ts's to show.
 */

afterAll(killAllControllers);

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
