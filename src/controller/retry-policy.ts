import { ItemBackoff, type RandomSource } from '../kube/backoff.js';

/**
 * How long a UserGroup waits after its reconcile failed, by what failed. "The service is down" is not a
 * per-key matter: the connection's breaker (service/circuit-breaker.ts) and token bucket handle it, and
 * park keys without a retry schedule of their own. What is left per key is "this call failed":
 *
 *  - transient (no answer, 5xx, a garbled answer, a conflict on our own writes): retried quickly,
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
 * Each class counts its own failures, so a run of transient failures never makes a refusal wait minutes
 * (and the other way round); both are forgotten after a success.
 */
export type RetryClass = 'transient' | 'persistent';

export const RETRY_TRANSIENT = { baseMs: 100, capMs: 2_000 } as const;
export const RETRY_PERSISTENT = { baseMs: 1_000, capMs: 5 * 60_000 } as const;

export class RetryPolicy {
  readonly #transient: ItemBackoff;
  readonly #persistent: ItemBackoff;

  constructor(random?: RandomSource) {
    this.#transient = new ItemBackoff({ ...RETRY_TRANSIENT, ...(random ? { random } : {}) });
    this.#persistent = new ItemBackoff({ ...RETRY_PERSISTENT, ...(random ? { random } : {}) });
  }

  /** Records one more failure of the key in its class; the delay before its retry. */
  delay(key: string, retryClass: RetryClass): number {
    return (retryClass === 'persistent' ? this.#persistent : this.#transient).when(key);
  }

  forget(key: string): void {
    this.#transient.forget(key);
    this.#persistent.forget(key);
  }
}
