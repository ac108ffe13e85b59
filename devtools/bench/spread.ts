/*
 * How the scale phase spreads N UserGroups over M namespaces (pure; unit-tested in test/unit/bench-scale.test.ts).
 * Group g is number ⌊g / M⌋ of namespace g mod M: applying g = 0, 1, 2… touches every namespace in turn, so that
 * with several replicas each has work from the first apply on, and each namespace holds ⌊N / M⌋ or one more.
 */

/** One UserGroup of the spread: its namespace and its number there (ug-00042 is 42). */
export interface Placed {
  readonly namespace: string;
  readonly index: number;
}

/** UserGroups in namespace `j` of `m` when `n` are spread: the first n mod m namespaces get one more. */
export function groupsIn(n: number, m: number, j: number): number {
  return Math.floor(n / m) + (j < n % m ? 1 : 0);
}

/** Where group `g` (0 ≤ g < N) of the spread lives. */
export function placeOf(g: number, namespaces: readonly string[]): Placed {
  const m = namespaces.length;
  return { namespace: namespaces[g % m] ?? '', index: Math.floor(g / m) };
}

/**
 * `count` distinct UserGroups to rotate, spread over the namespaces in turn and evenly within each (with one
 * namespace: every ⌊N / count⌋-th group, as the world's rotation picks them). At most N.
 */
export function rotationTargets(n: number, namespaces: readonly string[], count: number): Placed[] {
  const m = namespaces.length;
  const k = Math.min(count, n);
  return Array.from({ length: k }, (_, i) => {
    const j = i % m;
    // Targets in namespace j; never more than the groups there, as k ≤ n is spread the same way.
    const kj = groupsIn(k, m, j);
    const step = Math.max(1, Math.floor(groupsIn(n, m, j) / kj));
    return { namespace: namespaces[j] ?? '', index: Math.floor(i / m) * step };
  });
}
