// What the steps after the plan hand on to each other, starting from what the plan and the status give.
import type { ObservedSecret } from '../../api/secret.js';
import type { UserGroupStatus } from '../../api/usergroup.js';
import type { SecretValue } from '../../service/secret-value.js';
import type { ServiceUserGroup } from '../../service/types.js';
import type { FailureCause } from '../reconcile-contract.js';
import type { Plan } from './plan.js';

/** Rotation bookkeeping as the token Secret records it (sealed with the token). */
export interface Bookkeeping {
  /** The last requested rotation value handled. */
  readonly handled: string | undefined;
  /** A rotation begun (recorded before its POST) and not yet known to be done. */
  readonly pending: string | undefined;
}

/** What the steps after the plan have done so far; each hands on a new one. */
export interface Progress {
  /** The token to store: the held one, or what the service returned. */
  readonly token: SecretValue | undefined;
  /** The service's answer, when a call went out. */
  readonly group: ServiceUserGroup | undefined;
  readonly book: Bookkeeping;
  /** When this reconcile rotated the token, if it did. */
  readonly rotatedAt: string | undefined;
  readonly adopted: UserGroupStatus['adoption'];
  /** The token Secret as stored now (after our own writes), if any. */
  readonly secret: ObservedSecret | undefined;
  /** The adopt step took back a token Secret kept from this deleted UserGroup (its name): same token, no rotation. */
  readonly reclaimedFrom?: string;
  /** From the store step: when the stored token was obtained, and whether it is another than the one held before. */
  readonly stored?: { readonly issuedAt: string; readonly changed: boolean };
  /**
   * A rotation waits for its slot this far ahead (rotation-slot.ts): a due scheduled one for the global cap's, a
   * requested one for its namespace's budget's.
   */
  readonly rotationSlotInMs?: number;
  /** A sync request waits for its namespace's budget: the slot kept for it is this far ahead. */
  readonly syncRequestSlotInMs?: number;
  /** From the restart step. */
  readonly restarts?: RestartProgress;
}

export interface RestartProgress {
  /** status.rolloutRestarts as the step leaves it. */
  readonly status: UserGroupStatus['rolloutRestarts'];
  /** Restarts are left to do: the cap keeps a slot this far ahead. */
  readonly slotInMs?: number;
  /** Restarts are left to do: a target could not be restarted. */
  readonly failure?: FailureCause;
}

/**
 * Before any step: what the Secret holds, and what the status said was handled. A Secret kept from a deleted
 * UserGroup is the one the next write replaces, whichever way the adopt step decides.
 */
export function startingPoint(plan: Plan, previous: UserGroupStatus): Progress {
  const { owned, kept } = plan;
  return {
    token: owned?.token,
    group: undefined,
    book: { handled: owned?.handled ?? kept?.handled ?? previous.rotation?.lastHandledRequest, pending: owned?.pending },
    rotatedAt: undefined,
    adopted: undefined,
    secret: owned?.secret ?? kept?.secret,
  };
}

/** When the token now held was obtained: the store step knows; before it, the plan's. */
export function issuedAtNow(plan: Plan, progress: Progress): string {
  return progress.stored?.issuedAt ?? plan.issuedAt;
}
