import pino from 'pino';
import type { Adoption, ClusterUserGroupService, FleetRole } from '../../src/api/clusterusergroupservice.js';
import { claimName, type ClaimSpec, type UserGroupClaim } from '../../src/api/claim.js';
import { ROTATE_ON_DELETE_FINALIZER } from '../../src/api/constants.js';
import { objectKey, withFinalizers, type OwnerReference } from '../../src/api/meta.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import { parseUserGroup, type Condition, type UserGroup, type UserGroupStatus } from '../../src/api/usergroup.js';
import type { ObservedWorkload, RestartTarget } from '../../src/api/workload.js';
import type { Connection, Resolution } from '../../src/controller/connections.js';
import type { ReconcileResult } from '../../src/controller/reconcile-contract.js';
import { desiredSecret } from '../../src/controller/policies/token-secret.js';
import { boundNamespace } from '../../src/controller/policies/id-binding.js';
import { DEFAULT_REQUEST_BUDGETS, type RequestKind, type RequestSlot } from '../../src/controller/request-budget.js';
import type { ReconcilePorts, Slot } from '../../src/controller/usergroup-ports.js';
import { reconcileUserGroup } from '../../src/controller/usergroup/reconcile.js';
import type { ApiError } from '../../src/kube/api-error.js';
import type { RestartResult } from '../../src/kube/workload-restarter.js';
import { secretMatches, type SecretApplyResult } from '../../src/kube/secret-writer.js';
import { SecretValue } from '../../src/service/secret-value.js';
import type { ServiceResult } from '../../src/service/types.js';
import { SEAL, storedSecret } from './fixtures.js';
import { toldQueue, type Told } from './told-queue.js';

/**
 * The UserGroup reconcile on fake ports, for tests of its decisions without I/O: every port call is logged in `calls`
 * ("PUT", "POST", "create Secret", "create Claim", "status <Reason>", "Event <type> <reason>", ...) for `order()`, the
 * fake apiserver and service keep just enough state to answer consistently.
 *
 * Tests assert outcomes, what a user or the service can see: `outcome()` (the service's calls by kind, the token the
 * Secret holds, the Events, the Ready reason), the Secret as stored (`secret()`, `writes`, `deleted`), the status
 * (`status()`, `statuses`), the claims, the metrics a user reads (`deletions()`); the apiserver's requests by kind (`kubeRequests()`, `kubeWrites()`) where
 * their count is the point; and an order only where the order is the protocol (`order(...)`, each with the reason
 * beside it). Which in-memory ports a reconcile asks (caches, budgets, caps) and the order of the rest (a status
 * write and an Event, say) are the reconcile's business: a refactor may change them.
 */

/** What a reconcile did that can be seen from outside, for `toEqual`. */
export interface Outcome {
  /** The calls to the service by kind ({ PUT: 1, POST: 1 }; none: {}). */
  readonly service: Readonly<Record<string, number>>;
  /** The token the Secret holds at the end (undefined: there is none, or it was deleted). */
  readonly secret: string | undefined;
  /** The Events by "type reason", each with how often it was emitted. */
  readonly events: Readonly<Record<string, number>>;
  /** The Ready condition's reason at the end: the last status written, else the one the UserGroup had. */
  readonly ready: string | undefined;
}

export const ACCOUNT = 'account-a';

export interface UserGroupInit {
  readonly name?: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly userGroupId?: string;
  readonly annotations?: Record<string, string>;
  readonly status?: UserGroupStatus;
  readonly generation?: number;
  /** spec.rotation.maxTokenAge. */
  readonly maxTokenAge?: string;
  readonly suspend?: boolean;
  /** spec.rolloutRestartTargets. */
  readonly rolloutRestartTargets?: readonly RestartTarget[];
  readonly serviceRef?: { readonly kind: 'UserGroupService' | 'ClusterUserGroupService'; readonly name: string };
  readonly deletionTimestamp?: string;
  readonly deletionPolicy?: 'Retain' | 'Rotate';
  readonly finalizers?: readonly string[];
  readonly creationTimestamp?: string;
}

export function userGroup(init: UserGroupInit = {}): UserGroup {
  const name = init.name ?? 'acme';
  const parsed = parseUserGroup({
    apiVersion: 'usergroup.dev/v1',
    kind: 'UserGroup',
    metadata: {
      name,
      namespace: init.namespace ?? 'ns',
      uid: init.uid ?? `uid-${name}`,
      resourceVersion: '10',
      generation: init.generation ?? 1,
      creationTimestamp: init.creationTimestamp ?? '2026-11-22T00:00:00Z',
      ...(init.deletionTimestamp !== undefined ? { deletionTimestamp: init.deletionTimestamp } : {}),
      annotations: init.annotations ?? {},
      ...(init.finalizers !== undefined ? { finalizers: init.finalizers } : {}),
    },
    spec: {
      userGroupId: init.userGroupId ?? 'acme-1',
      name: 'Acme',
      ...(init.maxTokenAge !== undefined ? { rotation: { maxTokenAge: init.maxTokenAge } } : {}),
      ...(init.suspend !== undefined ? { suspend: init.suspend } : {}),
      ...(init.rolloutRestartTargets !== undefined ? { rolloutRestartTargets: init.rolloutRestartTargets } : {}),
      ...(init.serviceRef !== undefined ? { serviceRef: init.serviceRef } : {}),
      ...(init.deletionPolicy !== undefined ? { deletionPolicy: init.deletionPolicy } : {}),
    },
    status: init.status ?? {},
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** A Secret named "acme" in "ns" holding `token`, controlled by UserGroup uid `owner` (none: a stranger's). */
export function secret(owner: string | undefined, token: string): ObservedSecret {
  const parsed = parseSecret({
    metadata: {
      name: 'acme',
      namespace: 'ns',
      uid: 'uid-secret',
      resourceVersion: '20',
      ...(owner ? { ownerReferences: [{ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: owner, controller: true }] } : {}),
    },
    type: 'Opaque',
    data: { token: Buffer.from(token).toString('base64') },
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

export function claim(spec: Partial<ClaimSpec> & { holder: UserGroup }): UserGroupClaim {
  const userGroupId = spec.userGroupId ?? (spec.holder.spec.ok ? spec.holder.spec.value.userGroupId : 'acme-1');
  const account = spec.account ?? ACCOUNT;
  return {
    metadata: {
      name: claimName(account, userGroupId),
      namespace: '',
      uid: 'uid-claim',
      resourceVersion: '5',
      generation: 1,
      creationTimestamp: '2026-11-22T00:00:00Z',
      deletionTimestamp: undefined,
      labels: {},
      annotations: {},
      ownerReferences: [],
    },
    spec: {
      userGroupId,
      account,
      namespace: spec.namespace ?? spec.holder.metadata.namespace,
      userGroup: spec.userGroup ?? { name: spec.holder.metadata.name, uid: spec.holder.metadata.uid },
    },
  };
}

export interface World {
  ug: UserGroup;
  /** Other UserGroups in the cache. */
  others?: UserGroup[];
  /** What the owned-Secret cache holds. */
  cached?: ObservedSecret | undefined;
  /** Whether the name-only cache of other Secrets knows the name. */
  otherKnown?: boolean;
  /** The namespace as the second owner of Retain token Secrets (default: none known). */
  keeper?: OwnerReference;
  /** What the apiserver really has. */
  live?: ObservedSecret | undefined;
  /** The Secret is deleted and re-created around every read: reads find nothing, creates meet it. */
  vanishesOnRead?: boolean;
  /** Claims by name, as the apiserver has them; default: one held by `ug`. */
  claims?: Map<string, UserGroupClaim>;
  /** What the claim cache shows, when it lags behind `claims`. */
  claimCache?: Map<string, UserGroupClaim>;
  /** What resolveConnection answers instead of the connection. */
  resolution?: Resolution;
  /** The service's created indicator in PUT answers (default true). */
  created?: boolean | undefined;
  adoption?: Adoption;
  /** The cluster's role when the account is shared by a fleet (ClusterUserGroupService spec.fleet). */
  fleet?: FleetRole;
  /** Whether the cached Secret's resourceVersion counts as written or checked by the operator (default true). */
  verified?: boolean;
  /** The token the operator remembers writing at the cached resourceVersion. */
  heldToken?: string;
  /** The token the fake service holds for the group at the start (default tok-1). */
  serviceToken?: string;
  /** Another holder of the account's key rotates the group to this token just before the first POST arrives. */
  rotatedElsewhereBeforePost?: string;
  /** The clock (default 2026-11-22T01:00:00Z). */
  now?: number;
  /** What the global cap on scheduled rotations answers (default 0: a slot is free). */
  capWaitMs?: number;
  /** The namespace's workloads, by "Kind/name" (restart targets patch them). */
  workloads?: Map<string, ObservedWorkload>;
  /** --workload-restarts-per-minute > 0 (default true). */
  workloadRestarts?: boolean;
  /** What the global cap on workload restarts answers (default 0). */
  restartCapWaitMs?: number;
  /** --mounted-token-refreshes-per-minute > 0 (default false). */
  podPrompts?: boolean;
  /** The namespace's Pods that consent to prompts for the UserGroup (name → the token they were prompted for). */
  pods?: Map<string, string | undefined>;
  /** What the global cap on Pod prompts answers (default 0). */
  promptCapWaitMs?: number;
  /** Listing or prompting Pods the apiserver refuses with this error. */
  promptRefusal?: ApiError;
  /** What the namespace's sync-request budget answers (default: a slot now). */
  syncSlot?: RequestSlot;
  /** What the namespace's rotation-request budget answers (default: a slot now). */
  rotationSlot?: RequestSlot;
  /** A replace of the token Secret (not a create) the apiserver refuses with this error. */
  secretReplaceRefusal?: ApiError;
  /** A workload restart the apiserver refuses with this error. */
  restartRefusal?: ApiError;
  /** The ClusterUserGroupServices in the cache (their rules may bind an id to one namespace); default none. */
  clusterServices?: ClusterUserGroupService[];
  /** The controller sees every namespace (no --namespaces, no sharding); default false: ids are always claimed. */
  seesAllNamespaces?: boolean;
  /** The connection is the namespace's own UserGroupService, not a ClusterUserGroupService (default false). */
  ownAccount?: boolean;
  /** The UserGroup's namespace is being deleted. */
  namespaceTerminating?: boolean;
  /** --rotate-on-delete (default true). */
  rotateOnDelete?: boolean;
  /** Someone writes each workload just after the operator read it (its patch meets a newer version). */
  workloadChangesAfterRead?: boolean;
}

export interface Harness {
  readonly calls: string[];
  /** Every Secret write sent (a create that met an existing Secret included): resourceVersion undefined for a create. */
  readonly writes: {
    resourceVersion: string | undefined;
    annotations: Record<string, string>;
    labels: Record<string, string>;
    token: string;
  }[];
  readonly claims: Map<string, UserGroupClaim>;
  readonly statuses: UserGroupStatus[];
  readonly deleted: string[];
  /** The token the fake service holds for the group now. */
  serviceToken(): string;
  /** The service's calls, the Secret's token, the Events and the Ready reason at the end (see Outcome). */
  outcome(): Outcome;
  /** The calls to the service by kind: { PUT: n, POST: n }, kinds not called left out. */
  serviceCalls(): Record<string, number>;
  /**
   * The requests to the apiserver by kind ("GET Secret", "create Claim", "status", "restart Deployment/web",
   * "prompt Pod/web-1", ...), each with how often it was sent; Events left out (see `events()`).
   */
  kubeRequests(): Record<string, number>;
  /** The writes among `kubeRequests()` (no GET, no LIST). */
  kubeWrites(): Record<string, number>;
  /** The Events by "type reason", each with how often it was emitted. */
  events(): Record<string, number>;
  /** usergroup_delete_rotations_total: the deletions that held the finalizer, by result (rotated, skipped, abandoned). */
  deletions(): Record<string, number>;
  /** The status at the end: the last one written, else the one the UserGroup had. */
  status(): UserGroupStatus | undefined;
  /** Its Ready condition. */
  ready(): Condition | undefined;
  /** The token Secret as the apiserver has it at the end (undefined: none, or deleted). */
  secret(): ObservedSecret | undefined;
  /**
   * The calls among `names`, each as often as and in the order it was made: for an order that is the protocol (the
   * rotation intent before the POST, a claim before the PUT, ...), never for the order of everything.
   */
  order(...names: string[]): string[];
  reconcile(): Promise<ReconcileResult>;
  /** What the worker's queue is told about the key after `result`, at the harness's clock. */
  requeue(result: ReconcileResult): readonly Told[];
}

export function harness(world: World): Harness {
  const calls: string[] = [];
  const service: string[] = [];
  const kube: string[] = [];
  const emitted: string[] = [];
  const deletionResults: string[] = [];
  /** A call to the service: logged as a call and by kind. */
  const serviceCall = (kind: 'PUT' | 'POST'): void => {
    calls.push(kind);
    service.push(kind);
  };
  /** A request to the apiserver: logged as `call`, counted by `kind`. */
  const kubeRequest = (call: string, kind = call): void => {
    calls.push(call);
    kube.push(kind);
  };
  let token = world.serviceToken ?? 'tok-1';
  let rotations = 0;
  let rotatedElsewhere = false;
  const claims = world.claims ?? new Map([[claimName(ACCOUNT, 'acme-1'), claim({ holder: world.ug })]]);
  const statuses: UserGroupStatus[] = [];
  const deleted: string[] = [];
  const group = (t: string, created: boolean | undefined): ServiceResult => ({
    ok: true,
    group: { teamId: 7, token: new SecretValue(t), name: 'Acme', providedId: 'acme-1', created, environmentTag: 'Customer' },
  });
  const connection: Connection = {
    id: 'conn-1',
    account: ACCOUNT,
    description: world.ownAccount ? 'UserGroupService ns/own' : 'ClusterUserGroupService shared',
    shared: !world.ownAccount,
    adoption: world.adoption ?? 'Keep',
    fleet: world.fleet,
    apiKeySecret: 'ops/api-key',
    seal: SEAL,
    unavailable: () => undefined,
    invalidate: () => undefined,
    boundNamespace: (userGroupId) => boundNamespace(userGroupId, world.clusterServices ?? []),
    upsert: async (): Promise<ServiceResult> => {
      serviceCall('PUT');
      return group(token, 'created' in world ? world.created : true);
    },
    rotate: async (held): Promise<ServiceResult> => {
      serviceCall('POST');
      if (world.rotatedElsewhereBeforePost !== undefined && !rotatedElsewhere) {
        rotatedElsewhere = true;
        token = world.rotatedElsewhereBeforePost;
      }
      if (held.reveal() !== token) return { ok: false, failure: { kind: 'rejected', status: 400, message: 'unknown token' } };
      token = `tok-r${++rotations}`;
      return group(token, false);
    },
  };
  const all = (): UserGroup[] => [world.ug, ...(world.others ?? [])];
  const now = world.now ?? Date.parse('2026-11-22T01:00:00Z');
  const writes: Harness['writes'] = [];
  let claimVersion = 5;
  const keep = (spec: ClaimSpec): UserGroupClaim => {
    const c = claim({ ...spec, holder: world.ug });
    const kept = { ...c, metadata: { ...c.metadata, resourceVersion: String(++claimVersion) } };
    claims.set(kept.metadata.name, kept);
    return kept;
  };
  /** As WorkloadRestarter's restart of the version read. */
  const restart = async (target: RestartTarget, resourceVersion: string, userGroupName: string, value: string): Promise<RestartResult> => {
    kubeRequest(`restart ${target.kind}/${target.name}`);
    if (world.restartRefusal) return { kind: 'refused', error: world.restartRefusal };
    const key = `${target.kind}/${target.name}`;
    const current = world.workloads?.get(key);
    if (!current) return { kind: 'conflict', conflict: 'gone' };
    if (current.resourceVersion !== resourceVersion) return { kind: 'conflict', conflict: 'changed' };
    world.workloads?.set(key, {
      ...current,
      resourceVersion: String(Number(current.resourceVersion) + 1),
      restartedFor: { ...current.restartedFor, [userGroupName]: value },
    });
    return { kind: 'restarted' };
  };
  /** A global cap's slot, answering `waitMs` (none: a slot at once), logged as `name`. */
  const capSlot = (name: string, waitMs: number | undefined): Slot => {
    calls.push(name);
    return waitMs !== undefined && waitMs > 0 ? { kind: 'wait', inMs: waitMs, first: true } : { kind: 'now', spend: () => undefined };
  };
  /** A namespace budget's slot, answering `slot` (default: one at once), logged as "<kind> budget" and "<kind> budget spent". */
  const budgetSlot = (kind: RequestKind, slot: RequestSlot | undefined): Slot => {
    calls.push(`${kind} budget`);
    return slot?.kind === 'wait' ? slot : { kind: 'now', spend: () => calls.push(`${kind} budget spent`) };
  };
  const ports: ReconcilePorts = {
    userGroups: {
      get: (key) => all().find((u) => objectKey(u.metadata) === key),
      withId: (id) => all().filter((u) => u.spec.ok && u.spec.value.userGroupId === id),
    },
    claims: {
      cached: (name) => (world.claimCache ?? claims).get(name),
      // As ClaimWriter.write: a create without `current`, else a replace of that version; a lost race reads what won.
      write: async (current, spec) => {
        kubeRequest(current ? 'replace Claim' : 'create Claim');
        const lost = current
          ? claims.get(current.metadata.name)?.metadata.resourceVersion !== current.metadata.resourceVersion
          : claims.has(claimName(spec.account, spec.userGroupId));
        if (!lost) return { ok: true, claim: keep(spec) };
        kubeRequest('GET Claim');
        return { ok: false, claim: claims.get(claimName(spec.account, spec.userGroupId)) };
      },
      release: async (c) => {
        kubeRequest('delete Claim');
        claims.delete(c.metadata.name);
      },
    },
    secretCache: {
      seen: () => ({
        cached: world.cached,
        otherExists: world.otherKnown ?? false,
        // The harness's Secrets carry their data, so the metadata-only trust question never arises.
        known: () => ({
          verified: world.verified ?? true,
          token: world.heldToken === undefined ? undefined : new SecretValue(world.heldToken),
          remember: () => undefined,
        }),
      }),
      // As the owner index: only a Secret this UserGroup controls.
      owned: (ug) => (world.cached?.metadata.ownerReferences.some((o) => o.controller && o.uid === ug.metadata.uid) ? [world.cached] : []),
    },
    namespaces: {
      get: () => ({ keeper: world.keeper, terminating: () => Promise.resolve(world.namespaceTerminating ?? false) }),
    },
    secrets: {
      read: async () => {
        kubeRequest('GET Secret');
        return world.vanishesOnRead ? undefined : world.live;
      },
      // As SecretWriter.apply: no request when the Secret already is the desired one.
      apply: async (desired, current): Promise<SecretApplyResult> => {
        if (current && secretMatches(current, desired)) return { kind: 'unchanged', secret: current };
        const resourceVersion = current?.metadata.resourceVersion;
        kubeRequest(resourceVersion === undefined ? 'create Secret' : 'replace Secret');
        if (resourceVersion !== undefined && world.secretReplaceRefusal) return { kind: 'refused', error: world.secretReplaceRefusal };
        const written = Buffer.from(Object.values(desired.data ?? {})[0] ?? '', 'base64').toString('utf8');
        writes.push({
          resourceVersion,
          annotations: { ...(desired.metadata?.annotations ?? {}) },
          labels: { ...(desired.metadata?.labels ?? {}) },
          token: written,
        });
        if (resourceVersion === undefined && world.live) return { kind: 'conflict', conflict: 'exists', message: 'already exists' };
        const parsed = parseSecret(storedSecret(desired, String(30 + writes.length)));
        if (!parsed.ok) throw new Error(parsed.error);
        world.live = parsed.value;
        return { kind: resourceVersion === undefined ? 'created' : 'updated', secret: parsed.value };
      },
      delete: async (s) => {
        kubeRequest('delete Secret');
        deleted.push(s.metadata.name);
      },
    },
    status: {
      patch: async (_ug, status) => {
        statuses.push(status);
        kubeRequest(`status ${status.conditions?.find((c) => c.type === 'Ready')?.reason ?? '?'}`, 'status');
        return undefined;
      },
    },
    connections: {
      resolve: async () => world.resolution ?? { ok: true, connection },
    },
    workloads: {
      read: async (_ns, target) => {
        kubeRequest(`GET ${target.kind}/${target.name}`);
        const key = `${target.kind}/${target.name}`;
        const read = world.workloads?.get(key);
        if (read && world.workloadChangesAfterRead) world.workloads?.set(key, { ...read, resourceVersion: `${read.resourceVersion}0` });
        // As WorkloadRestarter.read: the restart it hands patches exactly the version read.
        return read
          ? { kind: 'found', workload: read, restart: (userGroupName, value) => restart(target, read.resourceVersion, userGroupName, value) }
          : { kind: 'missing' };
      },
    },

    pods: {
      consenting: async () => {
        kubeRequest('LIST consenting Pods');
        if (world.promptRefusal) return { kind: 'refused', error: world.promptRefusal };
        const pods = [...(world.pods ?? new Map<string, string | undefined>())].map(([name, promptedFor]) => ({ name, promptedFor }));
        return {
          kind: 'listed',
          pods,
          prompt: async (pod, issuedAt) => {
            kubeRequest(`prompt Pod/${pod}`);
            if (!world.pods?.has(pod)) return { kind: 'gone' };
            world.pods.set(pod, issuedAt);
            return { kind: 'prompted' };
          },
        };
      },
    },
    events: {
      emit: (_ug, event) => {
        calls.push(`Event ${event.type} ${event.reason}`);
        emitted.push(`${event.type} ${event.reason}`);
      },
    },
    metrics: {
      count: (counted) => {
        if (counted.metric === 'deletion-rotation') deletionResults.push(counted.result);
      },
    },
    caps: {
      take: (cap) => {
        switch (cap) {
          case 'scheduled-rotation':
            return capSlot('cap', world.capWaitMs);
          case 'restart':
            return capSlot('restart cap', world.restartCapWaitMs);
          case 'prompt':
            return capSlot('prompt cap', world.promptCapWaitMs);
          case 'sync-request':
            return budgetSlot('sync', world.syncSlot);
          case 'rotation-request':
            return budgetSlot('rotation', world.rotationSlot);
        }
      },
    },
    clock: { now: () => now },
    finalizers: {
      // As the real writer, the write shows in the cache at once: the next reconcile sees it.
      set: (on, present) => {
        if ('secret' in on) {
          kubeRequest(`${present ? 'add' : 'remove'} Secret finalizer ${on.secret.metadata.name}`);
          return Promise.resolve(true);
        }
        kubeRequest(`${present ? 'add' : 'remove'} UserGroup finalizer`);
        const { metadata } = world.ug;
        world.ug = { ...world.ug, metadata: withFinalizers(metadata, present ? [ROTATE_ON_DELETE_FINALIZER] : [], metadata.resourceVersion) };
        return Promise.resolve(true);
      },
    },
  };
  const settings = {
    resyncPeriodMs: 3_600_000,
    minTokenAgeMs: 1_000,
    workloadRestarts: world.workloadRestarts ?? true,
    podPrompts: world.podPrompts ?? false,
    deletionRotationTimeoutMs: 300_000,
    rotateOnDelete: world.rotateOnDelete ?? true,
    seesAllNamespaces: world.seesAllNamespaces ?? false,
    requestBudgets: DEFAULT_REQUEST_BUDGETS,
  };
  const reconcile = (): Promise<ReconcileResult> =>
    reconcileUserGroup(
      { ports, settings, log: pino({ level: 'silent' }) },
      { key: objectKey(world.ug.metadata), reconcileId: 'r1', signal: undefined, wake: () => undefined },
    );
  const tally = (log: readonly string[]): Record<string, number> => {
    const counted: Record<string, number> = {};
    for (const entry of log) counted[entry] = (counted[entry] ?? 0) + 1;
    return counted;
  };
  const status = (): UserGroupStatus | undefined => statuses.at(-1) ?? world.ug.status;
  const ready = (): Condition | undefined => status()?.conditions?.find((c) => c.type === 'Ready');
  const secretNow = (): ObservedSecret | undefined => (world.live && !deleted.includes(world.live.metadata.name) ? world.live : undefined);
  const tokenOf = (s: ObservedSecret | undefined): string | undefined =>
    s === undefined ? undefined : Buffer.from(Object.values(s.data ?? {})[0] ?? '', 'base64').toString('utf8');
  const order = (...names: string[]): string[] => calls.filter((c) => names.includes(c));
  const serviceCalls = (): Record<string, number> => tally(service);
  const events = (): Record<string, number> => tally(emitted);
  return {
    calls,
    writes,
    claims,
    statuses,
    deleted,
    serviceToken: () => token,
    outcome: () => ({ service: serviceCalls(), secret: tokenOf(secretNow()), events: events(), ready: ready()?.reason }),
    serviceCalls,
    kubeRequests: () => tally(kube),
    kubeWrites: () => tally(kube.filter((k) => !k.startsWith('GET ') && !k.startsWith('LIST '))),
    events,
    deletions: () => tally(deletionResults),
    status,
    ready,
    secret: secretNow,
    order,
    reconcile,
    requeue: (result) => toldQueue(result, now),
  };
}

/** The outcome of a first sync with the claim already held: one PUT, its token stored, Synced. */
export const FIRST_SYNC: Outcome = { service: { PUT: 1 }, secret: 'tok-1', events: { 'Normal Synced': 1 }, ready: 'Synced' };

/**
 * The outcome of a requested rotation of a synced UserGroup holding tok-1: the PUT that reads the current token,
 * one POST, the new token stored, Synced.
 */
export const REQUESTED_ROTATION: Outcome = {
  service: { PUT: 1, POST: 1 },
  secret: 'tok-r1',
  events: { 'Normal Synced': 1, 'Normal TokenRotated': 1 },
  ready: 'Synced',
};

/** The harness's Secret as the operator writes it for `acme`: `token` and its bookkeeping, sealed (SEAL). */
export function sealedSecret(token: string, book: { handled?: string; pending?: string; issuedAt?: string } = {}): ObservedSecret {
  const ug = userGroup();
  if (!ug.spec.ok) throw new Error(ug.spec.error);
  const desired = desiredSecret(
    ug.metadata,
    ug.spec.value,
    { token: new SecretValue(token), handled: book.handled, pending: book.pending, issuedAt: book.issuedAt },
    SEAL,
  );
  const parsed = parseSecret(storedSecret(desired, '20'));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** A UserGroup synced before: its sealed token tok-1 (issued at `issuedAt`) cached and live, the service holding it. */
export function syncedHarness(ug: UserGroup, issuedAt: string, now: number, rest: Partial<World> = {}): Harness {
  const stored = sealedSecret('tok-1', { issuedAt });
  return harness({ ug, cached: stored, live: stored, otherKnown: false, serviceToken: 'tok-1', now, ...rest });
}

/** The status of `acme` after its first sync (written by a reconcile of the harness). */
export async function syncedStatus(): Promise<UserGroupStatus> {
  const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: undefined });
  await h.reconcile();
  const status = h.statuses.at(-1);
  if (!status) throw new Error('no status written');
  return status;
}
