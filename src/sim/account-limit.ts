// The simulator's per-account rate limit: at most N calls in any 60 s per team, beyond that a 429 with Retry-After.

const WINDOW_MS = 60_000;

/**
 * A sliding window of the calls each team (one API key's account) was let through. Every cluster and shard using
 * one account shares it, as they share the real service's documented limit (180 requests a minute).
 */
export class AccountRateLimit {
  private readonly admitted = new Map<number, number[]>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * 0 (the call goes through, and counts) or the whole seconds until the oldest call in the window leaves it.
   * A limit of 0 means none.
   */
  take(teamId: number, perMinute: number): number {
    if (perMinute <= 0) return 0;
    const now = this.now();
    const calls = this.admitted.get(teamId) ?? [];
    let first = 0;
    while (first < calls.length && (calls[first] ?? 0) <= now - WINDOW_MS) first += 1;
    if (first > 0) calls.splice(0, first);
    if (calls.length >= perMinute) return Math.max(1, Math.ceil(((calls[0] ?? now) + WINDOW_MS - now) / 1000));
    calls.push(now);
    this.admitted.set(teamId, calls);
    return 0;
  }
}
