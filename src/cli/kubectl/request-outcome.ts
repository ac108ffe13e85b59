// Judges a request annotation's outcome from the UserGroup, alike for `rotate` and `sync` (pure).
import { findReadyCondition, type UserGroup } from '../../api/usergroup.js';
import type { Judged, RequestObservation } from './request-wait.js';

/**
 * How a request annotation's outcome is read from the UserGroup, the same for a rotation and a sync: pure
 * functions of one observation, so `rotate` and `sync` judge alike and are tested without a cluster.
 */

/**
 * Ready=False reasons the controller retries on its own (docs/operations.md: retries, backoff, Retry-After):
 * a request blocked by one of them is still handled once the service recovers, so the command keeps waiting.
 * Every other failure needs a person, so waiting is pointless.
 */
const TRANSIENT_REASONS: ReadonlySet<string> = new Set(['ServiceUnavailable', 'RateLimited']);

/**
 * Ready=False reasons for which the operator makes no call for the group at all (the tenant rules, a claim held
 * elsewhere, a refused adoption, a duplicate): until a person changes that, a request would only wait.
 */
const REFUSED_REASONS: ReadonlySet<string> = new Set([
  'NamespaceNotAllowed',
  'UserGroupIdNotAllowed',
  'UserGroupIdClaimed',
  'AdoptionRefused',
  'DuplicateUserGroupId',
]);

/** Whether a request may be made at all; `suspended` says what a suspended group would not do. */
export function checkRequestable(ug: UserGroup, suspended: string): { ok: true } | { ok: false; message: string } {
  const ref = `usergroup/${ug.metadata.name}`;
  if (ug.metadata.deletionTimestamp) return { ok: false, message: `${ref} is being deleted` };
  if (!ug.spec.ok) return { ok: false, message: `${ref} has a spec the operator cannot use (${ug.spec.error}); fix it first` };
  if (ug.spec.value.suspend) {
    return {
      ok: false,
      message: `${ref} is suspended (spec.suspend: true): the operator makes no call to the service for it and would not ${suspended}; set spec.suspend to false first`,
    };
  }
  const ready = findReadyCondition(ug.status);
  if (ready?.status === 'False' && REFUSED_REASONS.has(ready.reason) && (ready.observedGeneration ?? ug.status.observedGeneration) === ug.metadata.generation) {
    return { ok: false, message: `${ref} gets no service call: ${ready.reason}: ${ready.message}` };
  }
  return { ok: true };
}

/**
 * A request value the object has not seen: the request time (RFC 3339 with milliseconds, so it tells people
 * when), nudged forward should it equal a value already set or already handled, because an equal value asks
 * for nothing.
 */
export function unseenValue(nowMs: number, taken: readonly (string | undefined)[]): string {
  const seen = new Set(taken);
  let at = nowMs;
  while (seen.has(new Date(at).toISOString())) at++;
  return new Date(at).toISOString();
}

export interface RequestReading<Done> {
  readonly annotation: string;
  /** "rotation", "sync": in messages. */
  readonly noun: string;
  /** The value the status records as handled. */
  handled(ug: UserGroup): string | undefined;
  /** The outcome once handled. */
  done(ug: UserGroup): Done;
  /** Why a group suspended since the request will not see it handled. */
  readonly suspended: string;
}

/** Whether the request `requested` is handled, has failed, or is still worth waiting for. */
export function judgeRequest<Done>(requested: string, observation: RequestObservation, reading: RequestReading<Done>): Judged<Done> {
  const { ug, fresh } = observation;
  const { annotation } = reading;
  if (!ug) return { kind: 'failed', reason: 'Deleted', message: `the UserGroup was deleted while waiting for the ${reading.noun}` };
  if (reading.handled(ug) === requested) return reading.done(ug);

  const current = ug.metadata.annotations[annotation];
  if (current !== requested) {
    return {
      kind: 'failed',
      reason: 'Superseded',
      message:
        current === undefined
          ? `the ${annotation} annotation was removed before the operator handled "${requested}"`
          : `the ${annotation} annotation was changed to "${current}" before the operator handled "${requested}"; that request replaces this one`,
    };
  }
  if (ug.metadata.deletionTimestamp) return { kind: 'failed', reason: 'Deleting', message: 'the UserGroup is being deleted' };
  if (!ug.spec.ok) return { kind: 'failed', reason: 'InvalidSpec', message: ug.spec.error };
  // The spec is the user's word and needs no status to be believed.
  if (ug.spec.value.suspend) return { kind: 'failed', reason: 'Suspended', message: reading.suspended };

  const ready = findReadyCondition(ug.status);
  const observed = ready?.observedGeneration ?? ug.status.observedGeneration;
  // A status about an older spec says nothing about what the controller does now.
  if (ready?.status !== 'False' || observed !== ug.metadata.generation) return { kind: 'waiting', blocker: undefined, because: 'in-progress' };
  const blocker = { reason: ready.reason, message: ready.message };
  if (TRANSIENT_REASONS.has(ready.reason)) return { kind: 'waiting', blocker, because: 'retrying' };
  // A refusal stays until a person acts, and the controller does not rewrite an unchanged status to say so again.
  if (!fresh && !REFUSED_REASONS.has(ready.reason)) return { kind: 'waiting', blocker, because: 'predates-request' };
  return { kind: 'failed', ...blocker };
}
