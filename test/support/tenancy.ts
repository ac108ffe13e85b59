import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';
import { sha256 } from './hash.js';
import { adminKubeConfig, createNamespace, deleteNamespace, eventually, tokenKubeConfig } from './kube.js';
import { claimVersion, group, TestEnv, version, type OperatorHandle, type TenantRuleObject, type UserGroupObject } from './operator.js';
import { startRecordingProxy, type RecordingProxy } from './recording-proxy.js';

/**
 * A multi-tenant cluster for attack tests: tenant namespaces whose tenants act as real identities
 * (a ServiceAccount token, bound by a Role with what a namespace's editor has: UserGroups,
 * UserGroupServices, Secrets, Events), one shared ClusterUserGroupService with tenant rules as
 * the default connection, the controller sharded over two deployments, and a recording proxy in
 * front of the simulator that counts every call per userGroupId and per token.
 */

export { sha256 };
export const TOKEN_SHA256 = 'usergroup.dev/token-sha256';

/** A tenant: a namespace and clients that authenticate as its ServiceAccount, nothing more. */
export interface Tenant {
  readonly namespace: string;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
}

const TENANT_RULES = [
  { apiGroups: [group], resources: ['usergroups', 'usergroupservices'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
  { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
  { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['get', 'list', 'watch'] },
];

/** A ServiceAccount "tenant" in the namespace, bound to a Role like a namespace editor's, and a token for it. */
export async function tenantIdentity(namespace: string, admin: KubeConfig = adminKubeConfig()): Promise<Tenant> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'tenant' } } });
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name: 'tenant' }, rules: TENANT_RULES } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'tenant' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant' },
      subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace }],
    },
  });
  const request = await core.createNamespacedServiceAccountToken({ namespace, name: 'tenant', body: { spec: { expirationSeconds: 3600 } } });
  const token = request.status?.token;
  if (!token) throw new Error('the TokenRequest returned no token');
  const kc = tokenKubeConfig(token, admin);
  return { namespace, kc, core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
}

export interface TenancyWorld {
  readonly env: TestEnv;
  readonly proxy: RecordingProxy;
  /** Admitted tenants (by a label only admins set). */
  readonly tenants: readonly Tenant[];
  /** A namespace no rule admits. */
  readonly outsider: Tenant;
  /** The label that admits a namespace. */
  readonly tenantLabel: string;
  /** Stops and starts the controller responsible for a namespace (the world is sharded). */
  restartController(namespace: string, between?: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

/**
 * The rules of the shared connection:
 * 1. namespaces labelled `tenantLabel=true`: ids "<namespace>.*", adoption Rotate;
 * 2. every tenant: ids "shared.*" (contested on purpose: whoever claims first holds it), adoption Rotate;
 * 3. every tenant: ids "legacy-<namespace>.*", adoption Refuse.
 */
function tenancyRules(tenantLabel: string, tenants: readonly string[]): TenantRuleObject[] {
  return [
    { namespaceSelector: { matchLabels: { [tenantLabel]: 'true' } }, userGroupIds: { prefix: '{namespace}.' }, adoption: 'Rotate' },
    { namespaces: [...tenants], userGroupIds: { prefix: 'shared.' }, adoption: 'Rotate' },
    { namespaces: [...tenants], userGroupIds: { prefix: 'legacy-{namespace}.' }, adoption: 'Refuse' },
  ];
}

/**
 * `tenantCount` admitted tenants and one outsider; the controller runs as two deployments (in this process, or
 * as child processes): one for the first tenant and the outsider, one for the others (so attacks between tenant
 * 0 and another also cross deployments).
 */
export async function createTenancyWorld(prefix: string, tenantCount = 2, mode: 'in-process' | 'process' = 'in-process'): Promise<TenancyWorld> {
  const env = await TestEnv.create(`${prefix}-ops`);
  const proxy = await startRecordingProxy(env.sim.url);
  const tenantLabel = `usergroup.dev/tenant-${env.namespace}`;
  const core = env.core;
  const namespaces: string[] = [];
  for (let i = 0; i < tenantCount; i++) namespaces.push(await createNamespace(`${prefix}-t${i}`, env.kc));
  const outsiderNs = await createNamespace(`${prefix}-out`, env.kc);
  // Only a cluster admin labels namespaces: the label is what admits a tenant.
  for (const ns of namespaces)
    await core.patchNamespace(
      { name: ns, body: { metadata: { labels: { [tenantLabel]: 'true' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  const tenants = await Promise.all(namespaces.map((ns) => tenantIdentity(ns, env.kc)));
  const outsider = await tenantIdentity(outsiderNs, env.kc);
  await env.putClusterService(env.defaultService, { url: proxy.url, tenants: tenancyRules(tenantLabel, namespaces) });

  const shards: { namespaces: string[]; handle: OperatorHandle | undefined }[] = [
    { namespaces: [namespaces[0] ?? '', outsiderNs], handle: undefined },
    { namespaces: namespaces.slice(1), handle: undefined },
  ].filter((s) => s.namespaces.every(Boolean) && s.namespaces.length > 0);
  const start = async (shard: (typeof shards)[number]): Promise<void> => {
    // Restarts on, as a platform team that offers them would run it (attack 13 needs them on to mean anything).
    shard.handle = await env.startOperator({ mode, args: ['--namespaces', shard.namespaces.join(','), '--workload-restarts-per-minute', '600'] });
  };
  for (const shard of shards) await start(shard);

  return {
    env,
    proxy,
    tenants,
    outsider,
    tenantLabel,
    restartController: async (namespace, between) => {
      const shard = shards.find((s) => s.namespaces.includes(namespace));
      if (!shard) throw new Error(`no controller for ${namespace}`);
      await shard.handle?.stop();
      await between?.();
      await start(shard);
    },
    close: async () => {
      await env.close();
      await proxy.stop();
      for (const ns of [...namespaces, outsiderNs]) await deleteNamespace(ns, env.kc).catch(() => undefined);
      await env.custom
        .deleteCollectionClusterCustomObject({
          group,
          version: claimVersion,
          plural: 'usergroupclaims',
          labelSelector: `usergroup.dev/namespace in (${[...namespaces, outsiderNs].join(',')})`,
        })
        .catch(() => undefined);
    },
  };
}

// --- What a tenant does, as itself -------------------------------------------------------------

export async function createUserGroupAs(t: Tenant, name: string, spec: Record<string, unknown>): Promise<void> {
  await t.custom.createNamespacedCustomObject({
    group,
    version,
    namespace: t.namespace,
    plural: 'usergroups',
    body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name }, spec },
  });
}

export async function deleteUserGroupAs(t: Tenant, name: string): Promise<void> {
  await t.custom.deleteNamespacedCustomObject({ group, version, namespace: t.namespace, plural: 'usergroups', name });
}

export async function annotateUserGroupAs(t: Tenant, name: string, annotations: Record<string, string>, labels: Record<string, string> = {}): Promise<void> {
  await t.custom.patchNamespacedCustomObject(
    { group, version, namespace: t.namespace, plural: 'usergroups', name, body: { metadata: { annotations, labels } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

export async function readSecretAs(t: Tenant, name: string): Promise<V1Secret | undefined> {
  try {
    return await t.core.readNamespacedSecret({ namespace: t.namespace, name });
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

export async function secretTokenAs(t: Tenant, name: string, key = 'token'): Promise<string | undefined> {
  const data = (await readSecretAs(t, name))?.data?.[key];
  return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
}

/**
 * The tenant rewrites its own token Secret (data and annotations), as `kubectl edit secret` would: `edit`
 * changes the Secret just read, in place, and that is written back.
 */
export async function rewriteSecretAs(t: Tenant, name: string, edit: (s: V1Secret) => void): Promise<void> {
  const current = await readSecretAs(t, name);
  if (!current) throw new Error(`no Secret ${t.namespace}/${name}`);
  edit(current);
  await t.core.replaceNamespacedSecret({ namespace: t.namespace, name, body: current });
}

// --- What the admin and the test see -------------------------------------------------------------

export async function userGroupIn(world: Pick<TenancyWorld, 'env'>, namespace: string, name: string): Promise<UserGroupObject | undefined> {
  try {
    return (await world.env.custom.getNamespacedCustomObject({ group, version, namespace, plural: 'usergroups', name })) as UserGroupObject;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

/** A Secret as the admin reads it, or undefined when there is none. */
export async function secretIn(world: Pick<TenancyWorld, 'env'>, namespace: string, name: string): Promise<V1Secret | undefined> {
  try {
    return await world.env.core.readNamespacedSecret({ namespace, name });
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

export const readyOf = (ug: UserGroupObject | undefined): { status: string; reason: string; message: string } | undefined =>
  ug?.status?.conditions?.find((c) => c.type === 'Ready');

/** Waits until the UserGroup's Ready condition has this reason for its current generation. */
export async function waitForReason(world: TenancyWorld, namespace: string, name: string, reason: string, timeoutMs = 60_000): Promise<UserGroupObject> {
  return eventually(
    `${namespace}/${name} Ready reason ${reason}`,
    async () => {
      const ug = await userGroupIn(world, namespace, name);
      return readyOf(ug)?.reason === reason && ug?.status?.observedGeneration === ug?.metadata.generation ? ug : undefined;
    },
    timeoutMs,
    200,
  );
}

/** Creates or updates a group at the service directly, as the company's backend would (not through the operator). */
export async function backendPut(world: TenancyWorld, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${world.env.sim.url}/api/user`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Token ${world.env.apiKey}` },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as { user_group?: { token?: string } };
  const token = answer.user_group?.token;
  if (!res.ok || !token) throw new Error(`backend PUT failed: ${res.status}`);
  return token;
}

/** The simulator's view of a group of the platform account (its token only as sha256). */
export function serviceGroup(world: TenancyWorld, userGroupId: string): ReturnType<TestEnv['simGroup']> {
  return world.env.simGroup(userGroupId);
}

/**
 * Every token Secret the operator wrote in the tenants' namespaces, checked against the service: a token that
 * belongs to a group whose claim is held by another namespace has leaked. Returns the leaks as "ns/secret → id".
 */
export async function leakedTokens(world: TenancyWorld): Promise<string[]> {
  const claims = await world.env.claims([...world.tenants, world.outsider].map((t) => t.namespace));
  const holder = new Map(claims.map((c) => [c.spec.userGroupId, c.spec.namespace]));
  const bySha = new Map(world.env.sim.groups(world.env.apiKey).map((g) => [g.tokenSha256, g.userGroupId]));
  const leaks: string[] = [];
  for (const t of [...world.tenants, world.outsider]) {
    const secrets = (await world.env.core.listNamespacedSecret({ namespace: t.namespace })).items;
    for (const s of secrets) {
      for (const value of Object.values(s.data ?? {})) {
        const id = bySha.get(sha256(Buffer.from(value, 'base64').toString('utf8')));
        if (id !== undefined && holder.get(id) !== t.namespace) leaks.push(`${t.namespace}/${s.metadata?.name ?? '?'} → ${id}`);
      }
    }
  }
  return leaks;
}
