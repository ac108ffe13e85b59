// Waits that shutdown can cut short: sleep(), a loop's Pause, and a turn of the event loop.
/**
 * Resolves after `ms`, or at once when `signal` aborts (it never rejects): the waits that shutdown and lost
 * leadership must be able to cut short.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A loop's pause that another part of the program can cut short: stop(), or news the loop must act on now. A cut
 * that arrives while the loop is busy ends its next pause at once, so the news is never left for a whole period.
 */
export class Pause {
  private end: (() => void) | undefined;
  private cutEarly = false;

  for(ms: number): Promise<void> {
    if (this.cutEarly) {
      this.cutEarly = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.end = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.end = done;
    });
  }

  cut(): void {
    if (this.end) this.end();
    else this.cutEarly = true;
  }
}

/**
 * Resolves on the event loop's next turn, after the I/O and timers waiting now. A loop whose awaits all resolve at
 * once (promises already settled: work served from caches) otherwise runs as one chain of microtasks and starves
 * everything else: sockets, timers, the Lease's renewals, /healthz.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
