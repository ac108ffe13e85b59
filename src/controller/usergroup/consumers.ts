// Steps 8b and 9, the token's consumers, once per new token: prompt the consenting Pods' kubelets, restart spec.rolloutRestartTargets (policies/pod-prompt.ts, restart.ts decide).
import type { ApiError } from '../../kube/api-error.js';
import { oncePerToken } from '../policies/once-per-token.js';
import { podsToPrompt } from '../policies/pod-prompt.js';
import {
  iso,
  issuedAtNow,
  next,
  type Next,
  type Progress,
  type PromptProgress,
  type ReconcileContext,
  type RestartProgress,
  waitForSlot,
} from '../usergroup-step.js';
import { Events } from '../usergroup-messages.js';
import type { Plan } from './plan.js';
import type { RestartTarget } from '../../api/workload.js';
import { decideRestarts, describeTarget, workloadAction } from '../policies/restart.js';

/**
 * Right after the new token is stored: an annotation on each consenting Pod makes its kubelet sync the Pod, which
 * rewrites its Secret volumes at once (instead of at its periodic sync, up to a minute and a half later). Pods of
 * owners that did not label them are never read or written; the operator reads Pods as metadata only.
 */
export async function promptPods(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Next<Progress>> {
  const leave = (prompts: PromptProgress): Next<Progress> => next({ ...progress, prompts });
  if (!ctx.settings.podPrompts) return leave({ status: undefined });
  const issuedAt = issuedAtNow(plan, progress);
  const before = ctx.previous.podPrompts;
  const decision = oncePerToken({ wanted: true, doneFor: before?.tokenIssuedTime, foundIssuedAt: plan.owned ? plan.issuedAt : undefined, issuedAt });
  switch (decision.kind) {
    case 'none':
      return leave({ status: before });
    case 'record':
      return leave({ status: { ...before, tokenIssuedTime: issuedAt } });
    case 'do':
      break;
  }
  const { namespace, name } = ctx.ug.metadata;
  const listed = await ctx.ports.pods.consenting(namespace, name);
  if (listed.kind === 'refused') return leave({ status: before, failure: promptFailed(ctx, listed.error) });
  let prompted = 0;
  let gone = 0;
  for (const pod of podsToPrompt(listed.pods, issuedAt)) {
    ctx.signal?.throwIfAborted();
    const slot = ctx.ports.caps.take('prompt', ctx.key);
    // The cap keeps a slot for the key: come back then (the Pods prompted already carry this token and are skipped).
    if (slot.kind === 'wait') return next(waitForSlot({ ...progress, prompts: { status: before } }, 'prompt', slot.inMs));
    const result = await listed.prompt(pod.name, issuedAt);
    if (result.kind === 'refused') return leave({ status: before, failure: promptFailed(ctx, result.error) });
    if (result.kind === 'prompted') prompted++;
    else gone++;
  }
  // Every consenting Pod listed now carries this token's mark (some from a pass before a cap's slot).
  const pods = listed.pods.length - gone;
  if (prompted === 0) {
    const last = before?.lastPromptTime;
    return leave({ status: { tokenIssuedTime: issuedAt, ...(last !== undefined ? { lastPromptTime: last } : {}), ...(pods > 0 ? { pods } : {}) } });
  }
  ctx.ports.events.emit(ctx.ug, Events.podsPrompted(prompted, issuedAt));
  ctx.log.info({ pods: prompted }, "prompted the consenting Pods' kubelets for the new token");
  return leave({ status: { tokenIssuedTime: issuedAt, lastPromptTime: iso(ctx.ports.clock.now()), pods } });
}

/** The apiserver refused to list or prompt a Pod (RBAC, the admission policy): a Warning, and a retry with backoff. */
function promptFailed(ctx: ReconcileContext, error: ApiError): 'prompt-refused' {
  ctx.ports.events.emit(ctx.ug, Events.podPromptFailed(error.message));
  ctx.log.warn({ err: error.message }, 'prompting the consenting Pods failed');
  return 'prompt-refused';
}

/**
 * After the new token is stored (pods restarted before would start with the old one): restart the workloads
 * listed in spec.rolloutRestartTargets whose owners allow it, once per token (policies/restart.ts decides).
 */
export async function restartConsumers(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Next<Progress>> {
  const { spec } = plan;
  const issuedAt = issuedAtNow(plan, progress);
  const before = ctx.previous.rolloutRestarts;
  const decision = decideRestarts({
    targets: spec.rolloutRestartTargets,
    restartedFor: before?.tokenIssuedTime,
    foundIssuedAt: plan.owned ? plan.issuedAt : undefined,
    issuedAt,
  });
  const recorded = { ...before, tokenIssuedTime: issuedAt };
  const leave = (restarts: RestartProgress): Next<Progress> => next({ ...progress, restarts });
  switch (decision.kind) {
    case 'none':
      // Dropped with the last target: listing targets again later starts from the token of that day.
      return leave({ status: spec.rolloutRestartTargets.length === 0 ? undefined : before });
    case 'record':
      return leave({ status: recorded });
    case 'do':
      break;
  }
  if (!ctx.settings.workloadRestarts) {
    ctx.ports.events.emit(ctx.ug, Events.restartsDisabled(spec.rolloutRestartTargets.map(describeTarget).join(', ')));
    return leave({ status: recorded });
  }
  let restartedAny = false;
  for (const target of spec.rolloutRestartTargets) {
    ctx.signal?.throwIfAborted();
    const done = await restartOne(ctx, target, issuedAt);
    if (done === 'restarted') restartedAny = true;
    // Left to do: the cap keeps a slot for the key (come back then), or a target failed.
    else if (done !== 'skipped' && 'slotInMs' in done) return next(waitForSlot({ ...progress, restarts: { status: before } }, 'restart', done.slotInMs));
    else if (done !== 'skipped') return leave({ ...done, status: before });
  }
  return leave({ status: restartedAny ? { tokenIssuedTime: issuedAt, lastRestartTime: iso(ctx.ports.clock.now()) } : recorded });
}

/** One target: restarted, skipped (current, missing, not allowed), or what is left to do (a cap's slot, a failure). */
async function restartOne(
  ctx: ReconcileContext,
  target: RestartTarget,
  issuedAt: string,
): Promise<'restarted' | 'skipped' | { readonly slotInMs: number } | Pick<RestartProgress, 'failure'>> {
  const { namespace, name } = ctx.ug.metadata;
  const what = describeTarget(target);
  const read = await ctx.ports.workloads.read(namespace, target);
  if (read.kind === 'refused') return restartFailed(ctx, target, read.error);
  const found = read.kind === 'found' ? read : undefined;
  const workload = found?.workload;
  const action = workloadAction(workload, name, issuedAt);
  if (action === 'current') return 'skipped';
  if (action === 'missing' || action === 'not-allowed') {
    ctx.ports.metrics.count({ metric: 'workload-restarted', kind: target.kind, outcome: action });
    ctx.ports.events.emit(ctx.ug, action === 'missing' ? Events.restartTargetNotFound(what, namespace) : Events.restartTargetNotAllowed(what));
    return 'skipped';
  }
  const slot = ctx.ports.caps.take('restart', ctx.key);
  if (slot.kind === 'wait') return { slotInMs: slot.inMs };
  if (!found) return 'skipped';
  const restarted = await found.restart(name, issuedAt);
  // Changed since it was read (its consent too, perhaps), or deleted: decide again on what is there now.
  if (restarted.kind === 'conflict') return { failure: 'lost-race' };
  if (restarted.kind === 'refused') return restartFailed(ctx, target, restarted.error);
  ctx.ports.metrics.count({ metric: 'workload-restarted', kind: target.kind, outcome: 'restarted' });
  ctx.ports.events.emit(ctx.ug, Events.rolloutRestarted(what, issuedAt));
  ctx.log.info({ target: what }, 'restarted a workload for the new token');
  return 'restarted';
}

/** The apiserver refused to read or restart a target (RBAC, validation): a Warning, and a retry with backoff. */
function restartFailed(ctx: ReconcileContext, target: RestartTarget, error: ApiError): Pick<RestartProgress, 'failure'> {
  const what = describeTarget(target);
  ctx.ports.metrics.count({ metric: 'workload-restarted', kind: target.kind, outcome: 'failed' });
  ctx.ports.events.emit(ctx.ug, Events.restartFailed(what, error.message));
  ctx.log.warn({ target: what, err: error.message }, 'workload restart failed');
  return { failure: 'restart-refused' };
}
