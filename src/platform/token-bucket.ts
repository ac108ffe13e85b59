// A token bucket that never blocks: take a token now, or reserve the next one and learn when it exists.
/**
 * Limits a rate (calls toward one service connection, scrapes, one namespace's Warnings): up to `burst` at once, refilled at `qps`
 * per second. Nobody waits on it: tryTake() answers now, and reserve() books the next token and says when
 * it exists, so a caller can come back then instead of holding a worker while it waits.
 */
export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;

  /**
   * `now` returns milliseconds; tests pass a fake clock. `tokens`: the balance to start from (default full; less
   * when taking on what another process spent, negative while it owes reservations).
   */
  constructor(qps: number, burst: number, now: () => number = () => performance.now(), tokens: number = burst) {
    if (!Number.isFinite(qps) || qps <= 0) {
      throw new RangeError(`qps must be a positive finite number, got ${qps}`);
    }
    if (!Number.isSafeInteger(burst) || burst < 1) {
      throw new RangeError(`burst must be a positive integer, got ${burst}`);
    }
    this.#qps = qps;
    this.#burst = burst;
    this.#now = now;
    this.#tokens = Math.min(burst, tokens);
    this.#last = now();
  }

  /** Takes a token if one is available right now (none is while reservations are outstanding). */
  tryTake(): boolean {
    this.#refill();
    if (this.#tokens < 1) {
      return false;
    }
    this.#tokens -= 1;
    return true;
  }

  /**
   * Reserves the next token without waiting: the balance may go negative (a debt later reservations
   * queue behind), and the result is how many ms until the reserved token exists (0: now).
   */
  reserve(): number {
    this.#refill();
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens * 1000) / this.#qps);
  }

  /** Tokens available now (negative while reservations are outstanding), for tests and metrics. */
  get available(): number {
    this.#refill();
    return this.#tokens;
  }

  #refill(): void {
    const now = this.#now();
    // A clock that steps backwards must not drain the bucket.
    const elapsed = Math.max(0, now - this.#last);
    this.#last = now;
    this.#tokens = Math.min(this.#burst, this.#tokens + (elapsed * this.#qps) / 1000);
  }
}
