// The ports of a reconcile: what it may read and do, grouped by what it touches.
import type { V1Secret } from '@kubernetes/client-node';
import type { ClaimSpec, UserGroupClaim } from '../api/claim.js';
import type { OwnerReference } from '../api/meta.js';
import type { ObservedSecret } from '../api/secret.js';
import type { ServiceRef, UserGroup, UserGroupStatus } from '../api/usergroup.js';
import type { RestartKind, RestartTarget } from '../api/workload.js';
import type { ClaimWriteResult } from '../kube/claim-writer.js';
import type { EventType } from '../kube/event-recorder.js';
import type { FinalizerTarget } from '../kube/finalizer-writer.js';
import type { SecretApplyResult } from '../kube/secret-writer.js';
import type { WorkloadRead } from '../kube/workload-restarter.js';
import type { PodList } from '../kube/pod-prompter.js';
import type { SecretValue } from '../service/secret-value.js';
import type { Resolution } from './connections.js';

/**
 * What a reconcile reads and does, grouped by what it touches: 14 ports, 20 methods. The controller wires them
 * (controller/reconcile-ports.ts): the writers of src/kube themselves, each fencing its writes with the Lease and
 * writing them through to the caches it is given, and the caches; the unit tests wire stand-ins.
 */
export interface ReconcilePorts {
  readonly userGroups: UserGroupsPort;
  readonly claims: ClaimsPort;
  readonly secretCache: TokenSecretCacheView;
  readonly namespaces: NamespacesPort;
  readonly secrets: TokenSecretsPort;
  readonly status: StatusPort;
  readonly connections: ConnectionsPort;
  readonly workloads: WorkloadsPort;
  readonly pods: PodsPort;
  readonly events: EventsPort;
  readonly metrics: MetricsPort;
  readonly caps: CapsPort;
  readonly clock: ClockPort;
  readonly finalizers: FinalizersPort;
}

/** The rotate-on-delete finalizer (spec.deletionPolicy Rotate), on UserGroups and their token Secrets (FinalizerWriter). */
export interface FinalizersPort {
  /** Adds or removes it; false when the object changed meanwhile (decide again) — gone counts as done. */
  set(on: FinalizerTarget, present: boolean): Promise<boolean>;
}

/** The UserGroup cache. */
export interface UserGroupsPort {
  get(key: string): UserGroup | undefined;
  /** UserGroups sharing a userGroupId (holders of claims, and installs older than claims). */
  withId(userGroupId: string): UserGroup[];
}

/** UserGroupClaims: the cache (cluster-scoped, by name) and the apiserver (ClaimWriter). */
export interface ClaimsPort {
  cached(name: string): UserGroupClaim | undefined;
  /** Creates the claim (`current` undefined) or takes over exactly that version; a lost race hands back what won, read again. */
  write(current: UserGroupClaim | undefined, spec: ClaimSpec): Promise<ClaimWriteResult>;
  release(claim: UserGroupClaim): Promise<void>;
}

/** Token Secrets as the caches and this process know them: no request, no write to the apiserver. */
export interface TokenSecretCacheView {
  /**
   * A name as the caches know it: the token-Secret cache's copy (Secrets a UserGroup controls, metadata only: read
   * the data with TokenSecretsPort.read), whether the name-only cache of all other Secrets knows it (someone
   * else's, or ours unlabelled), and what this process knows of its data.
   */
  seen(key: string): SeenSecret;
  /** The cached token Secrets this UserGroup controls (the current one, and any left from an earlier spec.tokenSecret.name). */
  owned(ug: UserGroup): ObservedSecret[];
}

export interface SeenSecret {
  readonly cached: ObservedSecret | undefined;
  readonly otherExists: boolean;
  /** What this process knows of the Secret's data at this resourceVersion, and how it learns more. */
  known(resourceVersion: string): KnownData;
}

/**
 * What this process knows of a token Secret's data at one resourceVersion: `verified` when it wrote or checked it
 * (its own write, a read that matched the sealed digest, or what was there when the workers started) — if not,
 * someone else wrote it since and the data must be read before the metadata is believed; and the token itself
 * when it still knows it (spares a read).
 */
export interface KnownData {
  readonly verified: boolean;
  readonly token: SecretValue | undefined;
  /** A read of the same Secret that matched the sealed digest: that version's data is the operator's. */
  remember(resourceVersion: string, token: SecretValue): void;
}

/** Namespaces, as far as a UserGroup's token Secret and finalizers need them. */
export interface NamespacesPort {
  get(namespace: string): NamespaceView;
}

export interface NamespaceView {
  /**
   * The second owner of a token Secret under deletionPolicy Retain, which keeps it when its UserGroup is deleted:
   * the namespace (from the namespaces cache; undefined if it is not there).
   */
  readonly keeper: OwnerReference | undefined;
  /** The namespace is being deleted: the namespace cache, else a live read (its watch event may come after a Secret's). */
  terminating(): Promise<boolean>;
}

/** Token Secrets at the apiserver (SecretWriter): read one whole, write one (compare before write), delete one. */
export interface TokenSecretsPort {
  read(namespace: string, name: string): Promise<ObservedSecret | undefined>;
  /** Writes the Secret unless `current` already is `desired`; what it writes, the cache view knows when it returns. */
  apply(desired: V1Secret, current: ObservedSecret | undefined): Promise<SecretApplyResult>;
  delete(secret: ObservedSecret): Promise<void>;
}

/** UserGroup status (StatusWriter): the UserGroup as written, which the cache knows when it returns; undefined when it is gone. */
export interface StatusPort {
  patch(ug: UserGroup, status: UserGroupStatus, clear: readonly (keyof UserGroupStatus)[]): Promise<UserGroup | undefined>;
}

/** Which connection a UserGroup uses; the connection itself forgets its API key after a 401 and knows the rules' id bindings. */
export interface ConnectionsPort {
  resolve(namespace: string, ref: ServiceRef | undefined, userGroupId: string): Promise<Resolution>;
}

/** The namespace's workloads, as far as restarting them needs (WorkloadRestarter): a read hands the restart of that version. */
export interface WorkloadsPort {
  read(namespace: string, target: RestartTarget): Promise<WorkloadRead>;
}

/** The namespace's Pods that consented to prompts for a UserGroup, as metadata (PodPrompter): the list hands their prompt. */
export interface PodsPort {
  consenting(namespace: string, userGroupName: string): Promise<PodList>;
}

/** An Event about a UserGroup; every text and reason is in usergroup-messages.ts. */
export interface UserGroupEvent {
  readonly type: EventType;
  readonly reason: string;
  readonly action: string;
  readonly note: string;
}

export interface EventsPort {
  emit(ug: UserGroup, event: UserGroupEvent): void;
}

/** What became of one restart target. */
export type RestartOutcome = 'restarted' | 'not-allowed' | 'missing' | 'failed';

/** Why a token was rotated: someone asked, its schedule, or the adoption of a group found at the service. */
export type RotationTrigger = 'requested' | 'scheduled' | 'adoption';

/**
 * One count of the reconcile's counters (observability/metrics.ts), with its labels: a rotation done; a rotation
 * the service did not do (a deferred one is no failure); a restart target's outcome; a
 * deletion that held the rotate-on-delete finalizer let go (after rotating, without a call, or giving up).
 */
export type ReconcileCount =
  | { readonly metric: 'token-rotated'; readonly trigger: RotationTrigger }
  | { readonly metric: 'rotation-failed'; readonly trigger: RotationTrigger }
  | { readonly metric: 'workload-restarted'; readonly kind: RestartKind; readonly outcome: RestartOutcome }
  | { readonly metric: 'deletion-rotation'; readonly result: DeletionRotationResult };

export interface MetricsPort {
  count(count: ReconcileCount): void;
}

/** How a deletion with spec.deletionPolicy Rotate ended (usergroup_delete_rotations_total). */
export type DeletionRotationResult = 'rotated' | 'skipped' | 'abandoned';

/**
 * What a slot is taken from: the global caps (rate-cap.ts) on scheduled rotations (--scheduled-rotations-per-minute),
 * workload restarts (--workload-restarts-per-minute) and Pod prompts (--mounted-token-refreshes-per-minute); the
 * budgets (request-budget.ts) of the UserGroup's namespace for sync and rotation requests.
 */
export type Cap = 'scheduled-rotation' | 'restart' | 'prompt' | 'sync-request' | 'rotation-request';

/**
 * A slot at once, or the milliseconds until the one kept for this key (come back then; `first`: this call gave it, so say
 * so once). A budget's slot stays the key's until `spend()` (its call went out; a deferred one keeps it); a cap's
 * is used up when taken.
 */
export type Slot = { readonly kind: 'now'; spend(): void } | { readonly kind: 'wait'; readonly inMs: number; readonly first: boolean };

export interface CapsPort {
  /** A slot of `cap` for this UserGroup key (namespace/name; a budget is the namespace's). */
  take(cap: Cap, key: string): Slot;
}

export interface ClockPort {
  /** Milliseconds since the epoch. */
  now(): number;
}
