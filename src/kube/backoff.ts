// Per-key exponential backoff with jitter, for the work queue's retries (client-go's item rate limiter).
/**
 * Decides how long a key waits before its next retry. The work queue only needs this much; `C` names
 * classes of failure that count separately (the controller's retry policy has two).
 */
export interface RateLimiter<C extends string = string> {
  /** Records one more failure of the key (in its class) and returns the delay in ms before its retry. */
  when(key: string, retryClass?: C): number;
  /** Clears the key's failure history (call it after a successful reconcile). */
  forget(key: string): void;
}

/** A source of numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

export interface ItemBackoffOptions {
  /** Delay after the first failure, before jitter; default 5 ms (client-go's default). */
  baseMs?: number;
  /** Upper bound of every delay, jitter included; default 1 minute. */
  capMs?: number;
  /** Injectable for tests; default Math.random. */
  random?: RandomSource;
}

const DEFAULT_BACKOFF_BASE_MS = 5;
/**
 * One minute, not client-go's 1000 s: once the service is back, every group converges within a minute.
 * Retrying more often costs the service nothing extra, as each account's token bucket bounds the calls.
 */
export const DEFAULT_BACKOFF_CAP_MS = 60 * 1000;

/**
 * Per-key exponential backoff with "equal jitter", like client-go's
 * ItemExponentialFailureRateLimiter plus jitter:
 *
 *   nominal = min(capMs, baseMs * 2^failures)      failures = count before this call
 *   delay   = nominal * (1 - r / 2)                 r = random() in [0, 1)
 *
 * so a delay lies in [nominal / 2, nominal] and never exceeds capMs. Jitter
 * matters because an outage of the service fails every key at the same moment;
 * without it they would all retry in lockstep. Keeping at least half of the
 * nominal delay (rather than "full jitter" down to 0) stops a persistently
 * failing key from retrying in a tight loop. With random = () => 0 the delays
 * are exactly the nominal ones, which keeps tests deterministic.
 */
export class ItemBackoff implements RateLimiter {
  readonly #baseMs: number;
  readonly #capMs: number;
  readonly #random: RandomSource;
  readonly #failures = new Map<string, number>();

  constructor(options: ItemBackoffOptions = {}) {
    const baseMs = options.baseMs ?? DEFAULT_BACKOFF_BASE_MS;
    const capMs = options.capMs ?? DEFAULT_BACKOFF_CAP_MS;
    if (!Number.isFinite(baseMs) || baseMs <= 0) {
      throw new RangeError(`backoff base must be a positive number of ms, got ${baseMs}`);
    }
    if (!Number.isFinite(capMs) || capMs < baseMs) {
      throw new RangeError(`backoff cap must be a finite number of ms >= the base (${baseMs}), got ${capMs}`);
    }
    this.#baseMs = baseMs;
    this.#capMs = capMs;
    this.#random = options.random ?? Math.random;
  }

  when(key: string): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    return this.#nominal(failures) * (1 - this.#unitRandom() / 2);
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  #nominal(failures: number): number {
    // 2 ** failures becomes Infinity after ~1024 failures; min() still yields the cap.
    return Math.min(this.#capMs, this.#baseMs * 2 ** failures);
  }

  // A faulty injected source must not push a delay past the cap or below half of it.
  #unitRandom(): number {
    const r = this.#random();
    return Number.isFinite(r) ? Math.min(1, Math.max(0, r)) : 0;
  }
}
