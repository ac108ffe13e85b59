import {
  ApiException,
  CoordinationV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Lease,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllControllers, msgIs, signalAndWait, waitLog, type ControllerProcess, type LogEntry } from '../support/controller-process.js';
import { adminKubeConfig, createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { SHARD_ARGS } from '../support/leader-lease.js';
import { group, TestEnv, version } from '../support/operator.js';
import { tenantIdentity, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * Replicas sharing the namespaces (--shard-by-namespace), as real processes against the real apiserver: each
 * UserGroup is worked on by exactly one of them, when one joins the others hand its share over before it starts,
 * one that is killed has its share taken over once its Lease lapses, one that is stopped leaves at once, and
 * nothing a tenant writes makes it a member.
 */
const SHARD_GROUP = 'ug-shard';
const TENANT_NAMESPACES = 8;

interface ReadyView {
  readonly status?: { observedGeneration?: number; conditions?: { type: string; status: string; reason: string }[] };
  readonly metadata: { generation?: number; annotations?: Record<string, string> };
}

const settledWith =
  (members: number) =>
  (e: LogEntry): boolean =>
    e.json?.['msg'] === 'shard view settled' && e.json['members'] === members;

/** The namespaces whose UserGroups a replica logged as synced or rotated (from log index `from` on). */
function worked(c: ControllerProcess, msg: string, from = 0): Set<string> {
  return new Set(
    c.logs
      .slice(from)
      .filter((l) => l.json?.['msg'] === msg)
      .map((l) => String(l.json?.['usergroup']).split('/')[0] ?? ''),
  );
}

describe('replicas sharing the namespaces', () => {
  let env: TestEnv;
  let namespaces: string[] = [];
  let custom: CustomObjectsApi;
  let leases: CoordinationV1Api;
  const replicas: ControllerProcess[] = [];
  let serial = 0;

  const total = (op: 'upsert' | 'rotate'): number => Object.values(env.calls()[op]).reduce((a, b) => a + b, 0);
  const replica = (i: number): ControllerProcess => {
    const r = replicas[i];
    if (!r) throw new Error(`no replica ${i}: an earlier test failed`);
    return r;
  };
  const spawn = (): ControllerProcess => {
    const c = env.spawnController(SHARD_ARGS(env, SHARD_GROUP, namespaces));
    replicas.push(c);
    return c;
  };
  const memberLeases = async (): Promise<V1Lease[]> =>
    (await leases.listNamespacedLease({ namespace: env.namespace, labelSelector: `usergroup.dev/shard-group=${SHARD_GROUP}` })).items;
  const createIn = async (ns: string, name: string): Promise<void> => {
    await custom.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: 'usergroups',
      body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name }, spec: { userGroupId: `${ns}.${name}`, name } },
    });
  };
  const readyIn = (ns: string, name: string, timeoutMs = 30_000): Promise<ReadyView> =>
    eventually(
      `UserGroup ${ns}/${name} Synced`,
      async () => {
        const ug = (await custom.getNamespacedCustomObject({ group, version, namespace: ns, plural: 'usergroups', name })) as ReadyView;
        const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.reason === 'Synced' && ug.status?.observedGeneration === ug.metadata.generation ? ug : undefined;
      },
      timeoutMs,
    );
  /** One new UserGroup in every tenant namespace, all Synced. */
  const wave = async (timeoutMs = 30_000): Promise<string> => {
    const name = `ug-${++serial}`;
    await Promise.all(namespaces.map((ns) => createIn(ns, name)));
    await Promise.all(namespaces.map((ns) => readyIn(ns, name, timeoutMs)));
    return name;
  };

  beforeAll(async () => {
    env = await TestEnv.create('shard');
    const admin = adminKubeConfig();
    custom = admin.makeApiClient(CustomObjectsApi);
    leases = admin.makeApiClient(CoordinationV1Api);
    namespaces = await Promise.all(Array.from({ length: TENANT_NAMESPACES }, () => createNamespace('shard-t', admin)));
    await env.putClusterService(env.defaultService, {
      url: env.sim.url,
      tenants: [{ namespaces, userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
  });
  afterAll(async () => {
    await killAllControllers();
    for (const ns of namespaces) await deleteNamespace(ns).catch(() => undefined);
    await ifAssigned(env)?.close();
  });

  it('two replicas: every UserGroup synced by exactly one of them, once, and their namespaces do not overlap', async () => {
    const [a, b] = [spawn(), spawn()];
    await Promise.all([waitLog(a, 'settled on 2', settledWith(2), 30_000), waitLog(b, 'settled on 2', settledWith(2), 30_000)]);
    await wave();
    await wave();
    expect(total('upsert')).toBe(2 * TENANT_NAMESPACES);
    const [byA, byB] = [worked(a, 'user group synced'), worked(b, 'user group synced')];
    console.log(`[sharding] 2 replicas: ${byA.size} + ${byB.size} of ${TENANT_NAMESPACES} namespaces`);
    expect([...byA].filter((ns) => byB.has(ns))).toEqual([]);
    expect(new Set([...byA, ...byB])).toEqual(new Set(namespaces));
    expect(await memberLeases()).toHaveLength(2);
  });

  it('a third joins: the others give up its share first, then it works, and every rotation happens once', async () => {
    const [a, b] = replicas as [ControllerProcess, ControllerProcess];
    const marks = [a.logs.length, b.logs.length];
    const c = spawn();
    await Promise.all([a, b, c].map((r) => waitLog(r, 'settled on 3', settledWith(3), 30_000)));
    // Each keeps only its own share in its cache: the three caches hold every UserGroup once.
    const cached = await Promise.all(
      [a, b, c].map(async (r, i) => {
        await waitLog(r, 'caches of the new share synced', msgIs('caches synced'), 30_000, i < 2 ? marks[i] : 0);
        return Number(r.logs.filter(msgIs('caches synced')).at(-1)?.json?.['usergroups']);
      }),
    );
    console.log(`[sharding] 3 replicas cache ${cached.join(' + ')} of ${2 * TENANT_NAMESPACES} UserGroups`);
    expect(cached.reduce((x, y) => x + y, 0)).toBe(2 * TENANT_NAMESPACES);
    const calls = total('upsert');
    const name = await wave();
    expect(total('upsert')).toBe(calls + TENANT_NAMESPACES);

    const rotatesBefore = total('rotate');
    const requested = new Date().toISOString();
    for (const ns of namespaces)
      for (const n of ['ug-1', 'ug-2', name])
        await custom.patchNamespacedCustomObject(
          {
            group,
            version,
            namespace: ns,
            plural: 'usergroups',
            name: n,
            body: { metadata: { annotations: { 'usergroup.dev/rotate-requested-at': requested } } },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
    await eventually('every rotation done', async () => (total('rotate') - rotatesBefore >= 3 * TENANT_NAMESPACES ? true : undefined), 30_000);
    // Nothing more comes: a second replica working on a namespace would rotate its tokens again.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(total('rotate') - rotatesBefore).toBe(3 * TENANT_NAMESPACES);
    const sets = [worked(a, 'token rotated', marks[0]), worked(b, 'token rotated', marks[1]), worked(c, 'token rotated')];
    console.log(`[sharding] 3 replicas: rotations in ${sets.map((s) => s.size).join(' + ')} namespaces`);
    for (const [i, s] of sets.entries()) for (const [j, t] of sets.entries()) if (i < j) expect([...s].filter((ns) => t.has(ns))).toEqual([]);
    expect(new Set(sets.flatMap((s) => [...s]))).toEqual(new Set(namespaces));
  });

  it('a replica killed with SIGKILL: the others take its namespaces over once its Lease lapses, and delete that Lease', async () => {
    const victim = replica(2);
    const survivors = replicas.slice(0, 2);
    const marks = survivors.map((r) => r.logs.length);
    const killedAt = Date.now();
    await signalAndWait(victim, 'SIGKILL');
    await Promise.all(survivors.map((r, i) => waitLog(r, 'settled on 2 again', settledWith(2), 30_000, marks[i])));
    const takenOverMs = Date.now() - killedAt;
    await wave();
    console.log(`[sharding] SIGKILL: the survivors settled without it after ${takenOverMs} ms (lease 6 s)`);
    expect(takenOverMs).toBeGreaterThanOrEqual(5_000);
    await eventually('the dead replica’s Lease deleted', async () => ((await memberLeases()).length === 2 ? true : undefined), 10_000);
  });

  it('SIGTERM: the replica finishes, exits 0 and deletes its Lease; the last one takes everything without waiting it out', async () => {
    const [a, b] = replicas as [ControllerProcess, ControllerProcess];
    const mark = a.logs.length;
    const stoppedAt = Date.now();
    await signalAndWait(b, 'SIGTERM');
    expect((await b.exit).code).toBe(0);
    expect(await memberLeases()).toHaveLength(1);
    await waitLog(a, 'settled alone', settledWith(1), 10_000, mark);
    const alone = Date.now() - stoppedAt;
    console.log(`[sharding] SIGTERM: the last replica settled alone ${alone} ms after the stop began`);
    expect(alone).toBeLessThan(5_000);
    await wave();
    expect(worked(a, 'user group synced', mark)).toEqual(new Set(namespaces));
  });

  it('a tenant cannot join: a shard Lease in its own namespace is ignored and the operator’s namespace is closed to it', async () => {
    const a = replica(0);
    const tenantNs = namespaces[0] ?? '';
    const tenant: Tenant = await tenantIdentity(tenantNs);
    // The worst case: the tenant may manage Leases in its namespace (its own apps elect leaders with them).
    const rbac = adminKubeConfig().makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: tenantNs,
      body: { metadata: { name: 'tenant-leases' }, rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['*'] }] },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: tenantNs,
      body: {
        metadata: { name: 'tenant-leases' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant-leases' },
        subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace: tenantNs }],
      },
    });
    const tenantLeases = tenant.kc.makeApiClient(CoordinationV1Api);
    const calls = total('upsert') + total('rotate');
    const mark = a.logs.length;
    const forged = (namespace: string): V1Lease => ({
      metadata: { name: 'forged-member', namespace, labels: { 'usergroup.dev/shard-group': SHARD_GROUP }, annotations: { 'usergroup.dev/shard-view': 'x' } },
      spec: { holderIdentity: 'tenant-replica', leaseDurationSeconds: 3600 },
    });
    await eventually(
      'the tenant’s Lease RBAC in effect',
      async () => {
        try {
          await tenantLeases.createNamespacedLease({ namespace: tenantNs, body: forged(tenantNs) });
          return true;
        } catch (err) {
          if (err instanceof ApiException && err.code === 403) return undefined;
          throw err;
        }
      },
      10_000,
    );
    let refused: number | undefined;
    try {
      await tenantLeases.createNamespacedLease({ namespace: env.namespace, body: forged(env.namespace) });
    } catch (err) {
      refused = err instanceof ApiException ? err.code : undefined;
    }
    expect(refused).toBe(403);
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    // Still one member, nothing rebalanced, no call made.
    expect(
      a.logs
        .slice(mark)
        .filter((l) => ['shard view settled', 'shard share changed; caches of the new share are being filled'].includes(String(l.json?.['msg']))),
    ).toEqual([]);
    expect(await memberLeases()).toHaveLength(1);
    expect(total('upsert') + total('rotate')).toBe(calls);
    console.log(`[sharding] tenant attack: Lease in its own namespace ignored, operator namespace refused (${refused}), 0 service calls`);
    await wave();
    expect(a.logs.slice(mark).filter(msgIs('user group synced'))).toHaveLength(TENANT_NAMESPACES);
  });
});
