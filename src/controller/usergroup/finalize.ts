// spec.deletionPolicy Rotate: the rotate-on-delete finalizer before the first call and kept after, and the rotation when a UserGroup goes.
import { hasRotateFinalizer, objectKey } from '../../api/meta.js';
import {
  afterDeletionLearn,
  afterDeletionRotation,
  decideDeletion,
  decideLiveFinalizers,
  type DeletionDecision,
  deletionRetryAfter,
  finalizerBeforeCall,
  type PolicyView,
  type SecretFinalizerView,
} from '../policies/deletion.js';
import { IMMEDIATE_RETRY_MS } from '../retry-policy.js';
import { DONE, failed, next, type Progress, type ReconcileContext, type ServiceCalls, type Step } from '../usergroup-step.js';
import { type Plan, putPlanned } from './plan.js';
import { TOKEN_RECORD_ANNOTATION } from '../../api/constants.js';
import type { ObservedSecret } from '../../api/secret.js';
import type { UserGroupSpec } from '../../api/usergroup.js';
import type { Connection } from '../connections.js';
import type { ReconcileResult } from '../reconcile-contract.js';
import type { SecretInspection } from '../policies/token-secret.js';
import { syncHash, upsertRequestFor } from '../policies/sync.js';
import type { SecretValue } from '../../service/secret-value.js';
import { refusedByRules, resolveConnection } from './admit.js';
import { holdsId } from './claim.js';
import { observeSecret } from './observe-secret.js';
import { Events } from '../usergroup-messages.js';
import type { DeletionRotationResult } from '../usergroup-ports.js';

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

/**
 * spec.deletionPolicy: the rotate-on-delete finalizer kept on the objects that ask for it (keepFinalizers, after a
 * reconcile of a live UserGroup; the UserGroup's goes on before its first service call, finalizerFirst), and a
 * deletion that holds it (finalizeDeletion): one POST /api/user with the held token (or one a PUT learns, when no
 * Secret holds it) through the connection's gates, then the finalizers go. Decisions are in policies/deletion.ts.
 */

const LOST_RACE: ReconcileResult = failed('lost-race');
const RESULT: Readonly<Record<Ending['kind'], DeletionRotationResult>> = { rotated: 'rotated', abandon: 'abandoned', skip: 'skipped' };

/**
 * After the reconcile of a UserGroup that is not being deleted: adds or removes the finalizer on it and its token
 * Secret as decideLiveFinalizers says. Reads the caches only, so a Retain UserGroup without finalizers costs no
 * request. Returns a result only when a write met a newer version (decide again).
 */
export async function keepFinalizers(ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
  const { ug, ports } = ctx;
  const spec = ug.spec.ok ? ug.spec.value : undefined;
  const owned = ports.secretCache.owned(ug);
  // The cache's copy: it shows a finalizer written after this reconcile read its object (finalizerFirst).
  const userGroupFinalized = hasRotateFinalizer((ports.userGroups.get(ctx.key) ?? ug).metadata);
  const wanted = spec?.deletionPolicy === 'Rotate' && ctx.settings.rotateOnDelete;
  if (!wanted && !userGroupFinalized && !owned.some((s) => hasRotateFinalizer(s.metadata))) return undefined;

  const currentName = spec?.tokenSecret.name;
  const currentSecret = currentName === undefined ? undefined : ownedSecret(ctx, currentName);
  const stale = owned.filter((s) => s.metadata.name !== currentName && hasRotateFinalizer(s.metadata));
  const inputs = {
    policy: policyOf(spec),
    userGroupFinalized,
    current: currentSecret && secretView(currentSecret),
    staleFinalized: stale.length,
    namespaceTerminating: false,
    disabled: !ctx.settings.rotateOnDelete,
  };
  let decision = decideLiveFinalizers(inputs);
  // A removal may be a namespace's deletion on its way (its Secrets deleted before its UserGroups): asked only then.
  if ((decision.currentSecret === 'remove' || decision.userGroup === 'remove') && (await ports.namespaces.get(ug.metadata.namespace).terminating())) {
    decision = decideLiveFinalizers({ ...inputs, namespaceTerminating: true });
  }
  // The Secret first: once a token is held, the UserGroup's deletion finds it kept (a terminating Secret stays readable).
  if (decision.currentSecret && currentSecret && !(await ports.finalizers.set({ secret: currentSecret }, decision.currentSecret === 'add'))) return LOST_RACE;
  if (decision.staleSecrets) for (const secret of stale) if (!(await ports.finalizers.set({ secret }, false))) return LOST_RACE;
  if (decision.userGroup && !(await ports.finalizers.set({ userGroup: ug }, decision.userGroup === 'add'))) return LOST_RACE;
  if (decision.userGroup || decision.currentSecret) ctx.log.debug({ decision }, 'rotate-on-delete finalizers changed');
  return undefined;
}

/**
 * A UserGroup being deleted that holds the finalizer: rotate its token once (policy Rotate, not suspended, admitted
 * by the tenant rules, holding its id's claim, with a token its Secret's sealed record vouches for), then remove
 * the finalizers. Never held past the limit from the deletionTimestamp: then it lets go with a Warning Event. The
 * new token is discarded unread. A second pass after a crash finds the old token no longer current: done. With no
 * token record at all (the finalizer went on before the first PUT, and the deletion came before the Secret held
 * the token) a PUT learns the current token first (afterDeletionLearn says whether to rotate it).
 */
export async function finalizeDeletion(ctx: ReconcileContext): Promise<ReconcileResult> {
  const { ug, ports, settings } = ctx;
  const spec = ug.spec.ok ? ug.spec.value : undefined;
  const elapsedMs = ports.clock.now() - Date.parse(ug.metadata.deletionTimestamp ?? '');
  const limit = { elapsedMs: Number.isFinite(elapsedMs) ? elapsedMs : 0, limitMs: settings.deletionRotationTimeoutMs, disabled: !settings.rotateOnDelete };
  const policy = policyOf(spec);
  // What can be decided without any read first: a Retain or suspended UserGroup lets go at once.
  const early = decideDeletion({ policy, connection: 'resolved', claimHeld: true, trustedToken: true, ...limit });
  if (early.kind === 'skip') return release(ctx, early, spec);
  if (!spec) return release(ctx, { kind: 'skip', why: 'invalid-spec' }, spec);

  // The live path's admit, claim and observe, read only: the same connection, the same holder of the id, the same Secret.
  const resolution = await resolveConnection(ctx, spec);
  if (!resolution.ok) {
    const decision = decideDeletion({
      policy,
      connection: refusedByRules(resolution) ? 'refused' : 'unresolved',
      claimHeld: false,
      trustedToken: false,
      ...limit,
    });
    if (decision.kind === 'abandon') return release(ctx, { ...decision, detail: resolution.message }, spec);
    if (decision.kind === 'skip') return release(ctx, decision, spec);
    throw new Error('a deletion without a connection cannot rotate');
  }
  const { connection } = resolution;
  const claimHeld = await holdsId(ctx, { spec, connection });
  // The token as its Secret holds it now, read live with its data (a terminating Secret is still readable: our finalizer keeps it).
  const inspected: SecretInspection = claimHeld ? await observeSecret(ctx, { spec, connection }, 'live') : { state: 'missing' };
  const live = inspected.state === 'owned' ? inspected.secret : undefined;
  const token = inspected.state === 'owned' && inspected.trusted ? inspected.token : undefined;
  const unrecorded =
    inspected.state === 'missing' || (inspected.state === 'owned' && inspected.secret.metadata.annotations[TOKEN_RECORD_ANNOTATION] === undefined);
  const follower = connection.fleet === 'Follower';
  const decision = decideDeletion({ policy, connection: 'resolved', claimHeld, trustedToken: token !== undefined, unrecorded, follower, ...limit });
  if (decision.kind !== 'rotate' && decision.kind !== 'learn') return release(ctx, decision, spec, live);
  const calls = ctx.calls.within(decision.remainingMs);

  let held = token;
  if (decision.kind === 'learn') {
    const learned = await learnToken(ctx, calls, connection, spec, decision.remainingMs);
    if (learned.kind === 'wait') return learned.result;
    if (learned.kind === 'skip') return release(ctx, learned, spec, live);
    held = learned.token;
  }
  if (!held) throw new Error('no trusted token to rotate');

  const answer = await cutOff(ctx, connection, () => calls.rotate(connection, held));
  if (answer === undefined) return { kind: 'wait', afterMs: IMMEDIATE_RETRY_MS };
  const after =
    'deferred' in answer
      ? afterDeletionRotation('deferred', decision.remainingMs, answer.deferred.afterMs)
      : afterDeletionRotation(answer.ok ? 'rotated' : answer.failure.kind === 'rejected' ? 'not-current' : 'failed', decision.remainingMs);
  if (after.kind === 'retry') {
    if ('failure' in answer) failedCall(ctx, connection, answer.failure.kind, answer.failure.message);
    return { kind: 'wait', afterMs: after.afterMs };
  }
  // The new token (answer.group.token) is dropped here, unread: nobody may use the deleted tenant's group with it.
  ctx.log.info({ alreadyInvalid: after.rotated === 'already-invalid' }, 'token rotated before the UserGroup goes (deletionPolicy Rotate)');
  return release(ctx, { kind: 'rotated', alreadyInvalid: after.rotated === 'already-invalid' }, spec, live);
}

type Learned =
  | { readonly kind: 'token'; readonly token: SecretValue }
  | { readonly kind: 'wait'; readonly result: ReconcileResult }
  | Extract<DeletionDecision, { kind: 'skip' }>;

/**
 * The PUT that learns the current token of a group no Secret holds a token of (the service has no read). It sends
 * the spec's request, as the sync would. The token stays in memory for the one POST that follows.
 */
async function learnToken(ctx: ReconcileContext, calls: ServiceCalls, connection: Connection, spec: UserGroupSpec, remainingMs: number): Promise<Learned> {
  const request = upsertRequestFor(spec);
  const answer = await cutOff(ctx, connection, () => calls.upsert(connection, request));
  if (answer === undefined) return { kind: 'wait', result: { kind: 'wait', afterMs: IMMEDIATE_RETRY_MS } };
  if ('deferred' in answer) return { kind: 'wait', result: { kind: 'wait', afterMs: deletionRetryAfter(remainingMs, answer.deferred.afterMs) } };
  if (!answer.ok) {
    failedCall(ctx, connection, answer.failure.kind, answer.failure.message);
    return { kind: 'wait', result: { kind: 'wait', afterMs: deletionRetryAfter(remainingMs) } };
  }
  const { created } = answer.group;
  const syncedBefore = ctx.ug.status.syncedHash === syncHash(request, connection.id);
  const learned = afterDeletionLearn({ created, adoption: connection.adoption, syncedBefore });
  ctx.log.info({ created, next: learned.kind === 'rotate' ? 'rotate' : learned.why }, 'no token held; a PUT learned the current one (deletionPolicy Rotate)');
  return learned.kind === 'rotate' ? { kind: 'token', token: answer.group.token } : learned;
}

/** A call of the deletion, cut off at its limit: undefined when the limit passes with the call still out (the next pass lets go). */
async function cutOff<T>(ctx: ReconcileContext, connection: Connection, call: () => Promise<T>): Promise<T | undefined> {
  try {
    return await call();
  } catch (err) {
    // The limit passes with the call still out: a service that does not answer.
    if (!(err instanceof DOMException && err.name === 'TimeoutError')) throw err;
    failedCall(ctx, connection, 'unavailable', 'no answer before --deletion-rotation-timeout');
    return undefined;
  }
}

/** How a deletion that held the finalizer ends. */
type Ending =
  | Extract<DeletionDecision, { kind: 'skip' }>
  | (Extract<DeletionDecision, { kind: 'abandon' }> & { readonly detail?: string })
  | { readonly kind: 'rotated'; readonly alreadyInvalid: boolean };

/** Removes the finalizers (the token Secrets' first), counts the outcome and tells it. */
async function release(ctx: ReconcileContext, ending: Ending, spec: UserGroupSpec | undefined, live?: ObservedSecret): Promise<ReconcileResult> {
  const { ug, ports } = ctx;
  const secrets = new Map<string, Pick<ObservedSecret, 'metadata'>>();
  for (const secret of ports.secretCache.owned(ug)) if (hasRotateFinalizer(secret.metadata)) secrets.set(secret.metadata.name, secret);
  // A Secret whose label a tenant removed is not in the token-Secret cache: the live read still finds our finalizer.
  if (live && hasRotateFinalizer(live.metadata) && live.metadata.ownerReferences.some((o) => o.controller && o.uid === ug.metadata.uid)) {
    secrets.set(live.metadata.name, live);
  }
  if (spec && !secrets.has(spec.tokenSecret.name) && !live) {
    const named = ports.secretCache.seen(objectKey({ namespace: ug.metadata.namespace, name: spec.tokenSecret.name })).cached;
    if (named && hasRotateFinalizer(named.metadata)) secrets.set(named.metadata.name, named);
  }
  for (const secret of secrets.values()) if (!(await ports.finalizers.set({ secret }, false))) return LOST_RACE;
  if (!(await ports.finalizers.set({ userGroup: ug }, false))) return LOST_RACE;

  ports.metrics.count({ metric: 'deletion-rotation', result: RESULT[ending.kind] });
  switch (ending.kind) {
    case 'rotated':
      ports.events.emit(ug, Events.rotatedOnDelete(ending.alreadyInvalid));
      break;
    case 'abandon': {
      const why =
        ending.why === 'timeout'
          ? `no rotation succeeded within --deletion-rotation-timeout (${Math.round(ctx.settings.deletionRotationTimeoutMs / 1000)}s)`
          : `the connection cannot be resolved: ${ending.detail ?? 'unknown'}`;
      ports.events.emit(ug, Events.deletionRotationAbandoned(why));
      ctx.log.warn({ why: ending.why }, 'let a deletion go without rotating its token (deletionPolicy Rotate)');
      break;
    }
    case 'skip':
      if (ending.why === 'follower') ports.events.emit(ug, Events.deletionLeftToFleet());
      ctx.log.info({ why: ending.why }, 'released a deletion without a rotation (deletionPolicy Rotate)');
  }
  return DONE;
}

/** A failed deletion rotation: logged (the Event comes if it is abandoned); a refused API key is read again. */
function failedCall(ctx: ReconcileContext, connection: Connection, kind: string, detail: string): void {
  ctx.log.warn({ kind, detail: connection.shared ? detail : undefined }, 'rotation before deletion failed; retrying within the limit');
  if (kind === 'unauthorized') connection.invalidate();
}

function policyOf(spec: UserGroupSpec | undefined): PolicyView | undefined {
  return spec && { policy: spec.deletionPolicy, suspend: spec.suspend };
}

/** The named Secret if this UserGroup controls it (the cache). */
function ownedSecret(ctx: ReconcileContext, name: string): ObservedSecret | undefined {
  const secret = ctx.ports.secretCache.seen(objectKey({ namespace: ctx.ug.metadata.namespace, name })).cached;
  return secret?.metadata.ownerReferences.some((o) => o.controller && o.uid === ctx.ug.metadata.uid) ? secret : undefined;
}

function secretView(secret: ObservedSecret): SecretFinalizerView {
  return {
    finalized: hasRotateFinalizer(secret.metadata),
    terminating: secret.metadata.deletionTimestamp !== undefined,
    recorded: secret.metadata.annotations[TOKEN_RECORD_ANNOTATION] !== undefined,
  };
}
