// The circuit breaker per service connection: closed, open or half-open, with jittered, doubling open intervals.
/**
 * "Is the service there at all?", per connection (one URL and API key). Per-call failures are the work
 * queue's business (quick per-key retries); a connection whose calls keep failing is this module's: it
 * stops sending, so an outage costs the service nothing and a black-holed address holds no worker.
 *
 *  - closed: calls go out. While the last two or more calls failed (or none has succeeded yet), only one
 *    is in flight at a time: a connection that hangs holds at most one worker, not all of them.
 *  - open: after `threshold` connection-level failures in a row spanning at least `minFailingMs` with no
 *    success in between, nothing goes out for the open interval (doubling per failed probe, from
 *    `baseOpenMs` to `maxOpenMs`, jittered so that replicas and connections do not probe in step).
 *  - half-open: then one call goes out as a probe; success closes the breaker, failure opens it again.
 *
 * Callers turned away leave a wake-up callback: it runs when a call may go out again (a slot freed,
 * the probe's turn, the breaker closed), so nobody polls. Pure: the clock and randomness are injected.
 */
export interface CircuitBreakerOptions {
  readonly threshold?: number;
  readonly minFailingMs?: number;
  readonly baseOpenMs?: number;
  readonly maxOpenMs?: number;
  readonly now?: () => number;
  readonly random?: () => number;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

export type Admission =
  | { readonly ok: true; readonly probe: boolean }
  | {
      readonly ok: false;
      /** open: paused after failures; busy: another call to this failing connection is in flight. */
      readonly why: 'open' | 'busy';
      /** When to look again at the latest, should no wake-up come first (ms from now). */
      readonly afterMs: number;
      /** Connection-level failures in a row so far. */
      readonly failures: number;
    };

export const BREAKER_DEFAULTS = { threshold: 3, minFailingMs: 5_000, baseOpenMs: 2_000, maxOpenMs: 30_000 } as const;

const BATON_MS = 1_000;

export class CircuitBreaker {
  readonly #threshold: number;
  readonly #minFailingMs: number;
  readonly #baseOpenMs: number;
  readonly #maxOpenMs: number;
  readonly #now: () => number;
  readonly #random: () => number;

  #state: BreakerState = 'closed';
  #failures = 0;
  #failingSince: number | undefined;
  #everSucceeded = false;
  #inFlight = 0;
  #openUntil = 0;
  #openMs: number;
  #reopenTimer: ReturnType<typeof setTimeout> | undefined;
  #batonTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #waiters = new Map<string, () => void>();

  constructor(options: CircuitBreakerOptions = {}) {
    this.#threshold = options.threshold ?? BREAKER_DEFAULTS.threshold;
    this.#minFailingMs = options.minFailingMs ?? BREAKER_DEFAULTS.minFailingMs;
    this.#baseOpenMs = options.baseOpenMs ?? BREAKER_DEFAULTS.baseOpenMs;
    this.#maxOpenMs = options.maxOpenMs ?? BREAKER_DEFAULTS.maxOpenMs;
    this.#now = options.now ?? (() => performance.now());
    this.#random = options.random ?? Math.random;
    this.#openMs = this.#baseOpenMs;
  }

  get state(): BreakerState {
    return this.#state;
  }

  get failures(): number {
    return this.#failures;
  }

  /** Callers waiting for a wake-up (for tests and metrics). */
  get waiting(): number {
    return this.#waiters.size;
  }

  get idle(): boolean {
    return this.#inFlight === 0 && this.#waiters.size === 0;
  }

  /**
   * May a call go out now? If so the caller must report its outcome with record(). If not, `wake` (keyed
   * by the caller, so one caller waits once) runs when it is worth asking again.
   */
  admit(caller: string, wake: () => void, followUp = false): Admission {
    const now = this.#now();
    if (this.#state === 'open') {
      if (now < this.#openUntil) return this.#turnAway(caller, wake, 'open', this.#openUntil - now);
      this.#state = 'half-open';
    }
    // A follow-up (the POST after a rotation intent was stored) finishes work begun on a good answer;
    // holding it back would only cost a recovery PUT later. It still never goes to an open breaker.
    const single = !(followUp && this.#state === 'closed') && (this.#state === 'half-open' || this.#failures >= 2 || !this.#everSucceeded);
    if (single && this.#inFlight > 0) return this.#turnAway(caller, wake, this.#state === 'half-open' ? 'open' : 'busy', this.#baseOpenMs);
    this.#inFlight += 1;
    this.#waiters.delete(caller);
    this.#clearBaton();
    return { ok: true, probe: this.#state === 'half-open' };
  }

  /**
   * Would a call be turned away now? Then the caller waits (its wake-up registered) as admit() would make it;
   * otherwise nothing happens and no slot is taken: for work that should not even start (a claim written)
   * while the connection cannot be called.
   */
  wouldTurnAway(caller: string, wake: () => void): Admission | undefined {
    const now = this.#now();
    if (this.#state === 'open' && now < this.#openUntil) return this.#turnAway(caller, wake, 'open', this.#openUntil - now);
    // A new connection's first call in flight is no reason to hold others back here: only one that is failing.
    const failing = this.#state !== 'closed' || this.#failures >= 2 || (!this.#everSucceeded && this.#failures >= 1);
    if (failing && this.#inFlight > 0) return this.#turnAway(caller, wake, this.#state === 'closed' ? 'busy' : 'open', this.#baseOpenMs);
    return undefined;
  }

  /**
   * The outcome of an admitted call: 'success' for any answer that shows the service is there (even a
   * refusal of this request), 'failure' for a connection-level failure (no answer, 5xx, garbage).
   */
  record(outcome: 'success' | 'failure'): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
    const now = this.#now();
    if (outcome === 'success') {
      this.#everSucceeded = true;
      this.#failures = 0;
      this.#failingSince = undefined;
      this.#openMs = this.#baseOpenMs;
      this.#state = 'closed';
      this.#wakeAll();
      return;
    }
    this.#failures += 1;
    this.#failingSince ??= now;
    if (this.#state === 'half-open') {
      this.#open(now, Math.min(this.#maxOpenMs, this.#openMs * 2));
    } else if (this.#failures >= this.#threshold && now - this.#failingSince >= this.#minFailingMs) {
      this.#open(now, this.#baseOpenMs);
    } else {
      // Still closed but failing: one call at a time, so let the next waiter try.
      this.#wakeOne();
    }
  }

  /**
   * An admitted caller that ends without a verdict: it did not make its call after all (rate-limited), or
   * withdrew it before an answer came (shutdown, lost leadership). Frees its slot; says nothing of the service.
   */
  release(): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
    if (this.#state !== 'closed' || this.#failures >= 2 || !this.#everSucceeded) this.#wakeOne();
  }

  /** Stops the reopen timer (the connection is being dropped). */
  dispose(): void {
    if (this.#reopenTimer !== undefined) clearTimeout(this.#reopenTimer);
    this.#reopenTimer = undefined;
    this.#wakeAll();
  }

  #clearBaton(): void {
    if (this.#batonTimer !== undefined) clearTimeout(this.#batonTimer);
    this.#batonTimer = undefined;
  }

  #open(now: number, intervalMs: number): void {
    this.#state = 'open';
    this.#openMs = intervalMs;
    // ±20 %: replicas and connections that failed together do not probe together.
    const jittered = intervalMs * (0.8 + 0.4 * this.#unit());
    this.#openUntil = now + jittered;
    if (this.#reopenTimer !== undefined) clearTimeout(this.#reopenTimer);
    // At the end of the interval one waiter becomes the probe; the rest follow its outcome.
    this.#reopenTimer = setTimeout(
      () => {
        this.#reopenTimer = undefined;
        this.#wakeOne();
      },
      Math.max(0, this.#openUntil - this.#now()),
    );
    this.#reopenTimer.unref();
  }

  #turnAway(caller: string, wake: () => void, why: 'open' | 'busy', afterMs: number): Admission {
    this.#waiters.set(caller, wake);
    // The wake-up is the normal way back; the delay is a safety net, spread so stragglers do not bunch.
    return { ok: false, why, afterMs: Math.max(afterMs, 1) + this.#maxOpenMs * this.#unit(), failures: this.#failures };
  }

  /**
   * Hands the one slot to the longest waiter. A woken caller may find it has nothing to send after all;
   * if no call is admitted within BATON_MS the next waiter is woken, so the slot is never left idle.
   */
  #wakeOne(): void {
    this.#clearBaton();
    const first = this.#waiters.entries().next();
    if (first.done) return;
    const [caller, wake] = first.value;
    this.#waiters.delete(caller);
    if (this.#waiters.size > 0) {
      this.#batonTimer = setTimeout(() => {
        this.#batonTimer = undefined;
        if (this.#inFlight === 0 && !(this.#state === 'open' && this.#now() < this.#openUntil)) this.#wakeOne();
      }, BATON_MS);
      this.#batonTimer.unref();
    }
    wake();
  }

  #wakeAll(): void {
    this.#clearBaton();
    const wakes = [...this.#waiters.values()];
    this.#waiters.clear();
    for (const wake of wakes) wake();
  }

  #unit(): number {
    const r = this.#random();
    return Number.isFinite(r) ? Math.min(1, Math.max(0, r)) : 0;
  }
}
