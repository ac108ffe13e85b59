// The one retry table: the delays, floors and jitter of a key's requeue, the queue's backoff figures included (pure
// data; worker.ts's RetryPolicy runs the backoff). The breaker, the 429 pause and the informers keep their own.
/**
 * What the work queue does with a key after its reconcile, in figures: the table that requeue
 * (reconcile-contract.ts, like kube-rs's `error_policy` and the switch in controller-runtime's reconcileHandler) reads.
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
  | 'restart-refused'
  /** The apiserver refused to list or prompt the consenting Pods (RBAC, the chart's admission policy, an outage). */
  | 'prompt-refused';

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
  'prompt-refused': { retryClass: 'persistent', atLeastMs: 0 },
};

/** A wake-up due by the clock comes no sooner than this: clocks differ, and a schedule is never early. */
export const CLOCK_WAKE_FLOOR_MS = 1_000;
/**
 * Keys a Retry-After turned away come back at its end plus up to this much, as the connection spreads the keys it
 * defers (THROTTLED_SPREAD_MS): else the key that met the 429 would take every next slot before them.
 */
export const RETRY_AFTER_SPREAD_MS = 1_000;
/** Calls a connection defers while its account waits out a 429 come back at its end plus up to this much (service/call-gates.ts). */
export const THROTTLED_SPREAD_MS = 1_000;
/** How long to wait before trying a failed deletion rotation again (capped by what is left of the limit). */
export const DELETION_RETRY_MS = 5_000;
/** The shortest wait there is: come back at once, and let the next pass decide (a deletion whose limit passed). */
export const IMMEDIATE_RETRY_MS = 1;

/** `afterMs` plus up to `spreadMs` at random: keys deferred together do not all come back at once. */
export function jittered(afterMs: number, spreadMs: number, random: () => number = Math.random): number {
  return afterMs + random() * spreadMs;
}
