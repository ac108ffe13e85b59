// The gates every call to one endpoint (URL + API key) passes: the 429 pause, the circuit breaker, the token bucket's reservations.
import { TokenBucket } from '../platform/token-bucket.js';
import { CircuitBreaker, type Admission, type CircuitBreakerOptions } from './circuit-breaker.js';
import type { CallResult, Deferral, ServiceFailure, ServiceResult } from './types.js';

/** Who is calling: one reconcile of one UserGroup. */
export interface CallContext {
  /** The UserGroup's key: a token reserved for it waits for it, and a turned-away caller is woken by it. */
  readonly key: string;
  /** A later call of a reconcile that already made one: it is never deferred (that would strand the first). */
  readonly followUp: boolean;
  /**
   * Aborted when the worker must stop (shutdown, lost leadership). No call starts after it, one in flight is
   * cut off (its connection closed), and either way the call throws the signal's reason: an answer that comes
   * after it is not acted on, since another leader may already be acting on the same groups.
   */
  readonly signal?: AbortSignal | undefined;
  /** Queues the key again; run when a deferred call may go out. */
  readonly wake: () => void;
}

export interface CallGateOptions {
  readonly qps: number;
  readonly burst: number;
  readonly breaker?: CircuitBreakerOptions | undefined;
  /** Runs before every call goes out; throws when the work must stop (a lease lost by the clock). */
  readonly beforeCall?: (() => void) | undefined;
  /** When 429s are reported instead of waited out (default PERSISTENT_RATE_LIMIT). */
  readonly persistentRateLimit?: { readonly ms: number; readonly answers: number } | undefined;
  /**
   * When a call the 429 pause turned away comes back, from the pause's remaining ms: later by a spread, so the
   * keys deferred together do not all return at once (the caller's retry table owns the figure).
   */
  readonly spreadThrottled: (afterMs: number) => number;
}

/**
 * 429s with Retry-After are the account's rate limit, shared with every other cluster and shard on it: a call
 * they turn away waits (deferred, no failure on the UserGroup) unless nothing but 429s came back for this long and
 * this many times: then it is reported (RateLimited), since no share of the rate is left to this cluster.
 */
export const PERSISTENT_RATE_LIMIT = { ms: 30_000, answers: 3 } as const;

/** Reserved tokens whose key never came back (deleted meanwhile) are forgotten this long after their slot. */
const PREPAID_GRACE_MS = 60_000;

/**
 * One endpoint's gates, in the order a call meets them: the pause a 429's Retry-After asked for (the account
 * waits as a whole), the breaker (is the service there?), then the token bucket (may this account call now?).
 * A caller that may not go now is deferred, never kept waiting: a first call that finds no token gets a slot
 * reserved for its key and comes back for it.
 */
export class CallGates {
  readonly #bucket: TokenBucket;
  readonly #breaker: CircuitBreaker;
  /** Key → when the bucket token reserved for it exists (ms, performance.now()). */
  readonly #prepaid = new Map<string, number>();
  /** The service asked everyone to wait (429 with Retry-After) until then. */
  #pausedUntil = 0;
  /** Since when every answer has been a 429 with Retry-After, and how many (undefined: the last answer was not one). */
  #limited: { readonly since: number; answers: number } | undefined;
  /** The last connection-level failure, reported to those whose calls its breaker holds back. */
  #lastFailure: ServiceFailure | undefined;
  #lastUsed: number;

  constructor(
    private readonly options: CallGateOptions,
    now: number = performance.now(),
  ) {
    this.#bucket = new TokenBucket(options.qps, options.burst);
    this.#breaker = new CircuitBreaker(options.breaker);
    this.#lastUsed = now;
  }

  /** A caller resolved the endpoint at `now`: it is in use, not idle. */
  touch(now: number): void {
    this.#lastUsed = now;
  }

  /** A deferral when no call could go out now (the breaker is open or trying one call at a time). */
  unavailable(description: string, context: CallContext): Deferral | undefined {
    const turned = this.#breaker.wouldTurnAway(context.key, context.wake);
    return turned && !turned.ok ? this.#deferral(turned, description) : undefined;
  }

  /**
   * One call through the gates; `send` makes it, cut off by the signal it is given (it then rejects: a withdrawn call
   * is told from a failed one by the signal being aborted).
   */
  async call(description: string, context: CallContext, send: (signal: AbortSignal | undefined) => Promise<ServiceResult>): Promise<CallResult> {
    this.options.beforeCall?.();
    const { signal } = context;
    signal?.throwIfAborted();
    const now = performance.now();
    this.#lastUsed = now;
    if (!context.followUp && now < this.#pausedUntil) {
      return {
        ok: false,
        deferred: {
          why: 'throttled',
          afterMs: this.options.spreadThrottled(this.#pausedUntil - now),
          message: `${description}: the service asked to wait (HTTP 429)`,
        },
      };
    }
    const admission = this.#breaker.admit(context.key, context.wake, context.followUp);
    if (!admission.ok) return { ok: false, deferred: this.#deferral(admission, description) };
    if (!context.followUp) {
      const wait = this.#reservation(context.key, now);
      if (wait > 0) {
        this.#breaker.release();
        return { ok: false, deferred: { why: 'throttled', afterMs: wait, message: `${description}: waiting for the account's rate limit` } };
      }
    } else {
      // A follow-up goes now and is charged to the bucket: later first calls wait for it.
      this.#bucket.reserve();
    }
    let result: ServiceResult;
    try {
      result = await send(signal);
    } catch (err) {
      if (signal?.aborted) {
        // Withdrawn by us, not failed by the service: its slot is freed without a verdict.
        this.#breaker.release();
        throw signal.reason;
      }
      this.#breaker.record('failure');
      throw err;
    }
    const failed = connectionLevelFailure(result);
    this.#breaker.record(failed ? 'failure' : 'success');
    if (failed && !result.ok) this.#lastFailure = result.failure;
    const retryAfterMs = !result.ok && result.failure.kind === 'rate-limited' ? result.failure.retryAfterMs : undefined;
    if (retryAfterMs === undefined) {
      this.#limited = undefined;
      // An answer that raced the abort is the service's truth (recorded above) but no longer ours to act on.
      signal?.throwIfAborted();
      return result;
    }
    // The account is limited, not this key: every caller of the endpoint waits.
    const answeredAt = performance.now();
    this.#pausedUntil = Math.max(this.#pausedUntil, answeredAt + retryAfterMs);
    this.#limited ??= { since: answeredAt, answers: 0 };
    this.#limited.answers += 1;
    signal?.throwIfAborted();
    const { since, answers } = this.#limited;
    const persistent = this.options.persistentRateLimit ?? PERSISTENT_RATE_LIMIT;
    if (answeredAt - since >= persistent.ms && answers >= persistent.answers) return result;
    const message = `${description}: the service asked to wait (HTTP 429)`;
    return { ok: false, deferred: { why: 'throttled', afterMs: this.options.spreadThrottled(retryAfterMs), message } };
  }

  /** Forgets the reservations of keys that never came back for their slot (deleted meanwhile). */
  forgetAbandoned(now: number): void {
    for (const [key, due] of this.#prepaid) if (due + PREPAID_GRACE_MS < now) this.#prepaid.delete(key);
  }

  /** Unused for `idleMs`, with nothing it would lose by being dropped: no breaker state, no slot kept for a key. */
  isIdle(now: number, idleMs: number): boolean {
    return now - this.#lastUsed > idleMs && this.#breaker.idle && this.#prepaid.size === 0;
  }

  /** Stops the breaker's timers; the gates are not used again. */
  dispose(): void {
    this.#breaker.dispose();
  }

  #deferral(admission: Exclude<Admission, { ok: true }>, description: string): Deferral {
    return admission.why === 'open'
      ? // No counts or times in the message: it goes into status, and an unchanged status is not written again.
        {
          why: 'paused',
          afterMs: admission.afterMs,
          message:
            'not sent: calls are paused after failures in a row (one call probes the service from time to time; every UserGroup resumes once one succeeds)',
          lastFailure: this.#lastFailure,
        }
      : { why: 'busy', afterMs: admission.afterMs, message: `${description} is failing; one call at a time until one succeeds` };
  }

  /** 0 when the key may call now (a token now, or one it reserved earlier that is due); else ms to wait. */
  #reservation(key: string, now: number): number {
    const due = this.#prepaid.get(key);
    if (due !== undefined) {
      // Woken or re-queued early: the slot it holds is still ahead; no second reservation.
      if (due > now + 5) return due - now;
      this.#prepaid.delete(key);
      return 0;
    }
    const wait = this.#bucket.reserve();
    if (wait > 0) this.#prepaid.set(key, now + wait);
    return wait;
  }
}

/**
 * Failures that say something about the service as a whole (no answer, 5xx, garbage, a 429 without a
 * Retry-After) rather than about this request: they feed the breaker. A refusal (4xx, success 0, 401) is
 * an answer: the service is there.
 */
function connectionLevelFailure(result: ServiceResult): boolean {
  if (result.ok) return false;
  switch (result.failure.kind) {
    case 'unavailable':
    case 'invalid-response':
      return true;
    case 'rate-limited':
      return result.failure.retryAfterMs === undefined;
    case 'rejected':
    case 'unauthorized':
      return false;
  }
}
