// What every UserGroup step works with and hands back: its context, result, service calls, progress and shared effects.
import type { Logger } from 'pino';
import type { ConditionStatus, UserGroup, UserGroupSpec, UserGroupStatus } from '../api/usergroup.js';
import type { RequestBudgetOptions, RequestKind } from './request-budget.js';
import type { ReconcilePorts, RotationTrigger, UserGroupEvent } from './usergroup-ports.js';
import { Reason } from './policies/conditions.js';
import type { FailureCause, ReconcileResult, Wake } from './reconcile-contract.js';
import { Events, Messages, type Operation } from './usergroup-messages.js';
import { SecretValue } from '../service/secret-value.js';
import type { CallResult, Deferral, ServiceFailure, ServiceUserGroup, UpsertRequest } from '../service/types.js';
import type { CallContext } from '../service/call-gates.js';
import type { Connection } from './connections.js';
import type { ObservedSecret } from '../api/secret.js';
import type { ScheduledRotation } from './policies/rotation.js';
import { objectKey } from '../api/meta.js';
import { type SecretApplyResult, secretMatches } from '../kube/secret-writer.js';
import { desiredSecret, inspectSecret, type KeptSecret, type SecretContent, type SecretInspection } from './policies/token-secret.js';

/** A UserGroup's spec and the connection it resolved to: what observing and writing its token Secret need. */
export interface Connected {
  readonly spec: UserGroupSpec;
  readonly connection: Connection;
}

/** What the plan (usergroup/plan.ts) tells the steps after it about the token Secret and the token, as they start. */
interface PlanStart {
  /** The token Secret this UserGroup controls, as observed. */
  readonly owned: Extract<SecretInspection, { state: 'owned' }> | undefined;
  /** A token Secret kept from a deleted UserGroup of this namespace at spec.tokenSecret.name. */
  readonly kept: KeptSecret | undefined;
  /** When the held token was obtained. */
  readonly issuedAt: string;
}

/** The operator's settings a reconcile decides by. */
export interface ReconcileSettings {
  readonly resyncPeriodMs: number;
  /** The operator's floor under spec.rotation.maxTokenAge (--min-token-age): a tenant cannot make rotations more frequent. */
  readonly minTokenAgeMs: number;
  /** Whether the operator restarts spec.rolloutRestartTargets (the chart's opt-in, which also grants the RBAC). */
  readonly workloadRestarts: boolean;
  /** Whether the operator prompts consenting Pods after a new token (the chart's mountedTokenRefresh, which grants the RBAC). */
  readonly podPrompts: boolean;
  /** The longest a deletion with spec.deletionPolicy Rotate is held, from its deletionTimestamp (--deletion-rotation-timeout). */
  readonly deletionRotationTimeoutMs: number;
  /** spec.deletionPolicy Rotate is in force (--rotate-on-delete); false: every rotate-on-delete finalizer is removed and none added. */
  readonly rotateOnDelete: boolean;
  /**
   * This controller alone sees every namespace's UserGroups (no --namespaces, no sharding): only then may an id the
   * rules bind to one namespace go without a claim (usergroup/claim.ts idHeldByRules).
   */
  readonly seesAllNamespaces: boolean;
  /** What each namespace's sync and rotation requests may cost: the figures the waiting Events name. */
  readonly requestBudgets: Readonly<Record<RequestKind, RequestBudgetOptions>>;
}

/**
 * Everything one reconcile of one UserGroup works with, as one value (kube-rs's `ctx`): the object as the cache
 * had it when the reconcile began, the ports, the settings, and its service calls.
 */
export interface ReconcileContext {
  readonly key: string;
  readonly ug: UserGroup;
  /** The status the reconcile began from: what it compares its one status write against. */
  readonly previous: UserGroupStatus;
  readonly ports: ReconcilePorts;
  readonly settings: ReconcileSettings;
  readonly log: Logger;
  /** Aborted when the work must stop (shutdown, lost leadership): nothing is written after it. */
  readonly signal: AbortSignal | undefined;
  readonly calls: ServiceCalls;
}

/** A wall-clock time as status shows it: whole seconds, RFC 3339. */
export function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** What the reconcile has to say in status: written once, at its end (report.ts), and only if it differs. */
export interface StatusReport {
  readonly status: ConditionStatus;
  readonly reason: Reason;
  readonly message: string;
  /** Status fields to set; a field given as undefined is cleared. */
  readonly fields: UserGroupStatus;
  /** Sent after the status is written: the Event that goes with a failure condition. */
  readonly event?: UserGroupEvent | undefined;
}

/**
 * How a reconcile ends: what to report (undefined: status stays as it is) and what the worker does with the key.
 * `ends` tells it from a step's value handed on (Next): a step that ends the reconcile returns its Outcome itself.
 */
export interface Outcome {
  readonly ends: true;
  readonly report: StatusReport | undefined;
  readonly result: ReconcileResult;
}

/** A step's value for the next step (a step that never ends the reconcile returns only this). */
export interface Next<T> {
  readonly ends: false;
  readonly value: T;
}

/** A step hands on its value, or ends the reconcile with its Outcome. */
export type Step<T> = Next<T> | Outcome;

export const next = <T>(value: T): Next<T> => ({ ends: false, value });

export const failed = (cause: FailureCause): ReconcileResult => ({ kind: 'failed', cause });
export const DONE: ReconcileResult = { kind: 'done' };

/** A condition the user must fix: status + Event, and a retry (`poll`) only where nothing else will wake us. */
export function blocked(ctx: ReconcileContext, reason: Reason, message: string, poll?: FailureCause): Outcome {
  ctx.log.info({ reason }, message);
  return { ends: true, report: { status: 'False', reason, message, fields: {}, event: Events.blocked(reason, message) }, result: poll ? failed(poll) : DONE };
}

/** The apiserver refused the token Secret (validation, quota, RBAC): say so on the object, never just in a log. */
export function secretWriteRefused(secret: string, error: Error): Outcome {
  const message = Messages.secretWriteFailed(secret, error.message);
  return {
    ends: true,
    report: { status: 'False', reason: Reason.SecretWriteFailed, message, fields: {}, event: Events.secretWriteFailed(message) },
    result: failed('secret-write-refused'),
  };
}

/**
 * The service calls of one reconcile. The first may be deferred (the account's rate limit, a failing connection);
 * later ones are follow-ups of work begun and always go out: deferring one would strand the first.
 */
export class ServiceCalls {
  private made = 0;
  /** A rotation intent is stored: its POST finishes work begun, like a follow-up (deferring it costs a recovery PUT). */
  private intentStored = false;

  constructor(
    private readonly key: string,
    private readonly signal: AbortSignal | undefined,
    /** Queues the key again: a connection that deferred a call runs it when the call may go out. */
    private readonly wake: () => void,
  ) {}

  async upsert(connection: Connection, request: UpsertRequest): Promise<CallResult> {
    return this.count(await connection.upsert(request, this.context()));
  }

  async rotate(connection: Connection, token: SecretValue): Promise<CallResult> {
    return this.count(await connection.rotate(token, this.context()));
  }

  /** The same calls, cut off after `ms` (a deletion's rotation may not outlast its limit); the cut throws a TimeoutError. */
  within(ms: number): ServiceCalls {
    const deadline = AbortSignal.timeout(Math.max(1, Math.ceil(ms)));
    const within = new ServiceCalls(this.key, this.signal ? AbortSignal.any([this.signal, deadline]) : deadline, this.wake);
    within.made = this.made;
    within.intentStored = this.intentStored;
    return within;
  }

  /** Why no call could go out now, if so (asked before work that only makes sense with a call after it). */
  unavailable(connection: Connection): Deferral | undefined {
    return connection.unavailable(this.context());
  }

  /** The intent of a rotation is on the Secret: its POST is a follow-up. */
  intentRecorded(): void {
    this.intentStored = true;
  }

  private context(): CallContext {
    return { key: this.key, followUp: this.made > 0 || this.intentStored, signal: this.signal, wake: this.wake };
  }

  /** Passes the result on as it came; a deferred call did not go out, so the next one is still the first. */
  private count(result: CallResult): CallResult {
    if (!('deferred' in result)) this.made += 1;
    return result;
  }
}

/**
 * A call was not made now (rate limit, a failing connection): the key comes back when woken or after the
 * connection's delay. Only a paused connection is news for the user; waiting one's turn is not.
 */
export function deferred(deferral: Deferral, operation: Operation, connection: Connection): Outcome {
  const result: ReconcileResult = { kind: 'wait', afterMs: deferral.afterMs };
  if (deferral.why !== 'paused') return { ends: true, report: undefined, result };
  // Reported as the failure that paused the connection: that is what the user can act on.
  const last = deferral.lastFailure;
  const reason = last ? reasonFor(last) : Reason.ServiceUnavailable;
  const cause = last ? ` (last failure: ${connection.shared ? last.message : coarseFailure(last)})` : '';
  const message = Messages.callPaused(operation, connection.description, deferral.message, cause);
  return { ends: true, report: { status: 'False', reason, message, fields: {}, event: Events.callFailed(operation, reason, message) }, result };
}

/** A service call failed: the condition and Event say why, the key is retried by the failure's class. */
export function serviceFailed(ctx: ReconcileContext, operation: Operation, failure: ServiceFailure, connection: Connection): Outcome {
  const reason = reasonFor(failure);
  // A tenant's own connection may point anywhere its egress rule allows: what comes back (remote text,
  // which network error) would make the operator its port scanner. It gets the kind and HTTP status only.
  const message = Messages.callFailed(operation, connection.description, connection.shared ? failure.message : coarseFailure(failure));
  ctx.log.warn({ reason, status: failure.status, operation, detail: failure.message }, 'service call failed');
  if (failure.kind === 'unauthorized') connection.invalidate();
  const result: ReconcileResult =
    failure.kind === 'rate-limited' && failure.retryAfterMs !== undefined
      ? // The account waits as a whole (service/call-gates.ts); the queue spreads the keys out (retry-policy.ts).
        { kind: 'retry-after', afterMs: failure.retryAfterMs }
      : failed(failure.kind === 'unauthorized' ? 'key-refused' : failure.kind === 'rejected' ? 'request-refused' : 'call-failed');
  return { ends: true, report: { status: 'False', reason, message, fields: {}, event: Events.callFailed(operation, reason, message) }, result };
}

/** A rotation the service did not do (its POST, or the PUT that reads the token for it, failed): counted, then reported as any failed call. */
export function rotationFailed(
  ctx: ReconcileContext,
  trigger: RotationTrigger,
  failure: ServiceFailure,
  connection: Connection,
  operation: Extract<Operation, 'rotate' | 'rotate-read'> = 'rotate',
): Outcome {
  ctx.ports.metrics.count({ metric: 'rotation-failed', trigger });
  return serviceFailed(ctx, operation, failure, connection);
}

function reasonFor(failure: ServiceFailure): Reason {
  switch (failure.kind) {
    case 'unauthorized':
      return Reason.Unauthorized;
    case 'rate-limited':
      return Reason.RateLimited;
    case 'unavailable':
      return Reason.ServiceUnavailable;
    case 'rejected':
      return Reason.Rejected;
    case 'invalid-response':
      return Reason.InvalidResponse;
  }
}

/** What a tenant may learn of a failed call to its own connection: the kind of failure and the HTTP status. */
function coarseFailure(failure: ServiceFailure): string {
  const status = failure.status === undefined ? '' : ` (HTTP ${failure.status})`;
  switch (failure.kind) {
    case 'unavailable':
      return failure.status === undefined ? 'no answer from the service (connection failed or timed out)' : `service unavailable${status}`;
    case 'unauthorized':
      return `service refused the API key${status}`;
    case 'rate-limited':
      return `service rate limit reached${status}`;
    case 'rejected':
      return `service rejected the request${status}`;
    case 'invalid-response':
      return `service answered with an invalid response${status}`;
  }
}

/** Rotation bookkeeping as the token Secret records it (sealed with the token). */
export interface Bookkeeping {
  /** The last requested rotation value handled. */
  readonly handled: string | undefined;
  /** A rotation begun (recorded before its POST) and not yet known to be done. */
  readonly pending: string | undefined;
}

/** What the steps after the plan have done so far; each hands on a new one. */
export interface Progress {
  /** The token to store: the held one, or what the service returned. */
  readonly token: SecretValue | undefined;
  /** The service's answer, when a call went out. */
  readonly group: ServiceUserGroup | undefined;
  readonly book: Bookkeeping;
  /** When this reconcile rotated the token, if it did. */
  readonly rotatedAt: string | undefined;
  /** What the requested rotation this reconcile handled revoked (status.rotation.lastRevoked). */
  readonly revoked?: RevokedToken;
  /** A fleet follower waits for the primary's rotation for this request (status.rotation.following). */
  readonly following?: NonNullable<UserGroupStatus['rotation']>['following'];
  readonly adopted: UserGroupStatus['adoption'];
  /** The token Secret as stored now (after our own writes), if any. */
  readonly secret: ObservedSecret | undefined;
  /** The adopt step took back a token Secret kept from this deleted UserGroup (its name): same token, no rotation. */
  readonly reclaimedFrom?: string;
  /** From the store step: when the stored token was obtained, and whether it is another than the one held before. */
  readonly stored?: { readonly issuedAt: string; readonly changed: boolean };
  /** A requested rotation's slot of its namespace's budget (rotate.ts takeRotationSlot): spent once its intent is written (rotateIfAsked). */
  readonly rotationSlot?: { spend(): void };
  /** Work left for a slot a cap or a budget keeps for this key (waitForSlot): the key comes back at the earliest. */
  readonly wake?: SlotWake;
  /** From the restart step. */
  readonly restarts?: RestartProgress;
  /** From the Pod prompt step. */
  readonly prompts?: PromptProgress;
}

/**
 * What waits for a slot: a rotation (rotate.ts: a due scheduled one for the global cap's, a requested one
 * for its namespace's budget's), a sync request (sync-at-service.ts syncOnRequest: its namespace's budget's), workload restarts
 * (consumers.ts: the restart cap's), Pod prompts (consumers.ts: the prompt cap's); on a fleet's follower, the next look for the primary's rotation
 * (rotate.ts).
 */
export type SlotFor = 'rotation' | 'sync-request' | 'restart' | 'prompt' | 'follow';

/** The slots this reconcile's work waits for, as one value. */
export interface SlotWake {
  /** The earliest of the slots, this far ahead. */
  readonly inMs: number;
  /** Everything that waits (a rotation that waits is not begun: rotate.ts). */
  readonly why: readonly SlotFor[];
}

/** `why` waits for a slot `inMs` ahead. The one place slots meet: the earliest wins, and all that waits is kept. */
export function waitForSlot(progress: Progress, why: SlotFor, inMs: number): Progress {
  const { wake } = progress;
  return { ...progress, wake: { inMs: wake ? Math.min(wake.inMs, inMs) : inMs, why: [...(wake?.why ?? []), why] } };
}

/** Whether `why` waits for a slot (waitForSlot). */
export function waitsForSlot(progress: Pick<Progress, 'wake'>, why: SlotFor): boolean {
  return progress.wake?.why.includes(why) === true;
}

export type RevokedToken = NonNullable<NonNullable<UserGroupStatus['rotation']>['lastRevoked']>;

export interface PromptProgress {
  /** status.podPrompts as the step leaves it. */
  readonly status: UserGroupStatus['podPrompts'];
  /** Why a Pod was not prompted (a retry with backoff; Ready stays True: the token itself is stored). */
  readonly failure?: 'prompt-refused';
}

export interface RestartProgress {
  /** status.rolloutRestarts as the step leaves it. */
  readonly status: UserGroupStatus['rolloutRestarts'];
  /** Restarts are left to do: a target could not be restarted. */
  readonly failure?: FailureCause;
}

/**
 * Before any step: what the Secret holds, and what the status said was handled. A Secret kept from a deleted
 * UserGroup is the one the next write replaces, whichever way the adopt step decides.
 */
export function startingPoint(plan: Pick<PlanStart, 'owned' | 'kept'>, previous: UserGroupStatus): Progress {
  const { owned, kept } = plan;
  return {
    token: owned?.token,
    group: undefined,
    book: { handled: owned?.handled ?? kept?.handled ?? previous.rotation?.lastHandledRequest, pending: owned?.pending },
    rotatedAt: undefined,
    adopted: undefined,
    secret: owned?.secret ?? kept?.secret,
  };
}

/** When the token now held was obtained: the store step knows; before it, the plan's. */
export function issuedAtNow(plan: Pick<PlanStart, 'issuedAt'>, progress: Progress): string {
  return progress.stored?.issuedAt ?? plan.issuedAt;
}

/**
 * When to come back after a converged reconcile: the periodic resync, the scheduled rotation of the token now
 * stored (unless a rotation already waits for its slot: a due schedule would bring the key back at once, again and
 * again), and the earliest slot the caps and budgets keep for this key.
 */
export function wakeAfterSync(input: {
  readonly resyncAt: number | undefined;
  readonly schedule: ScheduledRotation | undefined;
  readonly slot: SlotWake | undefined;
}): Wake | undefined {
  const rotationWaits = waitsForSlot({ wake: input.slot }, 'rotation') || waitsForSlot({ wake: input.slot }, 'follow');
  const dueAt = [input.resyncAt, rotationWaits ? undefined : input.schedule?.dueAt].filter((t): t is number => t !== undefined);
  const slotInMs = input.slot ? [input.slot.inMs] : [];
  return dueAt.length === 0 && slotInMs.length === 0 ? undefined : { dueAt, slotInMs };
}

/**
 * The rules or a claim say this namespace may not hold this group: report it, and delete any token Secret this
 * UserGroup holds from before (a rule or a claim changed), so no token stays where it no longer belongs.
 */
export async function refused(ctx: ReconcileContext, reason: Reason, message: string, spec: UserGroupSpec): Promise<Outcome> {
  const revoked = await revokeTokenSecrets(ctx, spec);
  return blocked(ctx, reason, Messages.revoked(message, revoked));
}

async function revokeTokenSecrets(ctx: ReconcileContext, spec: UserGroupSpec): Promise<string[]> {
  const { metadata } = ctx.ug;
  const { secretCache, secrets } = ctx.ports;
  const owned = new Map(secretCache.owned(ctx.ug).map((s) => [s.metadata.name, s]));
  // The owned-Secret cache selects by a label its tenant can remove: look at the named Secret itself too.
  const seen = secretCache.seen(objectKey({ namespace: metadata.namespace, name: spec.tokenSecret.name }));
  if (!owned.has(spec.tokenSecret.name) && (seen.cached || seen.otherExists)) {
    const named = await secrets.read(metadata.namespace, spec.tokenSecret.name);
    if (named?.metadata.ownerReferences.some((o) => o.controller && o.uid === metadata.uid)) owned.set(named.metadata.name, named);
  }
  for (const secret of owned.values()) {
    ctx.signal?.throwIfAborted();
    await secrets.delete(secret);
    ctx.log.info({ secret: secret.metadata.name }, 'deleted a token Secret the namespace may no longer hold');
  }
  return [...owned.keys()];
}

/**
 * A create met a Secret neither cache knew of (a watch lagging behind a creation). A lost race like any other
 * conflict, and the steps pass it on as one; the step runner alone (reconcile.ts) knows it by this very value and,
 * the first time, decides again from a live read instead.
 */
const SECRET_APPEARED: Outcome = { ends: true, report: undefined, result: failed('lost-race') };

/** Whether a reconcile's ending is a Secret that appeared (see SECRET_APPEARED). */
export function secretAppeared(ending: Outcome): boolean {
  return ending === SECRET_APPEARED;
}

/**
 * Writes the token Secret as `content` says, unless `current` (what is stored now, as far as we know) already is
 * that: the apply helper compares before it writes. With only the token's digest at hand (no call was made and the
 * cache has no data), an unchanged Secret costs nothing; one whose metadata must change has its token read first.
 */
export async function writeTokenSecret(
  ctx: ReconcileContext,
  { spec, connection }: Connected,
  content: SecretContent,
  current: ObservedSecret | undefined,
): Promise<Step<ObservedSecret>> {
  const { keeper } = ctx.ports.namespaces.get(ctx.ug.metadata.namespace);
  let desired = desiredSecret(ctx.ug.metadata, spec, content, connection.seal, keeper);
  if (!(content.token instanceof SecretValue)) {
    if (current && secretMatches(current, desired)) return next(current);
    // Metadata must change and only the digest is at hand: read the token it stands for.
    const live = inspectSecret(await readLive(ctx, { spec }), ctx.ug.metadata, spec, connection.seal);
    if (live.state !== 'owned' || !live.token || live.resourceVersion !== current?.metadata.resourceVersion)
      return { ends: true, report: undefined, result: failed('lost-race') };
    desired = desiredSecret(ctx.ug.metadata, spec, { ...content, token: live.token }, connection.seal, keeper);
  }
  ctx.signal?.throwIfAborted();
  const applied: SecretApplyResult = await ctx.ports.secrets.apply(desired, current);
  switch (applied.kind) {
    case 'unchanged':
    case 'created':
    case 'updated':
      return next(applied.secret);
    case 'conflict':
      ctx.log.info({ secret: spec.tokenSecret.name, conflict: applied.conflict }, 'token Secret changed while we worked; deciding again');
      return applied.conflict === 'exists' ? SECRET_APPEARED : { ends: true, report: undefined, result: failed('lost-race') };
    case 'refused':
      return secretWriteRefused(spec.tokenSecret.name, applied.error);
  }
}

/** Reads the token Secret live, data included. */
export function readLive(ctx: ReconcileContext, { spec }: Pick<Connected, 'spec'>): Promise<ObservedSecret | undefined> {
  return ctx.ports.secrets.read(ctx.ug.metadata.namespace, spec.tokenSecret.name);
}
