// What a sync request is: whether one may be made, its annotation value, and how the status tells it was handled.
import { SYNC_ANNOTATION } from '../../api/constants.js';
import { findReadyCondition, type UserGroup } from '../../api/usergroup.js';
import { checkRequestable, judgeRequest, unseenValue } from './request-outcome.js';
import type { Judged, RequestKind, RequestObservation } from './request-wait.js';

/** A sync request handled: what the status said when it recorded the value. */
export interface Synced {
  readonly kind: 'synced';
  readonly ready: string;
  readonly reason: string;
  readonly lastSyncTime: string | undefined;
}

/** Whether a sync may be requested at all; checked on the object the annotation is then written to. */
export function checkSyncable(ug: UserGroup): { ok: true } | { ok: false; message: string } {
  return checkRequestable(ug, 'sync it');
}

/** A sync request value the object has not seen (set or handled): the request time, nudged if taken. */
export function newSyncValue(nowMs: number, ug: UserGroup): string {
  return unseenValue(nowMs, [ug.metadata.annotations[SYNC_ANNOTATION], ug.status.lastHandledSyncRequest]);
}

/** Whether the sync requested with `requested` is done (status.lastHandledSyncRequest), has failed, or is worth waiting for. */
export function judgeSync(requested: string, observation: RequestObservation): Judged<Synced> {
  return judgeRequest(requested, observation, {
    annotation: SYNC_ANNOTATION,
    noun: 'sync',
    handled: (ug) => ug.status.lastHandledSyncRequest,
    done: (ug) => {
      const ready = findReadyCondition(ug.status);
      return { kind: 'synced', ready: ready?.status ?? 'Unknown', reason: ready?.reason ?? '-', lastSyncTime: ug.status.lastSyncTime };
    },
    suspended: 'spec.suspend was set to true: the operator will not sync the group until it is false',
  });
}

/** `kubectl usergroup sync`: the sync request annotation and status.lastHandledSyncRequest. */
export const SYNC_REQUEST: RequestKind<Synced> = {
  annotation: SYNC_ANNOTATION,
  noun: 'sync',
  awaited: 'to sync with the service',
  onceFixed: '(the group is synced once that is fixed)',
  check: checkSyncable,
  newValue: newSyncValue,
  judge: (requested, _at, _now, observation) => judgeSync(requested, observation),
};
