/**
 * A global cap: at most `perMinute`, evenly spaced (a burst of one). On scheduled rotations, so 10,000 tokens
 * falling due together become a steady trickle of calls and Secret writes instead of one spike (requested
 * rotations are never capped: someone asked for them); on workload restarts, so those rotations do not roll
 * every consumer in the cluster at once.
 */
export class RateCap {
  private readonly intervalMs: number;
  /** The earliest time the next slot may be taken. */
  private nextAt = Number.NEGATIVE_INFINITY;

  constructor(
    perMinute: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.intervalMs = 60_000 / perMinute;
  }

  /** 0 when a slot was taken now; otherwise how many milliseconds until one is free (nothing is taken). */
  take(): number {
    const now = this.now();
    if (now < this.nextAt) return Math.ceil(this.nextAt - now);
    this.nextAt = Math.max(now, this.nextAt) + this.intervalMs;
    return 0;
  }
}
