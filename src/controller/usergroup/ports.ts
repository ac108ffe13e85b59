// The ports of a reconcile: what it may read and do, grouped by what it touches.
import type { V1Secret } from '@kubernetes/client-node';
import type { ClaimSpec, UserGroupClaim } from '../../api/claim.js';
import type { ClusterUserGroupService } from '../../api/clusterusergroupservice.js';
import type { OwnerReference } from '../../api/meta.js';
import type { ObservedSecret } from '../../api/secret.js';
import type { ServiceRef, UserGroup, UserGroupStatus } from '../../api/usergroup.js';
import type { RestartKind, RestartTarget } from '../../api/workload.js';
import type { ClaimWriteResult } from '../../kube/claim-writer.js';
import type { EventType } from '../../kube/event-recorder.js';
import type { SecretApplyResult } from '../../kube/secret-writer.js';
import type { RestartResult, WorkloadRead } from '../../kube/workload-restarter.js';
import type { PodList, PromptResult } from '../../kube/pod-prompter.js';
import type { RequestKind, RequestSlot } from '../request-budget.js';
import type { SecretValue } from '../../service/secret-value.js';
import type { Connection, Resolution } from '../connections.js';

/**
 * What a reconcile reads and does, grouped by what it touches. The controller wires them over its caches and
 * writers (controller/reconcile-ports.ts), every write fenced by the Lease; the unit tests over stand-ins.
 */
export interface ReconcilePorts {
  readonly userGroups: UserGroupsPort;
  readonly claims: ClaimsPort;
  readonly secretCache: TokenSecretCacheView;
  readonly secrets: TokenSecretApplyPort;
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

/** The rotate-on-delete finalizer (spec.deletionPolicy Rotate), on UserGroups and their token Secrets. */
export interface FinalizersPort {
  /** Adds or removes it; false when the object changed meanwhile (decide again) — gone counts as done. */
  userGroup(ug: UserGroup, present: boolean): Promise<boolean>;
  secret(secret: Pick<ObservedSecret, 'metadata'>, present: boolean): Promise<boolean>;
  /** The namespace is being deleted: the namespace cache, else a live read (its watch event may come after a Secret's). */
  namespaceTerminating(namespace: string): Promise<boolean>;
}

/** The UserGroup cache. */
export interface UserGroupsPort {
  get(key: string): UserGroup | undefined;
  /** UserGroups sharing a userGroupId (holders of claims, and installs older than claims). */
  withId(userGroupId: string): UserGroup[];
}

/** UserGroupClaims: the cache (cluster-scoped, by name) and the apiserver. */
export interface ClaimsPort {
  cached(name: string): UserGroupClaim | undefined;
  read(name: string): Promise<UserGroupClaim | undefined>;
  create(spec: ClaimSpec): Promise<ClaimWriteResult>;
  replace(current: UserGroupClaim, spec: ClaimSpec): Promise<ClaimWriteResult>;
  release(claim: UserGroupClaim): Promise<void>;
}

/** Token Secrets as the caches and this process know them: no request, no write to the apiserver. */
export interface TokenSecretCacheView {
  /**
   * A name as the caches know it: the token-Secret cache's copy (Secrets a UserGroup controls, metadata only: read
   * the data with TokenSecretApplyPort.read), and whether the name-only cache of all other Secrets knows it
   * (someone else's, or ours unlabelled).
   */
  seen(key: string): { readonly cached: ObservedSecret | undefined; readonly otherExists: boolean };
  /** The cached token Secrets this UserGroup controls (the current one, and any left from an earlier spec.tokenSecret.name). */
  owned(ug: UserGroup): ObservedSecret[];
  /**
   * The second owner of a token Secret under deletionPolicy Retain, which keeps it when its UserGroup is deleted:
   * the namespace (from the namespaces cache; undefined if it is not there).
   */
  keeper(namespace: string): OwnerReference | undefined;
  /** What this process knows of the data of the Secret `key` at this resourceVersion, and how it learns more. */
  known(key: string, resourceVersion: string): KnownData;
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

/** Token Secrets at the apiserver: read one whole, write one (compare before write), delete one. */
export interface TokenSecretApplyPort {
  read(namespace: string, name: string): Promise<ObservedSecret | undefined>;
  /** Writes the Secret unless `current` already is `desired` (SecretWriter.apply); what it writes, the cache view knows. */
  apply(desired: V1Secret, current: ObservedSecret | undefined): Promise<SecretApplyResult>;
  delete(secret: ObservedSecret): Promise<void>;
}

export interface StatusPort {
  patch(ug: UserGroup, status: UserGroupStatus, clear: readonly (keyof UserGroupStatus)[]): Promise<void>;
}

export interface ConnectionsPort {
  resolve(namespace: string, ref: ServiceRef | undefined, userGroupId: string): Promise<Resolution>;
  /** Forget the connection's cached API key (after a 401). */
  invalidate(connection: Connection): void;
  /** Every ClusterUserGroupService, as cached: their rules decide whether an id is bound to one namespace. */
  clusterServices(): readonly ClusterUserGroupService[];
}

/** The namespace's workloads, as far as restarting them needs. */
export interface WorkloadsPort {
  read(namespace: string, target: RestartTarget): Promise<WorkloadRead>;
  restart(namespace: string, target: RestartTarget, resourceVersion: string, userGroupName: string, value: string): Promise<RestartResult>;
}

/** The namespace's Pods that consented to prompts for a UserGroup, as metadata. */
export interface PodsPort {
  consenting(namespace: string, userGroupName: string): Promise<PodList>;
  prompt(namespace: string, pod: string, userGroupName: string, issuedAt: string): Promise<PromptResult>;
}

/** An Event about a UserGroup; every text and reason is in event-messages.ts. */
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

export interface MetricsPort {
  tokenRotated(trigger: RotationTrigger): void;
  /** A rotation the service did not do (not one that was only deferred: that is no failure). */
  rotationFailed(trigger: RotationTrigger): void;
  workloadRestarted(kind: RestartKind, outcome: RestartOutcome): void;
  /** A deletion that held the rotate-on-delete finalizer let go: after rotating, without a call, or giving up. */
  deletionRotation(result: DeletionRotationResult): void;
}

/** How a deletion with spec.deletionPolicy Rotate ended (usergroup_delete_rotations_total). */
export type DeletionRotationResult = 'rotated' | 'skipped' | 'abandoned';

/**
 * The global caps (rate-cap.ts) and the namespaces' request budgets (request-budget.ts). Each takes a slot for this
 * UserGroup key: now, or the milliseconds until the slot kept for it (come back then).
 */
export interface CapsPort {
  /** Scheduled rotations (--scheduled-rotations-per-minute): 0 now, else the wait. */
  rotation(key: string): number;
  /** Workload restarts (--workload-restarts-per-minute): 0 now, else the wait. */
  restart(key: string): number;
  /** Pod prompts (--mounted-token-refreshes-per-minute): 0 now, else the wait. */
  prompt(key: string): number;
  /** A sync or rotation request: a slot of that kind's budget of the UserGroup's namespace. */
  request(kind: RequestKind, namespace: string, key: string): RequestSlot;
  /** The request's call went out: its slot is used up (a deferred one keeps it). */
  requestSpent(kind: RequestKind, namespace: string, key: string): void;
}

export interface ClockPort {
  /** Milliseconds since the epoch. */
  now(): number;
}
