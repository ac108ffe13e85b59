/**
 * A token bucket per namespace, for what one tenant's objects may cost everyone: a namespace that floods the
 * operator with refused or failing objects spends its own budget only, and other namespaces keep theirs (the
 * operator's writes share the apiserver with every tenant). Buckets refill over time; a full bucket is forgotten,
 * so the map holds only namespaces that spent recently.
 */
export interface NamespaceBudgetOptions {
  /** Spent at once, at most. */
  readonly burst: number;
  /** Refilled per second. */
  readonly perSecond: number;
}

export class NamespaceBudget {
  private readonly spent = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly options: NamespaceBudgetOptions,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one unit of the namespace's budget; false when none is left. */
  take(namespace: string): boolean {
    const now = this.now();
    const bucket = this.spent.get(namespace);
    const tokens = bucket ? Math.min(this.options.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.options.perSecond) : this.options.burst;
    if (tokens < 1) {
      if (bucket) Object.assign(bucket, { tokens, at: now });
      return false;
    }
    this.spent.set(namespace, { tokens: tokens - 1, at: now });
    if (this.spent.size > 1024) this.forgetFull(now);
    return true;
  }

  private forgetFull(now: number): void {
    for (const [namespace, bucket] of this.spent) {
      if (bucket.tokens + ((now - bucket.at) / 1000) * this.options.perSecond >= this.options.burst) this.spent.delete(namespace);
    }
  }
}
