// Steps 5, 5b and 6, sync at the service: the PUT the plan calls for or a sync request asks for, and a group its answer finds already there (policies/sync.ts, adoption.ts decide).
import {
  deferred,
  iso,
  next,
  type Outcome,
  type Progress,
  type ReconcileContext,
  refused,
  rotationFailed,
  serviceFailed,
  type Step,
  waitForSlot,
} from '../usergroup-step.js';
import { type Plan, putPlanned } from './plan.js';
import { Events, Messages } from '../usergroup-messages.js';
import { Reason } from '../policies/conditions.js';
import { sha256Hex } from '../hash.js';
import { decideAdoption, keptTokenIsCurrent } from '../policies/adoption.js';
import { holdsRecord } from '../policies/token-secret.js';

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

/** After the sync step's PUT: adopt what was there, as the rules say (Keep, Rotate before anything is stored, or Refuse). */
export async function adoptIfFound(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { group } = progress;
  if (!group) return next(progress);
  // The proof that needs a read is looked for only when nothing else settles it (rare: an adoption check).
  const syncedBefore = group.created === true || plan.syncedBefore || (await sealedOnThisAccount(ctx, plan));
  const reclaim = !syncedBefore && keptTokenIsCurrent(plan.kept, plan.heldBefore, sha256Hex(group.token.reveal()));
  const decision = decideAdoption(group.created, syncedBefore, plan.connection.adoption, reclaim);
  if (reclaim && plan.kept) {
    ctx.log.info({ from: plan.kept.from }, 'took back the token Secret kept from a deleted UserGroup of this namespace; its token stays');
    return next({ ...progress, reclaimedFrom: plan.kept.from });
  }
  if (decision.kind === 'none') return next(progress);
  const { spec, connection } = plan;
  if (decision.policy === 'Refuse') return adoptionRefused(ctx, plan, decision.kind);
  let adopted = progress;
  if (decision.policy === 'Rotate') {
    // Before anything is stored: a crash before the next store repeats the adoption, never skips the rotation.
    const rotated = await ctx.calls.rotate(connection, group.token);
    if ('deferred' in rotated) return deferred(rotated.deferred, 'rotate', connection);
    if (!rotated.ok) return rotationFailed(ctx, 'adoption', rotated.failure, connection);
    adopted = { ...adopted, token: rotated.group.token, rotatedAt: iso(ctx.ports.clock.now()) };
    ctx.ports.metrics.count({ metric: 'token-rotated', trigger: 'adoption' });
  }
  const tokenRotated = decision.policy === 'Rotate';
  if (decision.kind === 'unknown') {
    ctx.ports.events.emit(ctx.ug, Events.createdUnknown(spec.userGroupId, connection.description, tokenRotated));
    ctx.log.warn({ tokenRotated }, 'the service did not say whether it created the user group');
    return next(adopted);
  }
  ctx.ports.events.emit(ctx.ug, Events.adopted(spec.userGroupId, connection.description, tokenRotated));
  ctx.log.info({ tokenRotated }, 'adopted an existing user group');
  return next({ ...adopted, adopted: { adoptedAt: iso(plan.now), tokenRotated } });
}

/** A Secret this UserGroup owns carries a record sealed under this account's key: it synced here before (a crash before its status write). */
async function sealedOnThisAccount(ctx: ReconcileContext, plan: Plan): Promise<boolean> {
  // The cache has no data, and a record is proof only with the token it seals.
  for (const cached of ctx.ports.secretCache.owned(ctx.ug)) {
    const live = await ctx.ports.secrets.read(cached.metadata.namespace, cached.metadata.name);
    if (live && holdsRecord(live, ctx.ug.metadata, plan.spec.userGroupId, plan.connection.seal)) return true;
  }
  return false;
}

/** The rules refuse to adopt an existing group (or one that may exist: `unknown`): nothing stored, the claim given back for whoever may adopt it. */
async function adoptionRefused(ctx: ReconcileContext, plan: Plan, why: 'adopt' | 'unknown'): Promise<Outcome> {
  if (plan.claim) await ctx.ports.claims.release(plan.claim);
  const { userGroupId } = plan.spec;
  const { description } = plan.connection;
  const message = why === 'adopt' ? Messages.adoptionRefused(userGroupId, description) : Messages.adoptionUndecidable(userGroupId, description);
  return refused(ctx, Reason.AdoptionRefused, message, plan.spec);
}
