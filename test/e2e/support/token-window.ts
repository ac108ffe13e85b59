// The dead-token window of each rotation, from when the service rotated and what the consumers' Pods logged.

/** A token the service issued: when its POST was answered and the first 16 hex digits of its SHA-256. */
export interface Issued {
  readonly at: number;
  readonly sha: string;
}

/** What one consumer Pod logged: each token it began to use (time, sha prefix) and when it stopped, if it did. */
export interface PodTimeline {
  readonly pod: string;
  readonly seen: readonly Issued[];
  readonly stoppedAt?: number;
}

/** One rotation's window: from its POST's answer to the first Pod holding a live token, and to the last. */
export interface TokenWindow {
  readonly rotation: number;
  readonly firstMs: number;
  readonly lastMs: number;
}

/**
 * For rotation k (tokens[k], k ≥ 1): a Pod holds a live token from the first entry it logged of tokens[k] or a later
 * one. `firstMs`: from the POST's answer to the first Pod doing so; `lastMs`: to the moment no Pod holds an older
 * token any more (each such Pod logged a newer token or stopped). A Pod that holds an old token at the end of its
 * timeline without stopping leaves the window open: that is an error, as the measurement is incomplete.
 */
export function tokenWindows(tokens: readonly Issued[], pods: readonly PodTimeline[]): TokenWindow[] {
  const result: TokenWindow[] = [];
  for (let k = 1; k < tokens.length; k++) {
    const posted = tokens[k]!.at;
    const live = new Set(tokens.slice(k).map((t) => t.sha));
    let first = Infinity;
    let last = posted;
    for (const pod of pods) {
      const startedAt = pod.seen[0]?.at ?? Infinity;
      if ((pod.stoppedAt ?? Infinity) <= posted) continue;
      const liveFrom = pod.seen.find((e) => live.has(e.sha))?.at;
      if (liveFrom !== undefined) first = Math.min(first, Math.max(liveFrom, posted));
      // Held an old token at some time after the POST: from the POST (or its start) until live or stopped.
      const heldOld = pod.seen.some((e, i) => !live.has(e.sha) && (pod.seen[i + 1]?.at ?? Infinity) > posted);
      if (!heldOld) continue;
      const end = Math.min(liveFrom ?? Infinity, pod.stoppedAt ?? Infinity);
      if (end === Infinity) throw new Error(`Pod ${pod.pod} still holds a token older than rotation ${k} (${tokens[k]!.sha}) at the end of its log`);
      if (end > Math.max(startedAt, posted)) last = Math.max(last, end);
    }
    if (first === Infinity) throw new Error(`no Pod logged the token of rotation ${k} (${tokens[k]!.sha}) or a later one`);
    result.push({ rotation: k, firstMs: first - posted, lastMs: Math.max(last, first) - posted });
  }
  return result;
}

/** Nearest-rank percentile (p in 0..100) of a non-empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('no values');
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** p50 / p99 / max of one window edge, in seconds with one decimal, as the docs' tables give them. */
export function summary(values: readonly number[]): { p50: number; p99: number; max: number } {
  const s = (ms: number): number => Math.round(ms / 100) / 10;
  return { p50: s(percentile(values, 50)), p99: s(percentile(values, 99)), max: s(Math.max(...values)) };
}
