// Scenario 12: a fleet on one account, two real control planes and one simulator: a blue/green migration (join,
// a Git rotation in both, switch, decommission) and a DR promotion (the primary's controller killed).
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { killAllControllers, signalAndWait, UNBUDGETED_ARGS } from '../support/controller-process.js';
import { secretTokenSha, startFleet, type Fleet, type FleetCluster } from '../support/fleet.js';
import { group, version, type UserGroupObject } from '../support/operator.js';
import { callsOf } from './support/faults-support.js';
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

const GROUPS = sized(1000, 100);
// The namespace's rotation budget (10, then 10 a minute) would spread a Git rotation of every group over minutes.
const ARGS = ['--service-qps', '200', '--service-burst', '400', '--concurrency', '8', ...UNBUDGETED_ARGS];
const BATCH = 50;
const names = Array.from({ length: GROUPS }, (_, i) => `g${String(i).padStart(4, '0')}`);
const idOf = (name: string): string => `fleet-${name}`;

afterAll(killAllControllers);

const inBatches = async (each: (name: string) => Promise<unknown>): Promise<void> => {
  for (let i = 0; i < names.length; i += BATCH) await Promise.all(names.slice(i, i + BATCH).map(each));
};
const percentile = (values: readonly number[], p: number): number => {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
};
const list = async (c: FleetCluster): Promise<UserGroupObject[]> =>
  ((await c.env.custom.listNamespacedCustomObject({ group, version, namespace: c.env.namespace, plural: 'usergroups' })) as { items: UserGroupObject[] }).items;

/** Every UserGroup of the cluster Ready=True Synced. */
async function allReady(c: FleetCluster, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const items = await list(c);
    const ready = items.filter((u) => u.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True' && x.reason === 'Synced'));
    if (ready.length === GROUPS) return;
    if (Date.now() > deadline) throw new Error(`cluster ${c.name}: ${ready.length} of ${GROUPS} Ready after ${timeoutMs} ms`);
    await sleep(500);
  }
}

/** Groups whose Secret in `c` does not hold the token the service holds now. */
async function stale(fleet: Fleet, c: FleetCluster): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < names.length; i += BATCH) {
    const batch = names.slice(i, i + BATCH);
    const shas = await Promise.all(batch.map((n) => secretTokenSha(c.env, n)));
    batch.forEach((n, j) => {
      if (shas[j] !== fleet.serviceTokenSha(idOf(n))) out.push(n);
    });
  }
  return out;
}

interface Reach {
  /** From the request to every cluster's Secret holding the new token. */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** From the service's rotation (as first seen) to the last cluster's Secret holding it: the follow. */
  readonly followP50: number;
  readonly followP99: number;
}

/** A Git-delivered rotation: the same value in both clusters at once; when each group's Secrets in both hold the new token. */
async function gitRotation(fleet: Fleet, clusters: readonly FleetCluster[], value: string): Promise<Reach> {
  const before = { ...fleet.rotations() };
  const started = Date.now();
  await Promise.all(clusters.map((c) => inBatches((n) => c.env.patchUserGroup(n, { metadata: { annotations: { [ROTATE_ANNOTATION]: value } } }))));
  const reached = new Map<string, number>();
  const rotatedAt = new Map<string, number>();
  const deadline = Date.now() + 300_000;
  while (reached.size < GROUPS && Date.now() < deadline) {
    const pending = names.filter((n) => !reached.has(n));
    for (let i = 0; i < pending.length; i += BATCH) {
      const batch = pending.slice(i, i + BATCH);
      await Promise.all(
        batch.map(async (n) => {
          if ((fleet.rotations()[idOf(n)] ?? 0) <= (before[idOf(n)] ?? 0)) return;
          if (!rotatedAt.has(n)) rotatedAt.set(n, Date.now());
          const sha = fleet.serviceTokenSha(idOf(n));
          const held = await Promise.all(clusters.map((c) => secretTokenSha(c.env, n)));
          if (held.every((h) => h === sha)) reached.set(n, Date.now() - started);
        }),
      );
    }
    await sleep(250);
  }
  expect(reached.size, 'every group reached every cluster').toBe(GROUPS);
  for (const n of names) expect((fleet.rotations()[idOf(n)] ?? 0) - (before[idOf(n)] ?? 0), `${n}: rotations`).toBe(1);
  const times = [...reached.values()];
  const follow = names.map((n) => (reached.get(n) ?? NaN) + started - (rotatedAt.get(n) ?? NaN));
  return {
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    max: Math.max(...times),
    followP50: percentile(follow, 50),
    followP99: percentile(follow, 99),
  };
}

describe('12. a fleet on one account: blue/green migration and DR promotion', () => {
  let fleet: Fleet | undefined;
  afterAll(async () => {
    await killAllControllers();
    await fleet?.close();
  });

  it(`${GROUPS} UserGroups (deletionPolicy Rotate): join, a Git rotation, switch, decommission, DR promotion: 0 tokens lost, 0 unexpected POSTs`, async () => {
    const started = Date.now();
    fleet = await startFleet('fleetrel', { roles: { a: 'Primary', b: 'Follower' } });
    const f = fleet;
    const { a: blue, b: green } = f;
    const calls = (): { puts: number; posts: number } => {
      const ops = f.sim.stats(f.apiKey).operations;
      return { puts: callsOf(ops, 'upsert'), posts: callsOf(ops, 'rotate') };
    };
    const spec = (n: string): Record<string, unknown> => ({ userGroupId: idOf(n), name: n, deletionPolicy: 'Rotate' });

    // Blue, the account's primary, serves every customer.
    const blueController = await blue.startController(ARGS);
    await inBatches((n) => blue.env.createUserGroup(n, spec(n)));
    await allReady(blue, 300_000);

    // Green joins as a follower: same manifests.
    const beforeJoin = calls();
    const joinStarted = Date.now();
    const greenController = await green.startController(ARGS);
    await inBatches((n) => green.env.createUserGroup(n, spec(n)));
    await allReady(green, 300_000);
    const joinMs = Date.now() - joinStarted;
    const join = { puts: calls().puts - beforeJoin.puts, posts: calls().posts - beforeJoin.posts };
    expect(join.posts).toBe(0);
    expect(await stale(f, green)).toEqual([]);
    expect(await stale(f, blue)).toEqual([]);

    // A rotation Git asks for in both clusters while both serve.
    const beforeRotation = calls();
    const rotation = await gitRotation(f, [blue, green], new Date().toISOString());
    const rotationCalls = { puts: calls().puts - beforeRotation.puts, posts: calls().posts - beforeRotation.posts };
    expect(rotationCalls.posts).toBe(GROUPS);

    // Traffic moved: blue becomes the follower first, then green the primary. No call for the switch.
    const beforeSwitch = calls();
    await blue.setRole('Follower');
    await green.setRole('Primary');
    await sleep(10_000);
    const switchCalls = { puts: calls().puts - beforeSwitch.puts, posts: calls().posts - beforeSwitch.posts };
    expect(switchCalls).toEqual({ puts: 0, posts: 0 });

    // Blue decommissioned: its UserGroups deleted (deletionPolicy Rotate), then its controller stopped.
    const beforeDecommission = calls();
    await inBatches((n) => blue.env.custom.deleteNamespacedCustomObject({ group, version, namespace: blue.env.namespace, plural: 'usergroups', name: n }));
    while ((await list(blue)).length > 0) await sleep(500);
    await signalAndWait(blueController, 'SIGTERM');
    const decommission = { puts: calls().puts - beforeDecommission.puts, posts: calls().posts - beforeDecommission.posts };
    expect(decommission.posts).toBe(0);
    expect(await stale(f, green)).toEqual([]);

    // DR: blue comes back as green's standby (joins again: 0 POSTs), then green's controller dies and blue is promoted.
    const beforeStandby = calls();
    await blue.startController(ARGS);
    await inBatches((n) => blue.env.createUserGroup(n, spec(n)));
    await allReady(blue, 300_000);
    const standbyPosts = calls().posts - beforeStandby.posts;
    expect(standbyPosts).toBe(0);
    await signalAndWait(greenController, 'SIGKILL');
    const beforePromotion = calls();
    await blue.setRole('Primary');
    await sleep(10_000);
    const promotionCalls = calls().puts + calls().posts - beforePromotion.puts - beforePromotion.posts;
    expect(promotionCalls).toBe(0);
    // The old primary comes back demoted (its role set while it was down); a Git rotation reaches both, once.
    await green.setRole('Follower');
    await green.startController(ARGS);
    const beforeDrRotation = calls();
    const drRotation = await gitRotation(f, [blue, green], new Date().toISOString());
    expect(calls().posts - beforeDrRotation.posts).toBe(GROUPS);
    expect(await stale(f, blue)).toEqual([]);
    expect(await stale(f, green)).toEqual([]);

    const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
    recordRow({
      scenario: '12. fleet: blue/green + DR',
      objects: GROUPS,
      faults: 'two control planes, one account; join, switch, decommission, primary SIGKILLed',
      converged: true,
      tokensLost: 0,
      duplicateRotations: 0,
      wallMs: Date.now() - started,
      notes: [
        `join ${join.posts} POSTs / ${join.puts} PUTs in ${s(joinMs)}`,
        `Git rotation reached both p50 ${s(rotation.p50)} / p99 ${s(rotation.p99)} / max ${s(rotation.max)}, the follow p50 ${s(rotation.followP50)} / p99 ${s(rotation.followP99)} (${rotationCalls.posts} POSTs, ${rotationCalls.puts} PUTs)`,
        `switch ${switchCalls.puts + switchCalls.posts} calls`,
        `decommission ${decommission.posts} POSTs`,
        `standby join ${standbyPosts} POSTs, promotion ${promotionCalls} calls`,
        `DR rotation p50 ${s(drRotation.p50)} / p99 ${s(drRotation.p99)}, the follow p99 ${s(drRotation.followP99)}`,
      ].join('; '),
    });
    process.stderr.write(
      `[fleet-migration] ${GROUPS} groups: join ${JSON.stringify(join)} in ${s(joinMs)}; rotation ${JSON.stringify(rotation)} ${JSON.stringify(rotationCalls)}; DR rotation ${JSON.stringify(drRotation)}\n`,
    );
  });
});
