// Steps 6b and 7, rotate: a slot of the cap or the namespace budget, then the exactly-once rotation protocol (policies/rotation.ts decides).
import { nextFollowLook, type RotationDecision, rotationGate } from '../policies/rotation.js';
import {
  deferred,
  iso,
  next,
  type Progress,
  type ReconcileContext,
  type RevokedToken,
  rotationFailed,
  serviceFailed,
  type Step,
  waitForSlot,
  waitsForSlot,
  writeTokenSecret,
} from '../usergroup-step.js';
import { Events, type Rotation } from '../usergroup-messages.js';
import type { Plan } from './plan.js';

// (policies/rotation.ts rotationGate says which).

/**
 * Takes the rotation's slot. Without one the rotation waits (rotateIfAsked leaves it alone), the rest of the reconcile
 * converges, and the key comes back at the slot kept for it (wakeAfterSync); an over-budget request is said once,
 * with a `RotationRequestWaiting` Event. No request and nothing due: nothing asked, no call, no write.
 */
export function takeRotationSlot(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { rotation } = plan;
  switch (rotationGate(rotation, progress.adopted?.tokenRotated === true)) {
    case 'none':
      return Promise.resolve(next(progress));
    case 'scheduled-cap': {
      const slot = ctx.ports.caps.take('scheduled-rotation', ctx.key);
      return Promise.resolve(next(slot.kind === 'wait' ? waitForSlot(progress, 'rotation', slot.inMs) : progress));
    }
    case 'request-budget': {
      // The slot stays the key's until rotate.ts has written the intent (then it is spent): an intent write that
      // fails (a Secret met on create, a refused write) comes back to the same slot instead of paying twice.
      const slot = ctx.ports.caps.take('rotation-request', ctx.key);
      if (slot.kind === 'now') return Promise.resolve(next({ ...progress, rotationSlot: slot }));
      if (slot.first && rotation.kind === 'rotate') {
        ctx.ports.events.emit(ctx.ug, Events.requestWaiting('rotation', rotation.value, slot.inMs, ctx.settings.requestBudgets.rotation));
      }
      return Promise.resolve(next(waitForSlot(progress, 'rotation', slot.inMs)));
    }
  }
}

/**
 * The exactly-once rotation protocol. The request is recorded as pending on the Secret before the POST, so a run
 * that dies after the service rotated finds it pending and checks with a PUT (the sync step) instead of rotating
 * a second time; a value recorded as handled is never rotated again.
 */
export async function rotateIfAsked(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { rotation } = plan;
  const held = plan.owned?.token;
  switch (rotation.kind) {
    case 'none':
      return next(progress);
    case 'record':
      return next({ ...progress, book: { ...progress.book, handled: rotation.value } });
    case 'settle': {
      // The PUT (sync step) returned the current token: a different one means the rotation had happened.
      const happened = held !== undefined && progress.token !== undefined && !progress.token.equals(held);
      if (happened) rotated(ctx, rotation, 'after-restart-unasked');
      ctx.log.info({ request: rotation.value, happened }, 'settled a rotation begun before a restart and no longer asked for');
      return next({
        ...progress,
        book: { handled: happened ? handledAfter(rotation, progress) : progress.book.handled, pending: undefined },
        ...(happened ? { rotatedAt: iso(plan.now) } : {}),
      });
    }
    case 'recover':
      if (held && progress.token && !progress.token.equals(held)) {
        // The rotation reached the service before we could store its result: the PUT returned the new token.
        rotated(ctx, rotation, 'after-restart');
        const revoked = revokedBy(rotation, undefined, iso(plan.now), 'ThisController');
        return next({ ...progress, book: { handled: handledAfter(rotation, progress), pending: undefined }, rotatedAt: iso(plan.now), revoked });
      }
      return rotate(ctx, plan, progress, rotation);
    case 'follow':
      return next(follow(ctx, plan, progress, rotation));
    case 'rotate':
      // An adoption rotation made the token newer than any rotation request: that request is satisfied.
      if (progress.adopted?.tokenRotated) return next({ ...progress, book: { ...progress.book, handled: handledAfter(rotation, progress) } });
      // No slot yet (takeRotationSlot): it waits, nothing is written for it, and the key comes back at the slot.
      if (waitsForSlot(progress, 'rotation')) return next(progress);
      return rotate(ctx, plan, progress, rotation);
  }
}

/**
 * Records the intent (unless already recorded), POSTs, and hands on the new token. A requested rotation must revoke
 * the token that is current at the service once it is asked for, which the held one may not be (rotated behind the
 * operator, or by another cluster on the account): it POSTs with a token read by a PUT after the request. A POST
 * refused then proves that someone else rotated after the request, so the request is done without a second
 * rotation (how a fleet that sees one request in every cluster rotates once).
 */
async function rotate(
  ctx: ReconcileContext,
  plan: Plan,
  progress: Progress,
  rotation: Extract<RotationDecision, { kind: 'rotate' | 'recover' }>,
): Promise<Step<Progress>> {
  const { connection } = plan;
  let before = progress;
  let readAt = iso(plan.now);
  // A PUT of this reconcile (the sync step's) was after the request already; otherwise one is made here.
  if (!rotation.scheduled && progress.group === undefined) {
    const current = await ctx.calls.upsert(connection, plan.request);
    // The rotation is what did not happen: reported and counted as a rotation that failed.
    if ('deferred' in current) return deferred(current.deferred, 'rotate-read', connection);
    if (!current.ok) return rotationFailed(ctx, triggerOf(rotation), current.failure, connection, 'rotate-read');
    before = { ...progress, group: current.group, token: current.group.token };
    readAt = iso(ctx.ports.clock.now());
  }
  const token = before.token;
  if (!token) throw new Error('no trusted token to rotate');
  // A schedule counted from a fallback (no issue time on the Secret yet) records it with the intent: after a
  // crash the same value is found pending.
  const issuedAt = rotation.scheduled ? plan.issuedAt : plan.owned?.issuedAt;
  const intent = await writeTokenSecret(ctx, plan, { token, handled: before.book.handled, pending: rotation.value, issuedAt }, before.secret);
  if (intent.ends) return intent;
  ctx.calls.intentRecorded();
  // A requested rotation's slot (takeRotationSlot) is used up: from here on it is work begun (recover), never asked again.
  if (rotation.kind === 'rotate' && !rotation.scheduled) progress.rotationSlot?.spend();
  let after: Progress = { ...before, secret: intent.value };

  const sentAt = iso(ctx.ports.clock.now());
  const answer = await ctx.calls.rotate(connection, token);
  if ('deferred' in answer) return deferred(answer.deferred, 'rotate', connection);
  if (answer.ok) {
    const at = iso(ctx.ports.clock.now());
    after = { ...after, token: answer.group.token, rotatedAt: at, revoked: revokedBy(rotation, sentAt, at, 'ThisController') };
    rotated(ctx, rotation, 'now');
    ctx.log.info({ request: rotation.value, scheduled: rotation.scheduled }, 'token rotated');
  } else if (answer.failure.kind === 'rejected') {
    // The token POSTed is not current any more. A PUT returns the current one: a different one means another
    // holder of the account's key rotated it since it was read (after the request, for a requested rotation).
    const current = await ctx.calls.upsert(connection, plan.request);
    if ('deferred' in current) return deferred(current.deferred, 'sync', connection);
    if (!current.ok) return serviceFailed(ctx, 'sync', current.failure, connection);
    // Still the same token: the service refused the rotation itself. Not handled; retry it.
    if (current.group.token.equals(token)) return rotationFailed(ctx, triggerOf(rotation), answer.failure, connection);
    const at = iso(ctx.ports.clock.now());
    after = { ...after, group: current.group, token: current.group.token, revoked: revokedBy(rotation, readAt, at, 'AnotherHolder') };
    ctx.ports.events.emit(ctx.ug, Events.rotatedElsewhere(rotation, readAt, at));
    ctx.log.info({ request: rotation.value }, 'the token was rotated elsewhere before this POST; stored the current token');
  } else {
    return rotationFailed(ctx, triggerOf(rotation), answer.failure, connection);
  }
  return next({ ...after, book: { handled: handledAfter(rotation, progress), pending: undefined } });
}

/**
 * A fleet's follower never POSTs: the primary rotates. A PUT of this reconcile (after the request, or after the
 * schedule's time) that returns another token than the one held shows the rotation done; the token is stored and
 * the request handled. No token held yet (this cluster's first sync): the one just fetched is current, nothing to
 * follow. Otherwise it looks again later (policies/rotation.ts nextFollowLook).
 */
function follow(ctx: ReconcileContext, plan: Plan, progress: Progress, rotation: Extract<RotationDecision, { kind: 'follow' }>): Progress {
  const held = plan.owned?.token;
  const current = progress.group ? progress.token : undefined;
  if (current && (!held || !current.equals(held))) {
    const at = iso(ctx.ports.clock.now());
    const book = { handled: handledAfter(rotation, progress), pending: undefined };
    if (!held) return { ...progress, book };
    ctx.ports.events.emit(ctx.ug, Events.followed(rotation, at));
    ctx.log.info({ request: rotation.value, scheduled: rotation.scheduled }, "followed the fleet primary's rotation; stored the current token");
    return { ...progress, book, rotatedAt: at, revoked: revokedBy(rotation, undefined, at, 'AnotherHolder') };
  }
  const nextLookAt = current ? nextFollowLook(rotation.since, plan.now) : rotation.nextLookAt;
  // Said each time it waits: the recorder counts repeats of one Event instead of writing new ones.
  if (held) ctx.ports.events.emit(ctx.ug, Events.awaitingPrimary(rotation));
  const following = rotation.scheduled ? undefined : { request: rotation.value, since: iso(rotation.since) };
  return { ...waitForSlot(progress, 'follow', Math.max(0, nextLookAt - plan.now)), ...(following ? { following } : {}) };
}

/**
 * What a requested rotation revoked, for the status: the token current at `currentAt` (when the accepted POST went
 * out; when the refused one's token was read), and by whom.
 */
function revokedBy(rotation: Rotation, currentAt: string | undefined, at: string, by: RevokedToken['by']): RevokedToken | undefined {
  return rotation.scheduled ? undefined : { request: rotation.value, ...(currentAt ? { currentAt } : {}), revokedAt: at, by };
}

/** The token was rotated: counted and told, the same way whichever path found it out. */
function rotated(ctx: ReconcileContext, rotation: Rotation, how: Parameters<typeof Events.tokenRotated>[1]): void {
  ctx.ports.metrics.count({ metric: 'token-rotated', trigger: triggerOf(rotation) });
  ctx.ports.events.emit(ctx.ug, Events.tokenRotated(rotation, how));
}

function triggerOf(rotation: Rotation): 'requested' | 'scheduled' {
  return rotation.scheduled ? 'scheduled' : 'requested';
}

/** Only a requested value is remembered as handled; a scheduled rotation is done once the token's issue time moves. */
function handledAfter(rotation: Rotation, progress: Progress): string | undefined {
  return rotation.scheduled ? progress.book.handled : rotation.value;
}
