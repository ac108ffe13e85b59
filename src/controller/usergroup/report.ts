// Step 10, report: the one status write of a reconcile, and the Event that goes with it.
import { findReadyCondition, type UserGroupStatus } from '../../api/usergroup.js';
import { dropUndefined } from '../../platform/json-value.js';
import { nextReadyCondition, Reason } from '../policies/conditions.js';
import { handledSyncRequest, nextResyncAt } from '../policies/sync.js';
import { sameCanonicalJson } from '../hash.js';
import type { ReconcileResult } from '../reconcile-contract.js';
import {
  DONE,
  failed,
  iso,
  issuedAtNow,
  type Outcome,
  type Progress,
  type ReconcileContext,
  type StatusReport,
  waitsForSlot,
  wakeAfterSync,
} from '../usergroup-step.js';
import { Messages } from '../usergroup-messages.js';
import { tokenSchedule, type Plan } from './plan.js';

/**
 * The one status write of a reconcile, from its outcome: only when the status would differ from what the
 * reconcile began from (no write, no watch event, no loop). The outcome's Event follows it.
 */
export async function report(ctx: ReconcileContext, outcome: StatusReport | undefined): Promise<void> {
  if (!outcome) return;
  const { previous } = ctx;
  const generation = ctx.ug.metadata.generation;
  const ready = nextReadyCondition(findReadyCondition(previous), outcome.status, outcome.reason, outcome.message, generation, iso(ctx.ports.clock.now()));
  const clear = (Object.keys(outcome.fields) as (keyof UserGroupStatus)[]).filter((k) => outcome.fields[k] === undefined);
  const status = dropUndefined<UserGroupStatus>({
    ...previous,
    ...outcome.fields,
    observedGeneration: generation,
    conditions: [...(previous.conditions ?? []).filter((c) => c.type !== 'Ready'), ready],
  });
  if (!sameCanonicalJson(status, previous)) {
    ctx.signal?.throwIfAborted();
    await ctx.ports.status.patch(ctx.ug, status, clear);
  }
  if (outcome.event) ctx.ports.events.emit(ctx.ug, outcome.event);
}

/** A converged reconcile: Ready=True Synced with what the service said, and when to come back. */
export function synced(ctx: ReconcileContext, plan: Plan, progress: Progress): Outcome {
  const { previous } = ctx;
  const { group } = progress;
  const lastSyncTime = group ? iso(plan.now) : previous.lastSyncTime;
  const issuedAt = issuedAtNow(plan, progress);
  const schedule = tokenSchedule(ctx.ug, plan.spec, ctx.settings, issuedAt, plan.connection.fleet);
  const rotation = dropUndefined({
    lastHandledRequest: progress.book.handled,
    lastRotationTime: progress.rotatedAt ?? previous.rotation?.lastRotationTime,
    // Known precisely once the token changes; a fallback is shown only where a schedule counts from it (no
    // status write for every UserGroup on upgrade).
    tokenIssuedTime: progress.stored?.changed === true || schedule || previous.rotation?.tokenIssuedTime ? issuedAt : undefined,
    nextRotationTime: schedule && iso(schedule.dueAt),
    lastRevoked: progress.revoked ?? previous.rotation?.lastRevoked,
    following: progress.following,
  });
  const fields: UserGroupStatus = {
    teamId: group ? group.teamId : previous.teamId,
    providedId: group ? group.providedId : previous.providedId,
    environmentTag: group ? group.environmentTag : previous.environmentTag,
    tokenSecretName: plan.spec.tokenSecret.name,
    lastSyncTime,
    syncedHash: group ? plan.hash : previous.syncedHash,
    lastHandledSyncRequest: handledSyncRequest(plan.syncRequest, group !== undefined, previous.lastHandledSyncRequest),
    ...(Object.keys(rotation).length > 0 ? { rotation } : {}),
    ...(progress.adopted ? { adoption: progress.adopted } : {}),
    rolloutRestarts: progress.restarts?.status,
    podPrompts: progress.prompts?.status,
  };
  const wake = wakeAfterSync({ resyncAt: nextResyncAt(lastSyncTime, ctx.ug.metadata.uid, ctx.settings.resyncPeriodMs), schedule, slot: progress.wake });
  const failure = progress.restarts?.failure ?? progress.prompts?.failure;
  const result: ReconcileResult = failure ? failed(failure) : wake ? { kind: 'done', wake } : DONE;
  // A follower still waiting for the primary's rotation says so in Ready's message: the token is current, but not new.
  const following = plan.rotation.kind === 'follow' && waitsForSlot(progress, 'follow') ? plan.rotation : undefined;
  const message = following ? Messages.syncedFollowing(plan.spec.tokenSecret.name, following) : Messages.synced(plan.spec.tokenSecret.name);
  return { ends: true, report: { status: 'True', reason: Reason.Synced, message, fields }, result };
}
