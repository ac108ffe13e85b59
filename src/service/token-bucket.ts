interface Waiter {
  resolve: () => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

/**
 * Limits the rate of calls toward one service connection: up to `burst` calls at once, refilled at `qps`
 * per second. Waiters are served strictly in arrival order, and tryTake() never jumps the queue, so a
 * steady stream of callers cannot starve one that is already waiting.
 */
export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;
  readonly #waiters: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;

  /** `now` returns milliseconds; tests pass a fake clock. */
  constructor(qps: number, burst: number, now: () => number = () => performance.now()) {
    if (!Number.isFinite(qps) || qps <= 0) {
      throw new RangeError(`qps must be a positive finite number, got ${qps}`);
    }
    if (!Number.isSafeInteger(burst) || burst < 1) {
      throw new RangeError(`burst must be a positive integer, got ${burst}`);
    }
    this.#qps = qps;
    this.#burst = burst;
    this.#now = now;
    this.#tokens = burst;
    this.#last = now();
  }

  /** Takes a token if one is available right now and nobody is waiting for one. */
  tryTake(): boolean {
    this.#refill();
    if (this.#waiters.length > 0 || this.#tokens < 1) {
      return false;
    }
    this.#tokens -= 1;
    return true;
  }

  /** Resolves once a token is taken; rejects with the signal's reason if it aborts first. */
  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) {
      return Promise.reject(signal.reason);
    }
    if (this.tryTake()) {
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.#remove(waiter);
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#schedule();
    });
  }

  /**
   * Reserves the next token without waiting: the balance may go negative (a debt later reservations
   * queue behind), and the result is how many ms until the reserved token exists (0: now). A caller that
   * gets a delay comes back after it, already paid, instead of holding a worker while it waits.
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

  #remove(waiter: Waiter): void {
    const index = this.#waiters.indexOf(waiter);
    if (index >= 0) {
      this.#waiters.splice(index, 1);
    }
    if (this.#waiters.length === 0 && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #drain(): void {
    this.#timer = undefined;
    this.#refill();
    while (this.#waiters.length > 0 && this.#tokens >= 1) {
      const waiter = this.#waiters.shift();
      if (waiter === undefined) {
        break;
      }
      this.#tokens -= 1;
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve();
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#waiters.length === 0) {
      return;
    }
    this.#refill();
    const deficit = Math.max(0, 1 - this.#tokens);
    // Round up (and wait at least 1 ms) so the timer never fires a hair before the token exists.
    const delay = Math.max(1, Math.ceil((deficit * 1000) / this.#qps));
    this.#timer = setTimeout(() => this.#drain(), delay);
  }
}
