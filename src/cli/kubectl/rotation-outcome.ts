import { ROTATE_ANNOTATION } from '../../api/constants.js';
import { findReadyCondition, type UserGroup } from '../../api/usergroup.js';

/**
 * Ready=False reasons the controller retries on its own (docs/operations.md: retries, backoff, Retry-After):
 * a rotation blocked by one of them still happens once the service recovers, so
 * `rotate` keeps waiting. Every other failure needs a person, so waiting is pointless.
 */
const TRANSIENT_REASONS: ReadonlySet<string> = new Set(['ServiceUnavailable', 'RateLimited']);

/**
 * Ready=False reasons for which the operator makes no call for the group at all (the tenant rules, a claim held
 * elsewhere, a refused adoption, a duplicate): until a person changes that, a rotation request would only wait.
 */
const REFUSED_REASONS: ReadonlySet<string> = new Set([
  'NamespaceNotAllowed',
  'UserGroupIdNotAllowed',
  'UserGroupIdClaimed',
  'AdoptionRefused',
  'DuplicateUserGroupId',
]);

/** Whether a rotation may be requested at all; checked on the object the annotation is then written to. */
export function checkRotatable(ug: UserGroup): { ok: true } | { ok: false; message: string } {
  const ref = `usergroup/${ug.metadata.name}`;
  if (ug.metadata.deletionTimestamp) return { ok: false, message: `${ref} is being deleted` };
  if (!ug.spec.ok) return { ok: false, message: `${ref} has a spec the operator cannot use (${ug.spec.error}); fix it first` };
  if (ug.spec.value.suspend) {
    return {
      ok: false,
      message: `${ref} is suspended (spec.suspend: true): the operator makes no call to the service for it and would not rotate its token; set spec.suspend to false first`,
    };
  }
  const ready = findReadyCondition(ug.status);
  if (ready?.status === 'False' && REFUSED_REASONS.has(ready.reason) && (ready.observedGeneration ?? ug.status.observedGeneration) === ug.metadata.generation) {
    return { ok: false, message: `${ref} gets no service call: ${ready.reason}: ${ready.message}` };
  }
  return { ok: true };
}

/**
 * A rotation request value the object has not seen: the request time (RFC 3339 with
 * milliseconds, so it tells people when), nudged forward should it equal the value
 * already set or already handled, because an equal value would rotate nothing.
 */
export function newRequestValue(nowMs: number, ug: UserGroup): string {
  const taken = new Set([ug.metadata.annotations[ROTATE_ANNOTATION], ug.status.rotation?.lastHandledRequest]);
  let at = nowMs;
  while (taken.has(new Date(at).toISOString())) at++;
  return new Date(at).toISOString();
}

/** What one observation of the UserGroup, after the request, tells about the rotation. */
export type RotationProgress =
  | { readonly kind: 'rotated'; readonly at: string }
  | { readonly kind: 'failed'; readonly reason: string; readonly message: string }
  | {
      readonly kind: 'waiting';
      /** The Ready condition when it is False for the current spec; undefined when there is nothing to report. */
      readonly blocker: { readonly reason: string; readonly message: string } | undefined;
      /** Why waiting on: the controller retries this reason itself, or the failure predates the request. */
      readonly because: 'in-progress' | 'retrying' | 'predates-request';
    };

export interface RotationObservation {
  /** undefined: the UserGroup was deleted. */
  readonly ug: UserGroup | undefined;
  /**
   * True when this object version was written after the rotation request (a watch
   * event after the annotating PATCH). A failure in an older version may describe a
   * problem fixed since, and the controller does not rewrite an unchanged status, so
   * only a fresh failure proves the request itself failed.
   */
  readonly fresh: boolean;
}

/**
 * Whether the rotation requested with `requested` is done, has failed, or is still
 * worth waiting for. `requestedAtMs` is when it was requested and `nowMs` the time of
 * this observation: the time printed on success.
 */
export function judgeRotation(requested: string, requestedAtMs: number, nowMs: number, observation: RotationObservation): RotationProgress {
  const { ug, fresh } = observation;
  if (!ug) return { kind: 'failed', reason: 'Deleted', message: 'the UserGroup was deleted while waiting for the rotation' };
  if (ug.status.rotation?.lastHandledRequest === requested) return { kind: 'rotated', at: rotationTime(ug, requestedAtMs, nowMs) };

  const current = ug.metadata.annotations[ROTATE_ANNOTATION];
  if (current !== requested) {
    return {
      kind: 'failed',
      reason: 'Superseded',
      message:
        current === undefined
          ? `the ${ROTATE_ANNOTATION} annotation was removed before the operator handled "${requested}"`
          : `the ${ROTATE_ANNOTATION} annotation was changed to "${current}" before the operator handled "${requested}"; that request replaces this one`,
    };
  }
  if (ug.metadata.deletionTimestamp) return { kind: 'failed', reason: 'Deleting', message: 'the UserGroup is being deleted' };
  if (!ug.spec.ok) return { kind: 'failed', reason: 'InvalidSpec', message: ug.spec.error };
  // The spec is the user's word and needs no status to be believed.
  if (ug.spec.value.suspend) {
    return { kind: 'failed', reason: 'Suspended', message: 'spec.suspend was set to true: the operator will not rotate the token until it is false' };
  }

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

/**
 * lastRotationTime when it is from this request. It has one-second resolution, and it
 * is not moved when the operator finds the token already rotated elsewhere and only
 * stores it (the request is handled all the same): then the time it was seen handled.
 */
function rotationTime(ug: UserGroup, requestedAtMs: number, nowMs: number): string {
  const recorded = ug.status.rotation?.lastRotationTime;
  const at = recorded === undefined ? Number.NaN : Date.parse(recorded);
  if (recorded !== undefined && !Number.isNaN(at) && at >= Math.floor(requestedAtMs / 1_000) * 1_000) return recorded;
  return new Date(Math.floor(nowMs / 1_000) * 1_000).toISOString().replace('.000Z', 'Z');
}
