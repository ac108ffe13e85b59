// Step 4, plan: everything the steps after it need, decided at once from what was observed (pure).
import { ROTATE_ANNOTATION, SYNC_ANNOTATION } from '../../api/constants.js';
import type { UserGroup, UserGroupSpec } from '../../api/usergroup.js';
import type { UpsertRequest } from '../../service/types.js';
import type { Connection } from '../connections.js';
import type { FleetRole } from '../../api/clusterusergroupservice.js';
import {
  decideRotation,
  effectiveMaxTokenAge,
  fleetScheduledRotation,
  followInstead,
  scheduledRotation,
  type RotationDecision,
  type ScheduledRotation,
} from '../policies/rotation.js';
import { decideSync, nextResyncAt, syncHash, upsertRequestFor, type SyncDecision } from '../policies/sync.js';
import { decideSyncRequest, type SyncRequestDecision } from '../policies/sync.js';
import type { KeptSecret, SecretInspection } from '../policies/token-secret.js';
import type { IdHold } from './claim.js';
import type { ReconcileSettings } from '../usergroup-step.js';

/** What a reconcile holds once admitted and its id is held (by its claim, or by the rules alone). */
export interface Held extends IdHold {
  readonly spec: UserGroupSpec;
  readonly connection: Connection;
}

/** The token Secret as this UserGroup controls it. */
export type OwnedSecret = Extract<SecretInspection, { state: 'owned' }>;

/** The decisions of one reconcile, made from what it observed before any effect. No I/O. */
export interface Plan extends Held {
  readonly request: UpsertRequest;
  /** Digest of the request on this connection: status.syncedHash once it is synced. */
  readonly hash: string;
  readonly now: number;
  /** The token Secret this UserGroup controls, as observed. */
  readonly owned: OwnedSecret | undefined;
  /** A token Secret kept from a deleted UserGroup of this namespace at spec.tokenSecret.name (deletionPolicy Retain). */
  readonly kept: KeptSecret | undefined;
  readonly sync: SyncDecision;
  readonly rotation: RotationDecision;
  /** A sync request (usergroup.dev/sync-requested-at) to answer: by the PUT planned anyway, or by one of its own. */
  readonly syncRequest: SyncRequestDecision;
  /** When the held token was obtained, as far as anything records it (the Secret, else the status, else creation). */
  readonly issuedAt: string;
  /** The scheduled rotation of the held token, with spec.rotation.maxTokenAge. */
  readonly schedule: ScheduledRotation | undefined;
  /**
   * Known without a read to have synced on this account before: status records this very request on this
   * connection, or the Secret's record is sealed under this account's key. Tenants write neither (status needs
   * usergroups/status; a seal needs the API key). A group the service says it did not create is then its own.
   */
  readonly syncedBefore: boolean;
}

export interface PlanInputs {
  readonly ug: UserGroup;
  readonly held: Held;
  readonly secret: Exclude<SecretInspection, { state: 'foreign' }>;
  readonly settings: ReconcileSettings;
  readonly now: number;
}

export function plan({ ug, held, secret, settings, now }: PlanInputs): Plan {
  const request = upsertRequestFor(held.spec);
  const hash = syncHash(request, held.connection.id);
  const resyncAt = nextResyncAt(ug.status.lastSyncTime, ug.metadata.uid, settings.resyncPeriodMs);
  const { rotation, issuedAt, schedule } = rotationFor(ug, held.spec, secret, settings, now, held.connection.fleet);
  const owned = secret.state === 'owned' ? secret : undefined;
  const kept = secret.state === 'kept' ? secret : undefined;
  const sync = decideSync({ status: ug.status, desiredHash: hash, secret, resyncDue: resyncAt !== undefined && now >= resyncAt });
  return {
    ...held,
    request,
    hash,
    now,
    owned,
    kept,
    sync,
    rotation,
    syncRequest: decideSyncRequest(ug.metadata.annotations[SYNC_ANNOTATION], ug.status.lastHandledSyncRequest, putPlanned(sync, rotation)),
    issuedAt,
    schedule,
    syncedBefore: owned?.trusted === true || ug.status.syncedHash === hash,
  };
}

/** Whether the sync step PUTs: the plan says so, or a rotation begun before a crash needs the current token. */
export function putPlanned(sync: SyncDecision, rotation: RotationDecision): boolean {
  return sync.kind === 'upsert' || rotation.kind === 'recover' || rotation.kind === 'settle' || (rotation.kind === 'follow' && rotation.look);
}

/**
 * The rotation to do, requested or scheduled. A schedule needs a token to rotate (a trusted Secret) and counts
 * from when that token was obtained: the Secret records it; older Secrets fall back to the status, then to the
 * UserGroup's creation (the earliest the token can date from: never later than its real due time).
 */
export function rotationFor(
  ug: UserGroup,
  spec: UserGroupSpec,
  secret: SecretInspection,
  settings: ReconcileSettings,
  now: number,
  fleet: FleetRole | undefined,
): { rotation: RotationDecision; issuedAt: string; schedule: ScheduledRotation | undefined } {
  const owned = secret.state === 'owned' && secret.trusted ? secret : undefined;
  const recorded = ug.status.rotation;
  // A kept Secret's token dates from before this UserGroup: its schedule goes on from there, never later.
  const kept = secret.state === 'kept' ? secret : undefined;
  const issuedAt = owned?.issuedAt ?? kept?.issuedAt ?? recorded?.tokenIssuedTime ?? recorded?.lastRotationTime ?? ug.metadata.creationTimestamp;
  const schedule = owned ? tokenSchedule(ug, spec, settings, issuedAt, fleet) : undefined;
  const decided = decideRotation(
    ug.metadata.annotations[ROTATE_ANNOTATION],
    secret,
    recorded?.lastHandledRequest,
    schedule && { value: schedule.value, due: now >= schedule.dueAt },
  );
  if (fleet !== 'Follower' || (decided.kind !== 'rotate' && decided.kind !== 'recover')) return { rotation: decided, issuedAt, schedule };
  const lastLookAt = ug.status.lastSyncTime === undefined ? undefined : Date.parse(ug.status.lastSyncTime);
  return {
    rotation: followInstead(decided, {
      since: followedSince(decided, schedule, recorded?.following, now),
      lastLookAt: Number.isNaN(lastLookAt) ? undefined : lastLookAt,
      now,
    }),
    issuedAt,
    schedule,
  };
}

/**
 * Since when a follower follows a rotation: a scheduled one since it fell due (the same time in every cluster); a
 * requested one since this follower first saw it (status.rotation.following), not since the time its value may
 * name: Git may deliver a value written hours ago, and the primary sees it no earlier than this cluster does.
 */
function followedSince(
  decided: Extract<RotationDecision, { kind: 'rotate' | 'recover' }>,
  schedule: ScheduledRotation | undefined,
  following: NonNullable<UserGroup['status']['rotation']>['following'],
  now: number,
): number {
  if (decided.scheduled && schedule) return Math.min(schedule.dueAt, now);
  const seen = following?.request === decided.value ? Date.parse(following.since) : NaN;
  return Number.isNaN(seen) ? now : Math.min(seen, now);
}

/**
 * The scheduled rotation of a token obtained at `issuedAt`: spec.rotation.maxTokenAge raised to the operator's floor.
 * In a fleet, the schedule every cluster derives alike from the id.
 */
export function tokenSchedule(
  ug: UserGroup,
  spec: UserGroupSpec,
  settings: ReconcileSettings,
  issuedAt: string,
  fleet: FleetRole | undefined,
): ScheduledRotation | undefined {
  const maxAge = effectiveMaxTokenAge(spec, settings.minTokenAgeMs);
  if (maxAge === undefined) return undefined;
  return fleet ? fleetScheduledRotation(issuedAt, maxAge, spec.userGroupId) : scheduledRotation(issuedAt, maxAge, ug.metadata.uid);
}

/**
 * Whether the Secret's data must be had (recalled or read) before acting on it: a rotation needs the held token,
 * and metadata at a resourceVersion this process did not write or check may be someone else's change. The
 * rotation is only worked out where it matters (a trusted Secret seen as metadata only).
 */
export function mustReadData(secret: SecretInspection, verified: boolean, rotation: () => RotationDecision): boolean {
  if (secret.state !== 'owned' || secret.secret.data !== undefined || !secret.trusted) return false;
  if (!verified) return true;
  const { kind } = rotation();
  return kind === 'rotate' || kind === 'recover' || kind === 'settle' || kind === 'follow';
}
