// What a rotation request is: whether one may be made, its annotation value, and how the status tells its outcome.
import { ROTATE_ANNOTATION } from '../../api/constants.js';
import type { UserGroup } from '../../api/usergroup.js';
import { checkRequestable, judgeRequest, unseenValue } from './request-outcome.js';
import type { Judged, RequestKind, RequestObservation } from './request-wait.js';

/** Whether a rotation may be requested at all; checked on the object the annotation is then written to. */
export function checkRotatable(ug: UserGroup): { ok: true } | { ok: false; message: string } {
  return checkRequestable(ug, 'rotate its token');
}

/** A rotation request value the object has not seen (set or handled): the request time, nudged if taken. */
export function newRequestValue(nowMs: number, ug: UserGroup): string {
  return unseenValue(nowMs, [ug.metadata.annotations[ROTATE_ANNOTATION], ug.status.rotation?.lastHandledRequest]);
}

/** What one observation of the UserGroup, after the request, tells about the rotation. */
export type RotationProgress = Judged<{ readonly kind: 'rotated'; readonly at: string }>;

/** One observation of the UserGroup after the request (see RequestObservation). */
export type RotationObservation = RequestObservation;

/**
 * Whether the rotation requested with `requested` is done, has failed, or is still
 * worth waiting for. `requestedAtMs` is when it was requested and `nowMs` the time of
 * this observation: the time printed on success.
 */
export function judgeRotation(requested: string, requestedAtMs: number, nowMs: number, observation: RotationObservation): RotationProgress {
  return judgeRequest(requested, observation, {
    annotation: ROTATE_ANNOTATION,
    noun: 'rotation',
    handled: (ug) => ug.status.rotation?.lastHandledRequest,
    done: (ug) => ({ kind: 'rotated', at: rotationTime(ug, requestedAtMs, nowMs) }),
    suspended: 'spec.suspend was set to true: the operator will not rotate the token until it is false',
  });
}

/** `kubectl usergroup rotate`: the rotation request annotation, read as the exactly-once rotation records it. */
export const ROTATION_REQUEST: RequestKind<{ readonly kind: 'rotated'; readonly at: string }> = {
  annotation: ROTATE_ANNOTATION,
  noun: 'rotation',
  awaited: 'to rotate its token',
  onceFixed: '(the token is rotated once that is fixed)',
  check: checkRotatable,
  newValue: newRequestValue,
  judge: judgeRotation,
};

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
