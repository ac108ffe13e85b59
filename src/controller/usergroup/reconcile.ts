// The UserGroup reconciler: the chain of steps, from the cache to the one status write.
import type { Logger } from 'pino';
import { hasRotateFinalizer, objectKey } from '../../api/meta.js';
import { Reason } from '../policies/conditions.js';
import type { ReconcileRequest, ReconcileResult } from '../reconcile-contract.js';
import { adoptIfFound } from './sync-at-service.js';
import { admit } from './admit.js';
import { holdClaim } from './claim.js';
import {
  blocked,
  DONE,
  next,
  type Outcome,
  type Progress,
  type ReconcileContext,
  type ReconcileSettings,
  secretAppeared,
  ServiceCalls,
  startingPoint,
  type Step,
} from '../usergroup-step.js';
import { Messages } from '../usergroup-messages.js';
import { finalizeDeletion, keepFinalizers } from './finalize.js';
import { finalizerFirst } from './finalize.js';
import { observeSecret, type SecretSource } from './observe-secret.js';
import { plan, type Held, type Plan } from './plan.js';
import type { ReconcilePorts } from '../usergroup-ports.js';
import { report, synced } from './report.js';
import { promptPods, restartConsumers } from './consumers.js';
import { rotateIfAsked } from './rotate.js';
import { takeRotationSlot } from './rotate.js';
import { storeToken } from './store-token.js';
import { syncAtService } from './sync-at-service.js';
import { syncOnRequest } from './sync-at-service.js';

export interface ReconcilerDeps {
  readonly ports: ReconcilePorts;
  readonly settings: ReconcileSettings;
  readonly log: Logger;
}

/** A step after the plan: `(ctx, plan, progress) → Step`, each in its own module. */
type ConvergeStep = (ctx: ReconcileContext, plan: Plan, progress: Progress) => Promise<Step<Progress>>;

/**
 * The rotate-on-delete finalizer before any call → sync at the service (or on request) → adopt a group found there →
 * a slot for the rotation, if one is due → rotate → store the token → restart its consumers.
 */
const STEPS: readonly ConvergeStep[] = [
  finalizerFirst,
  syncAtService,
  syncOnRequest,
  adoptIfFound,
  takeRotationSlot,
  rotateIfAsked,
  storeToken,
  promptPods,
  restartConsumers,
];

/**
 * Brings one UserGroup's world in line with its spec: the group at the service, its token in the Secret, and its
 * status. Level-triggered: every decision is made from what is observed now, so running it twice changes nothing.
 * Errors are not caught here: the worker (controller/worker.ts) is the one place that turns any outcome, a throw
 * included, into what happens to the key.
 */
export async function reconcileUserGroup(deps: ReconcilerDeps, request: ReconcileRequest): Promise<ReconcileResult> {
  const ug = deps.ports.userGroups.get(request.key);
  if (!ug) return DONE;
  // Going: the service has no delete, and the Secret goes by garbage collection. Only the rotate-on-delete
  // finalizer (spec.deletionPolicy Rotate) asks for work; without it a deletion costs nothing.
  if (ug.metadata.deletionTimestamp && !hasRotateFinalizer(ug.metadata)) return DONE;
  const ctx: ReconcileContext = {
    key: request.key,
    ug,
    previous: ug.status,
    ports: deps.ports,
    settings: deps.settings,
    log: deps.log.child({ usergroup: request.key, reconcileId: request.reconcileId }),
    signal: request.signal,
    calls: new ServiceCalls(request.key, request.signal, request.wake),
  };
  if (ug.metadata.deletionTimestamp) return finalizeDeletion(ctx);
  const outcome = await converge(ctx);
  await report(ctx, outcome.report);
  return (await keepFinalizers(ctx)) ?? outcome.result;
}

/** The preconditions and the id's claim, then the steps from the token Secret on. */
async function converge(ctx: ReconcileContext): Promise<Outcome> {
  const admitted = await admit(ctx);
  if (admitted.ends) return admitted;
  const claim = await holdClaim(ctx, admitted.value);
  if (claim.ends) return claim;
  const held: Held = { ...admitted.value, ...claim.value };
  // Neither cache knowing the Secret's name means none exists, unless a watch lags behind a creation: then our
  // create meets it before any rotation or Secret write, and the second pass reads it live. Only here is that
  // ending told from a lost race: the steps pass it on as one, and a second pass that meets it again ends so.
  const first = await fromSecret(ctx, held, 'cache');
  return secretAppeared(first) ? fromSecret(ctx, held, 'live') : first;
}

/** Observe the token Secret → plan (pure) → the steps → the synced report. */
async function fromSecret(ctx: ReconcileContext, held: Held, source: SecretSource): Promise<Outcome> {
  const secret = await observeSecret(ctx, held, source);
  if (secret.state === 'foreign') {
    const key = objectKey({ namespace: ctx.ug.metadata.namespace, name: held.spec.tokenSecret.name });
    return blocked(ctx, Reason.SecretConflict, Messages.secretConflict(key), 'secret-taken');
  }
  const decided = plan({ ug: ctx.ug, held, secret, settings: ctx.settings, now: ctx.ports.clock.now() });
  let step: Step<Progress> = next(startingPoint(decided, ctx.previous));
  for (const run of STEPS) {
    if (step.ends) return step;
    step = await run(ctx, decided, step.value);
  }
  return step.ends ? step : synced(ctx, decided, step.value);
}
