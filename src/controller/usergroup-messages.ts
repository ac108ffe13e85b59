// The text of every Event a reconcile sends about a UserGroup and of the condition messages that share it.
import { RESTART_CONSENT_ANNOTATION } from '../api/constants.js';
import type { Reason } from './policies/conditions.js';
import type { RotationDecision } from './policies/rotation.js';
import type { RequestBudgetOptions, RequestKind } from './request-budget.js';
import type { UserGroupEvent } from './usergroup-ports.js';

/**
 * Every Event a reconcile sends about a UserGroup, and the condition messages that share their text: one table,
 * so a reason or a wording is found and changed in one place.
 */

/** A rotation being done: requested (the annotation's value) or scheduled. */
export type Rotation = Extract<RotationDecision, { value: string; scheduled: boolean }>;

/** The service operation a failure or deferral is about. */
/** `rotate-read`: the PUT a requested rotation reads the current token with, part of the rotation. */
export type Operation = 'sync' | 'rotate' | 'rotate-read';

const describeRotation = (rotation: Rotation): string =>
  rotation.scheduled ? `its schedule (the token had reached spec.rotation.maxTokenAge)` : `rotation request "${rotation.value}"`;

const REQUEST: Readonly<Record<Operation, string>> = {
  sync: 'PUT /api/user',
  rotate: 'POST /api/user (rotate)',
  'rotate-read': 'PUT /api/user (reading the token to rotate)',
};
const request = (operation: Operation): string => REQUEST[operation];

export const Events = {
  /** A condition the user must fix; the note is the condition's message. */
  blocked: (reason: Reason, message: string): UserGroupEvent => ({ type: 'Warning', reason, action: 'Sync', note: message }),
  /** A service call failed, or the connection is paused after failures (reported as the failure that paused it). */
  callFailed: (operation: Operation, reason: Reason, message: string): UserGroupEvent => ({
    type: 'Warning',
    reason: operation === 'sync' ? 'SyncFailed' : 'RotationFailed',
    action: operation === 'sync' ? 'Sync' : 'Rotate',
    note: `${reason}: ${message}`,
  }),
  secretWriteFailed: (message: string): UserGroupEvent => ({ type: 'Warning', reason: 'SecretWriteFailed', action: 'Sync', note: message }),
  /** `after`: completed after a restart (the PUT showed the POST had reached the service); `unasked`: and no longer asked for. */
  tokenRotated: (rotation: Rotation, how: 'now' | 'after-restart' | 'after-restart-unasked'): UserGroupEvent => ({
    type: 'Normal',
    reason: 'TokenRotated',
    action: 'Rotate',
    note: `token rotated for ${describeRotation(rotation)}, revoking the token current at the service${
      how === 'after-restart' ? ' (completed after a restart)' : how === 'after-restart-unasked' ? ' (completed after a restart; no longer asked for)' : ''
    }`,
  }),
  /** The POST found the token it carried rotated since it was read: another holder of the account's key did. */
  rotatedElsewhere: (rotation: Rotation, readAt: string, refusedAt: string): UserGroupEvent => ({
    type: 'Normal',
    reason: 'TokenRotatedElsewhere',
    action: 'Rotate',
    note: `for ${describeRotation(rotation)}: the token current at the service at ${readAt} was rotated by another holder of the account's API key before this controller's POST (refused at ${refusedAt}); stored the token current now, without a second rotation`,
  }),
  /** A fleet's follower saw the primary's rotation at the service (a PUT after the request or the schedule's time). */
  followed: (rotation: Rotation, at: string): UserGroupEvent => ({
    type: 'Normal',
    reason: 'TokenRotatedElsewhere',
    action: 'Rotate',
    note: `for ${describeRotation(rotation)}: the fleet's primary cluster rotated the token (seen at ${at}); stored the token current now (this cluster is a fleet follower: it never rotates)`,
  }),
  /** A fleet's follower let a deletionPolicy Rotate UserGroup go without rotating: the other clusters serve the token. */
  deletionLeftToFleet: (): UserGroupEvent => ({
    type: 'Normal',
    reason: 'DeletionRotationSkipped',
    action: 'Delete',
    note: 'deletionPolicy Rotate: the token was not rotated, since this cluster is a fleet follower (ClusterUserGroupService spec.fleet.role Follower) and the other clusters of the account still serve it; delete the UserGroup in the primary cluster to revoke it',
  }),
  /** A fleet's follower looked, and the token has not moved on yet. */
  awaitingPrimary: (rotation: Rotation): UserGroupEvent => ({
    type: 'Normal',
    reason: 'RotationLeftToPrimary',
    action: 'Rotate',
    note: `${describeRotation(rotation)}: this cluster is a fleet follower (ClusterUserGroupService spec.fleet.role Follower) and never rotates; it stores the primary cluster's new token once a PUT shows it (looking again ever less often, at least every 5 minutes)`,
  }),
  adopted: (userGroupId: string, connection: string, tokenRotated: boolean): UserGroupEvent => ({
    type: 'Normal',
    reason: 'Adopted',
    action: 'Sync',
    note: `user group "${userGroupId}" already existed at the service (${connection}): adopted${
      tokenRotated ? ', and its token rotated so that earlier holders lose access' : '; its token was kept (adoption: Keep)'
    }`,
  }),
  /** The PUT's answer said nothing we could read about whether the group was new: no adoption, the policy's safe side. */
  createdUnknown: (userGroupId: string, connection: string, tokenRotated: boolean): UserGroupEvent => ({
    type: 'Warning',
    reason: 'CreatedIndicatorUnknown',
    action: 'Sync',
    note: `the service's answer for user group "${userGroupId}" (${connection}) has no created indicator the operator can read, so it cannot tell a new group from one that was there before; ${
      tokenRotated ? 'its token was rotated as adoption: Rotate asks for a group that may have existed' : 'its token was kept (adoption: Keep)'
    }. see docs/tenancy.md, "How the created indicator is read"`,
  }),
  synced: (
    how: { restored: true; secret: string } | { restored: false; created: boolean | undefined; connection: string; secret: string },
  ): UserGroupEvent => ({
    type: 'Normal',
    reason: 'Synced',
    action: 'Sync',
    note: how.restored
      ? `user group synced; token Secret ${how.secret} restored`
      : `user group ${how.created ? 'created' : 'updated'} at the service (${how.connection}); token in Secret ${how.secret}`,
  }),
  /** deletionPolicy Retain kept the token Secret of a deleted UserGroup, and this one (applied again) took it back. */
  reclaimed: (secret: string, from: string): UserGroupEvent => ({
    type: 'Normal',
    reason: 'TokenSecretReclaimed',
    action: 'Sync',
    note: `took back token Secret ${secret}, kept when UserGroup ${from} of this namespace was deleted (deletionPolicy Retain): the service still has its token, so it stays, unrotated`,
  }),
  /** A sync or rotation request over its namespace's budget: it waits for the slot kept for it (said once per slot). */
  requestWaiting: (kind: RequestKind, value: string, inMs: number, budget: RequestBudgetOptions): UserGroupEvent => ({
    type: 'Normal',
    reason: kind === 'sync' ? 'SyncRequestWaiting' : 'RotationRequestWaiting',
    action: kind === 'sync' ? 'Sync' : 'Rotate',
    note: `${kind} request "${value}" waits ${Math.ceil(inMs / 1000)}s for its turn: ${kind} requests in this namespace are limited to ${budget.burst} at once, then ${budget.perMinute} a minute`,
  }),
  restartsDisabled: (targets: string): UserGroupEvent => ({
    type: 'Warning',
    reason: 'RolloutRestartDisabled',
    action: 'Restart',
    note: `the token changed but ${targets} were not restarted: this operator does not restart workloads (the chart's rolloutRestart.enabled is off)`,
  }),
  restartTargetNotFound: (target: string, namespace: string): UserGroupEvent => ({
    type: 'Warning',
    reason: 'RestartTargetNotFound',
    action: 'Restart',
    note: `${target} does not exist in namespace ${namespace}; not restarted for the new token`,
  }),
  restartTargetNotAllowed: (target: string): UserGroupEvent => ({
    type: 'Warning',
    reason: 'RestartTargetNotAllowed',
    action: 'Restart',
    note: `${target} was not restarted for the new token: its owner has not named this UserGroup in its ${RESTART_CONSENT_ANNOTATION} annotation`,
  }),
  rolloutRestarted: (target: string, issuedAt: string): UserGroupEvent => ({
    type: 'Normal',
    reason: 'RolloutRestarted',
    action: 'Restart',
    note: `restarted ${target} for the new token (issued ${issuedAt})`,
  }),
  podsPrompted: (pods: number, issuedAt: string): UserGroupEvent => ({
    type: 'Normal',
    reason: 'PodsPrompted',
    action: 'Prompt',
    note: `prompted the kubelet of ${pods} consenting Pod${pods === 1 ? '' : 's'} to rewrite the mounted token now (issued ${issuedAt})`,
  }),
  podPromptFailed: (error: string): UserGroupEvent => ({
    type: 'Warning',
    reason: 'PodPromptFailed',
    action: 'Prompt',
    note: `could not prompt the consenting Pods for the new token (their kubelets rewrite it at their next sync): ${error}`,
  }),
  restartFailed: (target: string, error: string): UserGroupEvent => ({
    type: 'Warning',
    reason: 'RestartFailed',
    action: 'Restart',
    note: `could not restart ${target} for the new token: ${error}`,
  }),
  /** spec.deletionPolicy Rotate: the token was rotated before the UserGroup went (the new token is discarded). */
  rotatedOnDelete: (alreadyInvalid: boolean): UserGroupEvent => ({
    type: 'Normal',
    reason: 'TokenRotatedOnDelete',
    action: 'Delete',
    note: alreadyInvalid
      ? 'deletionPolicy Rotate: the service no longer accepts the held token as current, so it is already invalid; the UserGroup may go'
      : 'deletionPolicy Rotate: the token was rotated at the service and the new one discarded, so the deleted token no longer works',
  }),
  /** spec.deletionPolicy Rotate: the deletion let go without the rotation; the token stays valid at the service. */
  deletionRotationAbandoned: (why: string): UserGroupEvent => ({
    type: 'Warning',
    reason: 'RotationOnDeleteAbandoned',
    action: 'Delete',
    note: `deletionPolicy Rotate: the token was NOT rotated before the UserGroup went (${why}); it stays valid at the service until rotated there`,
  }),
  /** Sent by the controller when a UserGroup goes (only the active replica speaks). */
  deleted: (kept: boolean): UserGroupEvent => ({
    type: 'Normal',
    reason: 'Deleted',
    action: 'Delete',
    note: kept
      ? 'UserGroup deleted: the service has no delete operation, so the user group stays there; its token Secret is kept (deletionPolicy Retain), and a UserGroup applied again with the same userGroupId takes it back unrotated'
      : 'UserGroup deleted: the service has no delete operation, so the user group stays there; its token Secret is removed by garbage collection',
  }),
} as const;

/** Messages of the Ready condition (a blocked one is its Event's note too). */
export const Messages = {
  suspended: 'spec.suspend is true: the operator makes no call to the service',
  synced: (secret: string): string => `user group synced; token in Secret ${secret}`,
  /** Synced, and a fleet follower waiting for the primary's rotation: what `kubectl get` shows of it. */
  syncedFollowing: (secret: string, rotation: Rotation): string =>
    `user group synced; token in Secret ${secret}; ${describeRotation(rotation)} is left to the fleet's primary cluster (this cluster is a follower and never rotates): the new token is stored once the primary has rotated`,
  secretConflict: (secretKey: string): string =>
    `Secret ${secretKey} exists and is not owned by this UserGroup; the operator never modifies it. Delete it, or set spec.tokenSecret.name to another name`,
  secretWriteFailed: (secret: string, error: string): string => `the apiserver refused to write token Secret ${secret}: ${error}`,
  duplicate: (userGroupId: string, holder: string, connection: string): string =>
    `userGroupId "${userGroupId}" is already used by UserGroup ${holder} on ${connection}; this one makes no call until that one is deleted`,
  claimedElsewhere: (userGroupId: string, connection: string, claim: string): string =>
    `userGroupId "${userGroupId}" is held by another namespace on the account of ${connection} (UserGroupClaim ${claim}); only a cluster admin can release it`,
  adoptionUndecidable: (userGroupId: string, connection: string): string =>
    `the service's answer for user group "${userGroupId}" (${connection}) has no created indicator the operator can read, so the group may have ` +
    'existed before, and the tenant rule that admits it says adoption: Refuse; its token was not stored. see docs/tenancy.md, "How the created indicator is read"',
  adoptionRefused: (userGroupId: string, connection: string): string =>
    `user group "${userGroupId}" already existed at the service (${connection}) before this UserGroup synced it, and the tenant rule ` +
    'that admits it says adoption: Refuse; its token was not stored. (The service has no read operation: the PUT that found it has set its name and properties.) ' +
    'A cluster admin can allow adoption (adoption: Rotate or Keep), or use another userGroupId',
  /** A refusal that also took away token Secrets the namespace may no longer hold. */
  revoked: (message: string, deleted: readonly string[]): string => (deleted.length > 0 ? `${message}; deleted token Secret ${deleted.join(', ')}` : message),
  callFailed: (operation: Operation, connection: string, detail: string): string => `${request(operation)} via ${connection} failed: ${detail}`,
  callPaused: (operation: Operation, connection: string, deferral: string, cause: string): string =>
    `${request(operation)} via ${connection} ${deferral}${cause}`,
} as const;
