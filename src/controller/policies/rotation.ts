// Rotation policy: whether this reconcile rotates the token (requested, scheduled, or one to recover or settle after
// a crash), when a token falls due, and which slot it waits for (pure; the steps are in usergroup/rotate.ts).
import { uidFraction } from '../hash.js';
import type { SecretInspection } from './token-secret.js';

export type RotationDecision =
  | { readonly kind: 'none' }
  /** The Secret already records this request as handled (written with the new token); only status lags. */
  | { readonly kind: 'record'; readonly value: string }
  /** Rotate: POST with the held token. `scheduled`: the token is older than spec.rotation.maxTokenAge. */
  | { readonly kind: 'rotate'; readonly value: string; readonly scheduled: boolean }
  /**
   * A rotation for this value may have reached the service before we crashed: a PUT
   * tells. A token that differs from the held one means it did; otherwise rotate.
   */
  | { readonly kind: 'recover'; readonly value: string; readonly scheduled: boolean }
  /**
   * A rotation begun before a crash whose reason is gone since (the annotation removed, the schedule taken out of
   * the spec): the POST may have reached the service, and then the Secret holds a dead token. A PUT tells; the
   * token it returns is stored and the pending mark cleared. Never a POST: nobody asks for this rotation any more.
   */
  | { readonly kind: 'settle'; readonly value: string; readonly scheduled: boolean }
  /**
   * A follower of a fleet (ClusterUserGroupService spec.fleet.role Follower) never rotates: the primary cluster of
   * the account does. It looks with a PUT (`look`) once the rotation was asked or fell due, then ever less often,
   * until the token has moved on (rotate.ts); `nextLookAt` is when it looks again.
   */
  | {
      readonly kind: 'follow';
      readonly value: string;
      readonly scheduled: boolean;
      readonly since: number;
      readonly look: boolean;
      readonly nextLookAt: number;
    };

/**
 * A requested rotation (the annotation's value) first; else the scheduled one, when due or already begun. Both go
 * through the same record-before-call protocol; only a requested value is remembered as handled.
 */
export function decideRotation(
  requested: string | undefined,
  secret: SecretInspection,
  statusHandled: string | undefined,
  scheduled?: { readonly value: string; readonly due: boolean },
): RotationDecision {
  const owned = secret.state === 'owned' ? secret : undefined;
  // A Secret kept from a deleted UserGroup of this namespace tells what it handled (a re-applied manifest carries the
  // same annotation); its pending mark is not taken over: the PUT shows whether the token moved on since.
  const handled = secret.state === 'owned' || secret.state === 'kept' ? secret.handled : undefined;
  // Either record is enough to call a value handled: rotating twice is the failure we must never cause.
  if (requested !== undefined && statusHandled !== requested) {
    if (handled === requested) return { kind: 'record', value: requested };
    if (owned?.pending === requested) return { kind: 'recover', value: requested, scheduled: false };
    return { kind: 'rotate', value: requested, scheduled: false };
  }
  if (scheduled && owned?.pending === scheduled.value) return { kind: 'recover', value: scheduled.value, scheduled: true };
  if (scheduled?.due) return { kind: 'rotate', value: scheduled.value, scheduled: true };
  const pending = owned?.pending;
  if (pending !== undefined && requested === undefined && pending !== statusHandled) {
    return { kind: 'settle', value: pending, scheduled: pending.startsWith(SCHEDULED_PREFIX) };
  }
  if (pending !== undefined && pending.startsWith(SCHEDULED_PREFIX) && !scheduled) return { kind: 'settle', value: pending, scheduled: true };
  return { kind: 'none' };
}

/** A follower's first look, this long after it saw a request or a rotation fell due: the primary's POST goes out meanwhile. */
export const FOLLOW_DELAY_MS = 5_000;
/** A follower looks again after a quarter of the time since then, within these. */
export const FOLLOW_MIN_INTERVAL_MS = 5_000;
export const FOLLOW_MAX_INTERVAL_MS = 300_000;

/**
 * On a follower, a rotation to do (or begun before the cluster became one) is a rotation to follow. `since`: when
 * this follower first saw the request (status.rotation.following), or when the scheduled rotation fell due;
 * `lastLookAt`: the last PUT (status lastSyncTime). Anything else is decided as on the primary.
 */
export function followInstead(
  decision: RotationDecision,
  input: { readonly since: number; readonly lastLookAt: number | undefined; readonly now: number },
): RotationDecision {
  if (decision.kind !== 'rotate' && decision.kind !== 'recover') return decision;
  const { since, lastLookAt, now } = input;
  // nextLookAt may be past (a look overdue): then this reconcile looks.
  const nextLookAt = nextFollowLook(since, lastLookAt);
  return { kind: 'follow', value: decision.value, scheduled: decision.scheduled, since, look: now >= nextLookAt, nextLookAt };
}

/**
 * When a follower looks (PUTs) for a rotation seen or due `since`: FOLLOW_DELAY_MS after it (the primary, which saw
 * it at about the same time, POSTs meanwhile), then a quarter of the time since it after each look (within the
 * interval bounds), so a prompt primary is seen within seconds and a slow or absent one costs few calls.
 */
export function nextFollowLook(since: number, lastLookAt: number | undefined): number {
  const first = since + FOLLOW_DELAY_MS;
  if (lastLookAt === undefined || lastLookAt < first) return first;
  const interval = Math.min(FOLLOW_MAX_INTERVAL_MS, Math.max(FOLLOW_MIN_INTERVAL_MS, (lastLookAt - since) / 4));
  return lastLookAt + interval;
}

/** Pending marks of scheduled rotations begin with this; requested ones are the annotation's value. */
const SCHEDULED_PREFIX = 'scheduled:';

/** spec.rotation.maxTokenAge raised to the operator's floor (--min-token-age); undefined without scheduled rotation. */
export function effectiveMaxTokenAge(spec: { readonly maxTokenAgeMs: number | undefined }, floorMs: number): number | undefined {
  return spec.maxTokenAgeMs === undefined ? undefined : Math.max(spec.maxTokenAgeMs, floorMs);
}

/** When a token falls due for its scheduled rotation, and the value that names that rotation in the bookkeeping. */
export interface ScheduledRotation {
  readonly dueAt: number;
  readonly value: string;
}

/**
 * A token obtained at `issuedAt` falls due once older than maxAge less up to 10 % (fixed per uid), so tokens
 * obtained together (10,000 groups created at once) spread their rotations out, and none is older than maxAge
 * when it falls due. The value names the token it replaces, by when that token was obtained: it stays the same
 * until the token is replaced, so a rotation recorded as pending is recognised after a crash, and a finished
 * one has moved the issue time on (nothing repeats).
 */
export function scheduledRotation(issuedAt: string, maxAgeMs: number, uid: string): ScheduledRotation | undefined {
  const issued = Date.parse(issuedAt);
  if (Number.isNaN(issued)) return undefined;
  return { dueAt: issued + maxAgeMs - Math.floor(maxAgeMs * 0.1 * uidFraction(`${uid}/rotation`)), value: `${SCHEDULED_PREFIX}${issuedAt}` };
}

/**
 * The schedule of a fleet, which every cluster of the account works out alike from the spec alone: the token falls
 * due at the first of the id's rotation times after it was obtained. Those times are maxAge apart, offset by a
 * fraction of maxAge fixed per userGroupId (the account's groups spread out; every cluster agrees). The value names
 * that time, so a follower knows which rotation it waits for, and when to look.
 */
export function fleetScheduledRotation(issuedAt: string, maxAgeMs: number, userGroupId: string): ScheduledRotation | undefined {
  const issued = Date.parse(issuedAt);
  if (Number.isNaN(issued)) return undefined;
  const offset = Math.floor(maxAgeMs * uidFraction(`${userGroupId}/fleet-rotation`));
  const dueAt = offset + (Math.floor((issued - offset) / maxAgeMs) + 1) * maxAgeMs;
  return { dueAt, value: `${SCHEDULED_PREFIX}${new Date(dueAt).toISOString()}` };
}

/**
 * Which slot a rotation needs before its intent is written: a due scheduled rotation one of the global cap
 * (--scheduled-rotations-per-minute), so tokens falling due together trickle out; a requested one one of its
 * namespace's rotation-request budget (controller/request-budget.ts), so a tenant writing the annotation in a loop spends its
 * own budget, not the account's rate every tenant shares. Work already begun (recover, settle) never waits, nor a
 * request that an adoption's rotation has satisfied (usergroup/rotate.ts marks it handled without a call).
 */
export type RotationGate = 'none' | 'scheduled-cap' | 'request-budget';

export function rotationGate(rotation: RotationDecision, adoptionRotated: boolean): RotationGate {
  if (rotation.kind !== 'rotate' || adoptionRotated) return 'none';
  return rotation.scheduled ? 'scheduled-cap' : 'request-budget';
}
