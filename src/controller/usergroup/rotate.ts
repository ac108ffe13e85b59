// Step 7, rotate: the exactly-once rotation protocol (intent recorded, POST, token stored) (policies/rotation.ts decides).
import type { RotationDecision } from '../policies/rotation.js';
import type { ReconcileContext } from './context.js';
import { iso } from './context.js';
import { isDeferral } from './service-calls.js';
import { Events, type Rotation } from './event-messages.js';
import { end, next, type Step } from './outcome.js';
import { deferred, rotationFailed, serviceFailed } from './call-failure.js';
import type { Plan } from './plan.js';
import { waitsForSlot, type Progress } from './progress.js';
import { writeTokenSecret } from './write-secret.js';

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
        return next({ ...progress, book: { handled: handledAfter(rotation, progress), pending: undefined }, rotatedAt: iso(plan.now) });
      }
      return rotate(ctx, plan, progress, rotation);
    case 'rotate':
      // An adoption rotation made the token newer than any rotation request: that request is satisfied.
      if (progress.adopted?.tokenRotated) return next({ ...progress, book: { ...progress.book, handled: handledAfter(rotation, progress) } });
      // No slot yet (rotation-slot.ts): it waits, nothing is written for it, and the key comes back at the slot.
      if (waitsForSlot(progress, 'rotation')) return next(progress);
      return rotate(ctx, plan, progress, rotation);
  }
}

/** Records the intent (unless already recorded), POSTs with the held token, and hands on the new one. */
async function rotate(
  ctx: ReconcileContext,
  plan: Plan,
  progress: Progress,
  rotation: Extract<RotationDecision, { kind: 'rotate' | 'recover' }>,
): Promise<Step<Progress>> {
  const { connection } = plan;
  const token = progress.token;
  if (!token) throw new Error('no trusted token to rotate');
  // A schedule counted from a fallback (no issue time on the Secret yet) records it with the intent: after a
  // crash the same value is found pending.
  const issuedAt = rotation.scheduled ? plan.issuedAt : plan.owned?.issuedAt;
  const intent = await writeTokenSecret(ctx, plan, { token, handled: progress.book.handled, pending: rotation.value, issuedAt }, progress.secret);
  if (!intent.ok) return intent;
  ctx.calls.intentRecorded();
  // A requested rotation's slot (rotation-slot.ts) is used up: from here on it is work begun (recover), never asked again.
  if (rotation.kind === 'rotate' && !rotation.scheduled) ctx.ports.caps.requestSpent('rotation', ctx.ug.metadata.namespace, ctx.key);
  let after: Progress = { ...progress, secret: intent.value };

  const answer = await ctx.calls.rotate(connection, token);
  if (isDeferral(answer)) return end(deferred(answer, 'rotate', connection));
  if (answer.ok) {
    after = { ...after, token: answer.group.token, rotatedAt: iso(ctx.ports.clock.now()) };
    rotated(ctx, rotation, 'now');
    ctx.log.info({ request: rotation.value, scheduled: rotation.scheduled }, 'token rotated');
  } else if (answer.failure.kind === 'rejected') {
    // The held token is not current (rotated elsewhere, or by us just before a crash). A PUT returns
    // the current one; store it and call the request handled, so it is never rotated twice.
    const current = await ctx.calls.upsert(connection, plan.request);
    if (isDeferral(current)) return end(deferred(current, 'sync', connection));
    if (!current.ok) return end(serviceFailed(ctx, 'sync', current.failure, connection));
    // Still the same token: the service refused the rotation itself. Not handled; retry it.
    if (current.group.token.equals(token)) return end(rotationFailed(ctx, triggerOf(rotation), answer.failure, connection));
    after = { ...after, group: current.group, token: current.group.token };
    ctx.ports.events.emit(ctx.ug, Events.rotationRecovered(rotation, answer.failure.message));
    ctx.log.warn({ request: rotation.value }, 'rotation refused; recovered the current token');
  } else {
    return end(rotationFailed(ctx, triggerOf(rotation), answer.failure, connection));
  }
  return next({ ...after, book: { handled: handledAfter(rotation, progress), pending: undefined } });
}

/** The token was rotated: counted and told, the same way whichever path found it out. */
function rotated(ctx: ReconcileContext, rotation: Rotation, how: Parameters<typeof Events.tokenRotated>[1]): void {
  ctx.ports.metrics.tokenRotated(triggerOf(rotation));
  ctx.ports.events.emit(ctx.ug, Events.tokenRotated(rotation, how));
}

function triggerOf(rotation: Rotation): 'requested' | 'scheduled' {
  return rotation.scheduled ? 'scheduled' : 'requested';
}

/** Only a requested value is remembered as handled; a scheduled rotation is done once the token's issue time moves. */
function handledAfter(rotation: Rotation, progress: Progress): string | undefined {
  return rotation.scheduled ? progress.book.handled : rotation.value;
}
