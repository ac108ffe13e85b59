// Cluster-wide caps on scheduled rotations and workload restarts, as evenly spaced reserved slots.
/**
 * A global cap: at most `perMinute`, evenly spaced (a burst of one). On scheduled rotations, so 10,000 tokens
 * falling due together become a steady trickle of calls and Secret writes instead of one spike (requested
 * rotations are not: they have their namespace's budget, request-budget.ts); on workload restarts, so those rotations do not roll
 * every consumer in the cluster at once.
 *
 * A key that must wait is given its own slot, to come back for at that very time: keys told only "the next slot
 * is in 1 s" would all come back together and race for it, leaving the slots between them unused and reconciling
 * every waiting key again and again.
 */
export class RateCap {
  private readonly intervalMs: number;
  /** The earliest time the next unreserved slot may be taken. */
  private nextAt = Number.NEGATIVE_INFINITY;
  /** Slots given to keys that must come back for them, in the order (and so the time) they were given. */
  private readonly reserved = new Map<string, number>();

  constructor(
    perMinute: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.intervalMs = 60_000 / perMinute;
  }

  /** 0: the key may go now (its slot is used up). Otherwise the milliseconds until its slot, kept for it. */
  take(key: string): number {
    return this.reserve(key).inMs;
  }

  /** As take(), and whether this very call gave the slot to wait for (`first`) rather than one kept from before. */
  reserve(key: string): { readonly inMs: number; readonly first: boolean } {
    const now = this.now();
    this.forgetAbandoned(now);
    const slot = this.reserved.get(key);
    if (slot !== undefined) {
      if (now < slot) return { inMs: Math.ceil(slot - now), first: false };
      this.reserved.delete(key);
      return { inMs: 0, first: false };
    }
    const at = Math.max(now, this.nextAt);
    this.nextAt = at + this.intervalMs;
    if (at <= now) return { inMs: 0, first: false };
    this.reserved.set(key, at);
    return { inMs: Math.ceil(at - now), first: true };
  }

  /**
   * A key that never came back for its slot (deleted, or no longer due) lost it: its entry goes a minute after.
   * Slots are given in time order, so the oldest are first in the map.
   */
  private forgetAbandoned(now: number): void {
    for (const [key, slot] of this.reserved) {
      if (slot > now - ABANDONED_AFTER_MS) return;
      this.reserved.delete(key);
    }
  }
}

const ABANDONED_AFTER_MS = 60_000;

/**
 * The caps of one replica from its share of the rates (settings.ts shareOf): fractions stay fractions, so one
 * restart a minute over three replicas is one every three minutes on each. No cap on restarts or prompts where they
 * are off.
 */
export function rateCaps(
  share: { readonly scheduledRotationsPerMinute: number; readonly workloadRestartsPerMinute: number; readonly podPromptsPerMinute: number },
  now?: () => number,
): {
  readonly rotations: RateCap;
  readonly restarts: RateCap | undefined;
  readonly prompts: RateCap | undefined;
} {
  return {
    rotations: new RateCap(share.scheduledRotationsPerMinute, now),
    restarts: share.workloadRestartsPerMinute > 0 ? new RateCap(share.workloadRestartsPerMinute, now) : undefined,
    prompts: share.podPromptsPerMinute > 0 ? new RateCap(share.podPromptsPerMinute, now) : undefined,
  };
}
