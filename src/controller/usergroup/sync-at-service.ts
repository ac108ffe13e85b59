// Step 5, sync at the service: the PUT the plan calls for (policies/sync.ts decides).
import type { ReconcileContext } from './context.js';
import { next, type Step } from './outcome.js';
import { deferred, serviceFailed } from './call-failure.js';
import { putPlanned, type Plan } from './plan.js';
import type { Progress } from './progress.js';

/**
 * PUT when the plan says so, or when a rotation may have happened before a crash (recover, settle): the service
 * has no read, so a PUT is also how the current token comes back.
 */
export async function syncAtService(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { sync, connection } = plan;
  if (!putPlanned(sync, plan.rotation)) return next(progress);
  const result = await ctx.calls.upsert(connection, plan.request);
  if ('deferred' in result) return deferred(result.deferred, 'sync', connection);
  if (!result.ok) return serviceFailed(ctx, 'sync', result.failure, connection);
  const { group } = result;
  ctx.log.info({ why: sync.kind === 'upsert' ? sync.why : 'rotation-recovery', created: group.created }, 'user group synced');
  return next({ ...progress, group, token: group.token });
}
