// Step 4b, finalizer first: the UserGroup's rotate-on-delete finalizer before the first service call (policies/deletion.ts decides).
import { hasRotateFinalizer } from '../../api/meta.js';
import { finalizerBeforeCall } from '../policies/deletion.js';
import { IMMEDIATE_RETRY_MS } from '../retry-policy.js';
import type { ReconcileContext } from './context.js';
import { DONE, failed, next, type Step } from './outcome.js';
import { putPlanned, type Plan } from './plan.js';
import type { Progress } from './progress.js';

/**
 * With spec.deletionPolicy Rotate, the finalizer that makes a deletion rotate the token is written before any call
 * that may hand a token out, as kube-rs's finalizer() does: a deletion between the first PUT and the token's Secret
 * (or while the controller is down in between) still holds the UserGroup until the token is rotated. Known from the
 * cache: no request once it is there, none for Retain.
 *
 * Added, the reconcile ends and comes back at once instead of going on: the next one starts from the cached object
 * that shows the finalizer (the port puts its answer there), so its status write and finalizer decisions are made
 * on that object, not on one older than our own write. The finalizer's watch event then brings no reconcile of its
 * own (the cache already shows it). The cost is one more pass, from the caches only, once in the UserGroup's life.
 */
export async function finalizerFirst(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { ug, settings } = ctx;
  const add = finalizerBeforeCall({
    policy: { policy: plan.spec.deletionPolicy, suspend: plan.spec.suspend },
    userGroupFinalized: hasRotateFinalizer(ug.metadata),
    callsService: callsService(plan),
    disabled: !settings.rotateOnDelete,
  });
  if (!add) return next(progress);
  ctx.signal?.throwIfAborted();
  // Met a newer version: decided again from it.
  if (!(await ctx.ports.finalizers.set({ userGroup: ug }, true))) return { ends: true, report: undefined, result: failed('lost-race') };
  ctx.log.debug('rotate-on-delete finalizer added before the first service call');
  // Not in the cache yet (it is behind the apiserver, so the port leaves it alone): the finalizer's own watch event
  // brings the next reconcile (a finalizer change is one, triggers.ts); coming back before it would write again.
  const shown = hasRotateFinalizer((ctx.ports.userGroups.get(ctx.key) ?? ug).metadata);
  return { ends: true, report: undefined, result: shown ? { kind: 'wait', afterMs: IMMEDIATE_RETRY_MS } : DONE };
}

/** The plan's steps call the service: a PUT (sync, on request, a rotation's read) or a rotation's POST. */
function callsService(plan: Plan): boolean {
  const { rotation } = plan;
  return putPlanned(plan.sync, rotation) || plan.syncRequest.kind === 'put' || rotation.kind === 'rotate' || rotation.kind === 'recover';
}
