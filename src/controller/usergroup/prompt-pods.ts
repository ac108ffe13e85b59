// Step 8b, prompt: the kubelets of the Pods that consented (label refresh.usergroup.dev/<name>), once per new token.
import type { ApiError } from '../../kube/api-error.js';
import { oncePerToken } from '../policies/once-per-token.js';
import { podsToPrompt } from '../policies/pod-prompt.js';
import type { ReconcileContext } from './context.js';
import { iso } from './context.js';
import { Events } from './event-messages.js';
import { next, type Next } from './outcome.js';
import type { Plan } from './plan.js';
import { issuedAtNow, waitForSlot, type Progress, type PromptProgress } from './progress.js';

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
