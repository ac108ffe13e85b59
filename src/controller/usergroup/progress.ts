// What the steps after the plan hand on to each other, starting from what the plan and the status give; the slots they wait for.
import type { ObservedSecret } from '../../api/secret.js';
import type { UserGroupStatus } from '../../api/usergroup.js';
import type { SecretValue } from '../../service/secret-value.js';
import type { ServiceUserGroup } from '../../service/types.js';
import type { ScheduledRotation } from '../policies/rotation.js';
import type { FailureCause, Wake } from '../reconcile-contract.js';
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
  /** What the requested rotation this reconcile handled revoked (status.rotation.lastRevoked). */
  readonly revoked?: RevokedToken;
  /** A fleet follower waits for the primary's rotation for this request (status.rotation.following). */
  readonly following?: NonNullable<UserGroupStatus['rotation']>['following'];
  readonly adopted: UserGroupStatus['adoption'];
  /** The token Secret as stored now (after our own writes), if any. */
  readonly secret: ObservedSecret | undefined;
  /** The adopt step took back a token Secret kept from this deleted UserGroup (its name): same token, no rotation. */
  readonly reclaimedFrom?: string;
  /** From the store step: when the stored token was obtained, and whether it is another than the one held before. */
  readonly stored?: { readonly issuedAt: string; readonly changed: boolean };
  /** A requested rotation's slot of its namespace's budget (rotation-slot.ts): spent once its intent is written (rotate.ts). */
  readonly rotationSlot?: { spend(): void };
  /** Work left for a slot a cap or a budget keeps for this key (waitForSlot): the key comes back at the earliest. */
  readonly wake?: SlotWake;
  /** From the restart step. */
  readonly restarts?: RestartProgress;
  /** From the Pod prompt step. */
  readonly prompts?: PromptProgress;
}

/**
 * What waits for a slot: a rotation (rotation-slot.ts: a due scheduled one for the global cap's, a requested one
 * for its namespace's budget's), a sync request (sync-on-request.ts: its namespace's budget's), workload restarts
 * (restart-consumers.ts: the restart cap's), Pod prompts (prompt-pods.ts: the prompt cap's); on a fleet's follower, the next look for the primary's rotation
 * (rotate.ts).
 */
export type SlotFor = 'rotation' | 'sync-request' | 'restart' | 'prompt' | 'follow';

/** The slots this reconcile's work waits for, as one value. */
export interface SlotWake {
  /** The earliest of the slots, this far ahead. */
  readonly inMs: number;
  /** Everything that waits (a rotation that waits is not begun: rotate.ts). */
  readonly why: readonly SlotFor[];
}

/** `why` waits for a slot `inMs` ahead. The one place slots meet: the earliest wins, and all that waits is kept. */
export function waitForSlot(progress: Progress, why: SlotFor, inMs: number): Progress {
  const { wake } = progress;
  return { ...progress, wake: { inMs: wake ? Math.min(wake.inMs, inMs) : inMs, why: [...(wake?.why ?? []), why] } };
}

/** Whether `why` waits for a slot (waitForSlot). */
export function waitsForSlot(progress: Pick<Progress, 'wake'>, why: SlotFor): boolean {
  return progress.wake?.why.includes(why) === true;
}

export type RevokedToken = NonNullable<NonNullable<UserGroupStatus['rotation']>['lastRevoked']>;

export interface PromptProgress {
  /** status.podPrompts as the step leaves it. */
  readonly status: UserGroupStatus['podPrompts'];
  /** Why a Pod was not prompted (a retry with backoff; Ready stays True: the token itself is stored). */
  readonly failure?: 'prompt-refused';
}

export interface RestartProgress {
  /** status.rolloutRestarts as the step leaves it. */
  readonly status: UserGroupStatus['rolloutRestarts'];
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

/**
 * When to come back after a converged reconcile: the periodic resync, the scheduled rotation of the token now
 * stored (unless a rotation already waits for its slot: a due schedule would bring the key back at once, again and
 * again), and the earliest slot the caps and budgets keep for this key.
 */
export function wakeAfterSync(input: {
  readonly resyncAt: number | undefined;
  readonly schedule: ScheduledRotation | undefined;
  readonly slot: SlotWake | undefined;
}): Wake | undefined {
  const rotationWaits = waitsForSlot({ wake: input.slot }, 'rotation') || waitsForSlot({ wake: input.slot }, 'follow');
  const dueAt = [input.resyncAt, rotationWaits ? undefined : input.schedule?.dueAt].filter((t): t is number => t !== undefined);
  const slotInMs = input.slot ? [input.slot.inMs] : [];
  return dueAt.length === 0 && slotInMs.length === 0 ? undefined : { dueAt, slotInMs };
}
