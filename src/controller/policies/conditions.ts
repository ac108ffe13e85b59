// The Ready condition: its reasons, and how it moves from one reconcile to the next (pure).
import type { Condition, ConditionStatus } from '../../api/usergroup.js';

/** Reasons of the Ready condition; the README's troubleshooting table explains each. */
export const Reason = {
  Synced: 'Synced',
  Suspended: 'Suspended',
  Unauthorized: 'Unauthorized',
  Rejected: 'Rejected',
  RateLimited: 'RateLimited',
  ServiceUnavailable: 'ServiceUnavailable',
  InvalidResponse: 'InvalidResponse',
  SecretConflict: 'SecretConflict',
  SecretWriteFailed: 'SecretWriteFailed',
  DuplicateUserGroupId: 'DuplicateUserGroupId',
  InvalidSpec: 'InvalidSpec',
  ConnectionNotFound: 'ConnectionNotFound',
  ConnectionInvalid: 'ConnectionInvalid',
  /** A namespaced UserGroupService points where the operator's egress policy does not allow. */
  ServiceNotAllowed: 'ServiceNotAllowed',
  /** A shared connection's tenant rules do not admit the namespace. */
  NamespaceNotAllowed: 'NamespaceNotAllowed',
  /** The namespace is admitted, but not for this userGroupId. */
  UserGroupIdNotAllowed: 'UserGroupIdNotAllowed',
  /** Another namespace holds the userGroupId on this account (a UserGroupClaim). */
  UserGroupIdClaimed: 'UserGroupIdClaimed',
  /** The first sync found the group already at the service, and the rules do not allow adopting it. */
  AdoptionRefused: 'AdoptionRefused',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/**
 * The Ready condition as it should be now. lastTransitionTime only moves when the
 * status flips, as the Kubernetes API conventions ask.
 */
export function nextReadyCondition(
  previous: Condition | undefined,
  status: ConditionStatus,
  reason: Reason,
  message: string,
  generation: number,
  now: string,
): Condition {
  return {
    type: 'Ready',
    status,
    reason,
    message: message.slice(0, 32_768),
    lastTransitionTime: previous?.status === status && previous.lastTransitionTime ? previous.lastTransitionTime : now,
    observedGeneration: generation,
  };
}
