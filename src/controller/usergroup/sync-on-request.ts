// Step 5b, sync on request: the PUT a usergroup.dev/sync-requested-at value asks for, when nothing else makes one.
import type { ReconcileContext } from './context.js';
import { Events } from './event-messages.js';
import { next, type Step } from './outcome.js';
import { deferred, serviceFailed } from './call-failure.js';
import type { Plan } from './plan.js';
import { waitForSlot, type Progress } from './progress.js';

/**
 * A sync request that nothing else answers (plan.syncRequest `put`): one PUT, once the namespace's budget gives it
 * a slot. Over the budget the request waits for the slot kept for it (a `SyncRequestWaiting` Event says so, once)
 * and the rest of the reconcile goes on without it. The token the PUT returns is stored by the store step, as
 * after any sync; report.ts records the value as handled.
 */
export async function syncOnRequest(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const request = plan.syncRequest;
  if (request.kind !== 'put' || progress.group !== undefined) return next(progress);
  const slot = ctx.ports.caps.take('sync-request', ctx.key);
  if (slot.kind === 'wait') {
    if (slot.first) ctx.ports.events.emit(ctx.ug, Events.requestWaiting('sync', request.value, slot.inMs, ctx.settings.requestBudgets.sync));
    return next(waitForSlot(progress, 'sync-request', slot.inMs));
  }
  const { connection } = plan;
  const result = await ctx.calls.upsert(connection, plan.request);
  // Deferred by the account's rate limit or a failing connection: the slot stays paid for this key.
  if ('deferred' in result) return deferred(result.deferred, 'sync', connection);
  slot.spend();
  if (!result.ok) return serviceFailed(ctx, 'sync', result.failure, connection);
  const { group } = result;
  ctx.log.info({ why: 'requested', request: request.value, created: group.created }, 'user group synced');
  return next({ ...progress, group, token: group.token });
}
