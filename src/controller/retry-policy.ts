import { ItemBackoff, type RandomSource, type RateLimiter } from '../kube/backoff.js';

/**
 * What the work queue does with a key after its reconcile: the one place that turns an outcome into a
 * requeue, like kube-rs's `error_policy` and the switch in controller-runtime's reconcileHandler.
 *
 * "The service is down" is not a per-key matter: the connection's breaker (service/circuit-breaker.ts) and
 * token bucket handle it and say when the key may come back (`wait`). What is left per key is "this call
 * failed", in two classes, each counting its own failures (a run of transient failures never makes a
 * refusal wait minutes, and the other way round); both are forgotten after a success:
 *
 *  - transient (no answer, 5xx, a garbled answer, a lost race on our own writes, a reconcile that threw):
 *    100 ms doubling to a 2 s cap, jittered to [d/2, d]. A rotation needs up to three good calls in a row
 *    (PUT after an uncertain answer, POST, and the Secret write); if a share f of calls fails at random,
 *    an attempt succeeds with q ≥ (1-f)^2 (the Secret write is ours), and k attempts miss with (1-q)^k.
 *    At f = 0.47 (the reliability scenario's mix: 20 % 5xx, 16 % bad answers, 12 % echo faults),
 *    q ≈ 0.28; 30 s hold ≥ 14 attempts at ≤ 2 s each plus the call, so a rotation misses 30 s with
 *    p ≤ 0.72^14 ≈ 1 %, and misses 120 s (≥ 50 attempts) with p < 1e-7. The load this adds is bounded
 *    by the account's token bucket, not by the backoff, and an outage opens the breaker instead.
 *  - persistent (the service refused this request: 4xx, success 0): it will refuse again until the spec
 *    changes (which queues the key anyway), so 1 s doubling to 5 minutes; a one-off refusal costs 1 s.
 *
 * Some causes also have a floor: nothing watched tells us when they are fixed, so the key polls slowly.
 */
export type RetryClass = 'transient' | 'persistent';

export const RETRY_TRANSIENT = { baseMs: 100, capMs: 2_000 } as const;
export const RETRY_PERSISTENT = { baseMs: 1_000, capMs: 5 * 60_000 } as const;

/** Why a reconcile did not finish. */
export type FailureCause =
  /** A service call failed: no answer, 5xx, a garbled answer, a 429 without Retry-After. */
  | 'call-failed'
  /** Our write met a newer version, or a rival's claim or Secret: decided again on what won. */
  | 'lost-race'
  /** The reconcile threw (a bug), or was stopped by shutdown or lost leadership. */
  | 'crashed'
  /** The service refused this very request (4xx, success 0). */
  | 'request-refused'
  /** The service refused the API key (401/403). */
  | 'key-refused'
  /** The apiserver refused the token Secret (validation, quota, RBAC). */
  | 'secret-write-refused'
  /** A Secret of that name exists and is not ours. */
  | 'secret-taken'
  /** The connection cannot be resolved yet (its API-key Secret is missing: not watched). */
  | 'connection-unresolved'
  /** The apiserver refused to restart a spec.rolloutRestartTargets workload (RBAC, validation, an outage). */
  | 'restart-refused';

/**
 * When a converged UserGroup needs its next reconcile: wall-clock times at which something falls due (the periodic
 * resync, a scheduled rotation), and slots a global cap keeps for this key.
 */
export interface Wake {
  /** Milliseconds since the epoch. */
  readonly dueAt: readonly number[];
  /** Milliseconds from now: the slot is the key's at that very time only. */
  readonly slotInMs: readonly number[];
}

/** What a reconcile came to, like controller-runtime's Result / error and kube-rs's Action. */
export type ReconcileResult =
  /** Converged; come back at the wake-up, if any. */
  | { readonly kind: 'done'; readonly wake?: Wake }
  /** Not now: the connection said when (its rate limit, its breaker). Not a failure of the key. */
  | { readonly kind: 'wait'; readonly afterMs: number }
  /** The service answered 429 with Retry-After: the whole account waits that long (connections.ts). */
  | { readonly kind: 'retry-after'; readonly afterMs: number }
  | { readonly kind: 'failed'; readonly cause: FailureCause };

/** The retry of each cause: which backoff counts it, and a floor under the delay. */
export const RETRY_TABLE: Readonly<Record<FailureCause, { readonly retryClass: RetryClass; readonly atLeastMs: number }>> = {
  'call-failed': { retryClass: 'transient', atLeastMs: 0 },
  'lost-race': { retryClass: 'transient', atLeastMs: 0 },
  crashed: { retryClass: 'transient', atLeastMs: 0 },
  'request-refused': { retryClass: 'persistent', atLeastMs: 0 },
  // A key the service refused stays refused until someone rotates it: a minute between tries.
  'key-refused': { retryClass: 'transient', atLeastMs: 60_000 },
  'secret-write-refused': { retryClass: 'transient', atLeastMs: 30_000 },
  'secret-taken': { retryClass: 'transient', atLeastMs: 30_000 },
  'connection-unresolved': { retryClass: 'transient', atLeastMs: 10_000 },
  // Nothing watched says when RBAC or the workload is fixed: the persistent backoff, up to 5 minutes.
  'restart-refused': { retryClass: 'persistent', atLeastMs: 0 },
};

/** What the queue does with the key. */
export type Requeue =
  /** Forget the key's failures; add it again after `afterMs` if given. */
  | { readonly kind: 'forget'; readonly afterMs?: number }
  /** One more failure of its class: the queue's backoff, but not sooner than `atLeastMs`. */
  | { readonly kind: 'backoff'; readonly retryClass: RetryClass; readonly atLeastMs: number };

/** A wake-up due by the clock comes no sooner than this: clocks differ, and a schedule is never early. */
const CLOCK_WAKE_FLOOR_MS = 1_000;
/**
 * Keys a Retry-After turned away come back at its end plus up to this much, as the connection spreads the keys it
 * defers (connections.ts): else the key that met the 429 would take every next slot before them.
 */
const RETRY_AFTER_SPREAD_MS = 1_000;

/** The one switch from a reconcile's result to what the queue does with its key. `now`: ms since the epoch. */
export function requeueFor(result: ReconcileResult, now: number, random: () => number = Math.random): Requeue {
  switch (result.kind) {
    case 'done': {
      const afterMs = result.wake && wakeAfterMs(result.wake, now);
      return afterMs === undefined ? { kind: 'forget' } : { kind: 'forget', afterMs };
    }
    case 'wait':
      // Replaces our guess and resets it, as controller-runtime's RequeueAfter does.
      return { kind: 'forget', afterMs: result.afterMs };
    case 'retry-after':
      return { kind: 'forget', afterMs: result.afterMs + random() * RETRY_AFTER_SPREAD_MS };
    case 'failed':
      return { kind: 'backoff', ...RETRY_TABLE[result.cause] };
  }
}

/** The earliest of the wake-ups: a due time (not sooner than the floor), or a slot (at that very time). */
function wakeAfterMs(wake: Wake, now: number): number | undefined {
  const due = wake.dueAt.length === 0 ? undefined : Math.max(CLOCK_WAKE_FLOOR_MS, Math.min(...wake.dueAt) - now);
  const waits = [...(due === undefined ? [] : [due]), ...wake.slotInMs];
  return waits.length === 0 ? undefined : Math.min(...waits);
}

/** The work queue's rate limiter: one jittered exponential backoff per retry class. */
export class RetryPolicy implements RateLimiter<RetryClass> {
  readonly #transient: ItemBackoff;
  readonly #persistent: ItemBackoff;

  constructor(random?: RandomSource) {
    this.#transient = new ItemBackoff({ ...RETRY_TRANSIENT, ...(random ? { random } : {}) });
    this.#persistent = new ItemBackoff({ ...RETRY_PERSISTENT, ...(random ? { random } : {}) });
  }

  when(key: string, retryClass: RetryClass = 'transient'): number {
    return (retryClass === 'persistent' ? this.#persistent : this.#transient).when(key);
  }

  forget(key: string): void {
    this.#transient.forget(key);
    this.#persistent.forget(key);
  }
}
