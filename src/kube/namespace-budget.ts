// A token bucket per namespace, forgotten once full, so one tenant's objects cannot spend every namespace's budget.
import { TokenBucket } from '../platform/token-bucket.js';

/**
 * A token bucket per namespace, for what one tenant's objects may cost everyone: a namespace that floods the
 * operator with refused or failing objects spends its own budget only, and other namespaces keep theirs (the
 * operator's writes share the apiserver with every tenant). A namespace that has not spent for as long as its
 * bucket takes to refill is forgotten (its bucket would be full again), so the map holds only recent spenders.
 */
export interface NamespaceBudgetOptions {
  /** Spent at once, at most. */
  readonly burst: number;
  /** Refilled per second (> 0). */
  readonly perSecond: number;
}

/** Namespaces remembered before idle ones are swept. */
const SWEEP_ABOVE = 1024;

export class NamespaceBudget {
  readonly #buckets = new Map<string, { readonly bucket: TokenBucket; lastSpent: number }>();
  readonly #refillMs: number;

  constructor(
    private readonly options: NamespaceBudgetOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.#refillMs = (options.burst / options.perSecond) * 1000;
  }

  /** Takes one unit of the namespace's budget; false when none is left. */
  take(namespace: string): boolean {
    const now = this.now();
    let entry = this.#buckets.get(namespace);
    if (!entry) {
      entry = { bucket: new TokenBucket(this.options.perSecond, this.options.burst, this.now), lastSpent: now };
      this.#buckets.set(namespace, entry);
      if (this.#buckets.size > SWEEP_ABOVE) this.#forgetIdle(now);
    }
    entry.lastSpent = now;
    return entry.bucket.tryTake();
  }

  /** Namespaces remembered now, for tests. */
  get size(): number {
    return this.#buckets.size;
  }

  #forgetIdle(now: number): void {
    for (const [namespace, entry] of this.#buckets) {
      if (now - entry.lastSpent >= this.#refillMs) this.#buckets.delete(namespace);
    }
  }
}
