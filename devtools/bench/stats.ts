/** Nearest-rank percentile (p in 0..100) of unsorted values; undefined for none. */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

/** Runs `task` over 0..n-1 with at most `parallelism` in flight; resolves when all are done. */
export async function forEachBounded(n: number, parallelism: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallelism, n) }, worker));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves `check()`'s first defined value, polling every `intervalMs`; rejects after `timeoutMs`. */
export async function pollUntil<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs: number, intervalMs = 100): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
    await sleep(intervalMs);
  }
}
