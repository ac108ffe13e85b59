// The work queue: controller-runtime's semantics (dedup, in-flight, delayed adds, backoff), fair across namespaces.
import { ItemBackoff, type RateLimiter } from './backoff.js';
import { FairFifo, Fifo, namespaceOf } from './fair-fifo.js';

/**
 * Hooks for controller-runtime's workqueue metrics. Each is optional so a test
 * or a Prometheus adapter implements only what it records:
 * depth → workqueue_depth, add → workqueue_adds_total,
 * retry → workqueue_retries_total, queueLatency → workqueue_queue_duration_seconds,
 * workDuration → workqueue_work_duration_seconds. The two gauges client-go
 * updates from a ticker (unfinished work, longest running processor) are
 * read at scrape time through WorkQueue.unfinishedWorkSeconds() and
 * longestRunningProcessorSeconds() (observability/metrics.ts), so the queue
 * runs no timer of its own.
 */
export interface WorkQueueMetrics {
  /** The number of ready keys, after every change. */
  depth?(n: number): void;
  /** A key was accepted that was not already waiting to be processed. */
  add?(): void;
  /** A delayed add was accepted (addAfter / addRateLimited), as client-go counts retries. */
  retry?(): void;
  /** Seconds a key waited between being added and being handed to a worker. */
  queueLatency?(seconds: number): void;
  /** Seconds between handing a key to a worker and its done(). */
  workDuration?(seconds: number): void;
}

export interface WorkQueueOptions {
  /** Default: ItemBackoff with 5 ms base and 1 min cap. */
  rateLimiter?: RateLimiter;
  metrics?: WorkQueueMetrics;
  /**
   * Milliseconds from a monotonic clock; default performance.now(). It feeds
   * the metrics and the "earlier delay wins" comparison; the delays themselves
   * run on the global setTimeout, so fake timers in tests cover both.
   */
  now?: () => number;
  /** Which flow a key belongs to; ready keys are served round-robin across flows. Default: its namespace. */
  flowOf?: (key: string) => string;
}

/**
 * Delayed adds ordered by due time (a binary min-heap). One timer serves them all, as in client-go's
 * delaying queue: 10,000 keys waiting for their resync would otherwise hold 10,000 timers. Two parallel arrays
 * (due times, keys) rather than an object per entry: every synced UserGroup waits here, and at 100,000 groups an
 * object and a boxed number each would cost ~6 MiB.
 */
class DueHeap {
  #at: number[] = [];
  #keys: string[] = [];

  get size(): number {
    return this.#keys.length;
  }

  peek(): { at: number; key: string } | undefined {
    const key = this.#keys[0];
    return key === undefined ? undefined : { at: this.#at[0] ?? 0, key };
  }

  push(at: number, key: string): void {
    this.#at.push(at);
    this.#keys.push(key);
    for (let i = this.#keys.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if ((this.#at[parent] ?? 0) <= at) break;
      this.#swap(i, parent);
      i = parent;
    }
  }

  pop(): { at: number; key: string } | undefined {
    const top = this.peek();
    const lastAt = this.#at.pop();
    const lastKey = this.#keys.pop();
    if (top === undefined || lastAt === undefined || lastKey === undefined || this.#keys.length === 0) return top;
    this.#at[0] = lastAt;
    this.#keys[0] = lastKey;
    const n = this.#keys.length;
    for (let i = 0; ;) {
      const [l, r] = [2 * i + 1, 2 * i + 2];
      let smallest = i;
      if (l < n && (this.#at[l] ?? 0) < (this.#at[smallest] ?? 0)) smallest = l;
      if (r < n && (this.#at[r] ?? 0) < (this.#at[smallest] ?? 0)) smallest = r;
      if (smallest === i) break;
      this.#swap(i, smallest);
      i = smallest;
    }
    return top;
  }

  clear(): void {
    this.#at = [];
    this.#keys = [];
  }

  #swap(i: number, j: number): void {
    const [at, keys] = [this.#at, this.#keys];
    [at[i], at[j]] = [at[j] ?? 0, at[i] ?? 0];
    [keys[i], keys[j]] = [keys[j] ?? '', keys[i] ?? ''];
  }
}

/**
 * running: normal operation. draining: adds are refused, queued keys are still
 * handed out until nothing is queued or in flight. stopped: nothing more is
 * handed out; keys still queued are dropped (a restarted controller lists
 * every object again, so nothing is lost for good).
 */
type QueueState = 'running' | 'draining' | 'stopped';

/**
 * A work queue of object keys (namespace/name) with the semantics of
 * client-go's TypedRateLimitingInterface:
 *  - a key is queued at most once (adds of a queued key coalesce);
 *  - a key is handed to one worker at a time: an add while it is processed
 *    marks it dirty, and done() queues it again, so the add is never lost;
 *  - ready keys come out round-robin across flows (namespaces), FIFO within a flow, so one namespace's
 *    backlog cannot starve another's; concurrent get() calls get distinct keys;
 *  - addAfter / addRateLimited delay an add, the earlier of two delays winning.
 *
 * Unlike client-go, shutDown() stops handing out keys at once even if some are
 * still queued; shutDownWithDrain() is the graceful variant.
 */
export class WorkQueue {
  readonly #rateLimiter: RateLimiter;
  readonly #metrics: WorkQueueMetrics;
  readonly #now: () => number;

  // Keys that need processing: queued ones plus processed ones added again.
  readonly #dirty = new Set<string>();
  // Dirty keys not being processed, by flow, each flow in the order its keys became ready. Urgent ones
  // (someone is waiting: a rotation request) are served before the rest, fairly among themselves too. A key
  // can sit in both lanes; the second entry is stale once it was handed out, and skipped.
  readonly #ready: FairFifo;
  readonly #urgentLane: FairFifo;
  readonly #urgent = new Set<string>();
  // Key → when it was handed to a worker.
  readonly #processing = new Map<string, number>();
  // Key → when it became dirty, for the queue latency metric.
  readonly #addedAt = new Map<string, number>();
  // Key → when its delayed add is due. #due holds the same entries in time order, plus superseded ones,
  // which are skipped when they come up.
  readonly #delayed = new Map<string, number>();
  readonly #due = new DueHeap();
  #timer: { readonly at: number; readonly handle: ReturnType<typeof setTimeout> } | undefined;
  // Invariant: getters only wait while #ready is empty.
  readonly #getters = new Fifo<(key: string | undefined) => void>();
  readonly #drainWaiters = new Set<() => void>();
  #state: QueueState = 'running';

  constructor(options: WorkQueueOptions = {}) {
    this.#rateLimiter = options.rateLimiter ?? new ItemBackoff();
    this.#metrics = options.metrics ?? {};
    this.#now = options.now ?? (() => performance.now());
    this.#ready = new FairFifo(options.flowOf ?? namespaceOf);
    this.#urgentLane = new FairFifo(options.flowOf ?? namespaceOf);
  }

  /**
   * `urgent`: someone is waiting for this key (a rotation request): it goes ahead of keys that are not,
   * whichever namespace they are in. Fairness between namespaces holds within each lane.
   */
  add(key: string, urgent = false): void {
    if (this.#state !== 'running') return;
    if (urgent && !this.#urgent.has(key)) {
      this.#urgent.add(key);
      // Already waiting in the other lane: move it up (that entry goes stale).
      if (this.#dirty.has(key) && !this.#processing.has(key)) this.#urgentLane.push(key);
    }
    if (this.#dirty.has(key)) return;
    this.#dirty.add(key);
    this.#addedAt.set(key, this.#now());
    if (!this.#processing.has(key)) this.#enqueue(key);
    this.#metrics.add?.();
  }

  /** Adds the key after delayMs; delayMs <= 0 adds it now. */
  addAfter(key: string, delayMs: number): void {
    if (this.#state !== 'running') return;
    this.#metrics.retry?.();
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    // Whole milliseconds: small integers are stored unboxed (a fraction would be a heap number per delayed key).
    const readyAt = Math.ceil(this.#now() + delayMs);
    const pending = this.#delayed.get(key);
    if (pending !== undefined && pending <= readyAt) return;
    this.#delayed.set(key, readyAt);
    this.#due.push(readyAt, key);
    // Superseded entries pile up only when keys keep being re-delayed sooner; then rebuild.
    if (this.#due.size > 2 * this.#delayed.size + 64) {
      this.#due.clear();
      for (const [k, at] of this.#delayed) this.#due.push(at, k);
    }
    this.#arm();
  }

  /** Points the one timer at the earliest delayed add still wanted. */
  #arm(): void {
    let next = this.#due.peek();
    while (next !== undefined && this.#delayed.get(next.key) !== next.at) {
      this.#due.pop();
      next = this.#due.peek();
    }
    if (this.#timer !== undefined && (next === undefined || this.#timer.at > next.at)) {
      clearTimeout(this.#timer.handle);
      this.#timer = undefined;
    }
    if (next === undefined || this.#timer !== undefined) return;
    const handle = setTimeout(() => this.#fire(), Math.max(0, next.at - this.#now()));
    // A queue with only future retries must not keep the process from exiting.
    handle.unref();
    this.#timer = { at: next.at, handle };
  }

  #fire(): void {
    this.#timer = undefined;
    // A timer that fires a little before the clock reads its due time is simply armed again.
    const now = this.#now();
    for (let next = this.#due.peek(); next !== undefined && next.at <= now; next = this.#due.peek()) {
      this.#due.pop();
      if (this.#delayed.get(next.key) !== next.at) continue;
      this.#delayed.delete(next.key);
      this.add(next.key);
    }
    this.#arm();
  }

  /**
   * Adds the key after the rate limiter's delay for it (one more failure, of `retryClass` if the limiter
   * counts classes), but not sooner than `atLeastMs`.
   */
  addRateLimited(key: string, retryClass?: string, atLeastMs = 0): void {
    if (this.#state !== 'running') return;
    this.addAfter(key, Math.max(this.#rateLimiter.when(key, retryClass), atLeastMs));
  }

  /** Resets the key's failure count; call it when the key was processed successfully. */
  forget(key: string): void {
    this.#rateLimiter.forget(key);
  }

  /**
   * The next ready key, waiting for one if needed; undefined once the queue is
   * stopped, or draining with nothing left to hand out. The caller owns the key
   * until it calls done(key).
   */
  get(): Promise<string | undefined> {
    if (this.#state === 'stopped') return Promise.resolve(undefined);
    const key = this.#take();
    if (key !== undefined) return Promise.resolve(key);
    if (this.#state === 'draining' && this.#dirty.size === 0) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** Ends the processing of a key handed out by get(); re-queues it if it was added meanwhile. */
  done(key: string): void {
    const startedAt = this.#processing.get(key);
    if (startedAt === undefined) return;
    this.#processing.delete(key);
    if (this.#dirty.has(key)) this.#enqueue(key);
    this.#settleShutdown();
    this.#metrics.workDuration?.(this.#seconds(startedAt));
  }

  /** Stops at once: pending and future get() resolve undefined, adds are ignored, queued keys dropped. */
  shutDown(): void {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    this.#clearDelayed();
    this.#ready.clear();
    this.#urgentLane.clear();
    this.#urgent.clear();
    this.#dirty.clear();
    this.#addedAt.clear();
    this.#settleShutdown();
    this.#metrics.depth?.(0);
  }

  /**
   * Graceful shutdown: refuses new adds (pending delayed adds are cancelled),
   * keeps handing out keys that are already queued (including keys re-added
   * while in flight), and resolves true once nothing is queued or in flight.
   * If that takes longer than timeoutMs it resolves false and stops the queue
   * as shutDown() does; keys still in flight may finish (done() stays valid).
   */
  shutDownWithDrain(timeoutMs: number): Promise<boolean> {
    if (this.#state === 'running') {
      this.#state = 'draining';
      this.#clearDelayed();
    }
    const drained = new Promise<boolean>((resolve) => {
      if (this.#isDrained()) {
        resolve(true);
        return;
      }
      const finish = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(
        () => {
          this.#drainWaiters.delete(finish);
          resolve(false);
          this.shutDown();
        },
        Math.max(0, timeoutMs),
      );
      // Shutdown must never be the thing that keeps the process alive.
      timer.unref();
      this.#drainWaiters.add(finish);
    });
    this.#settleShutdown();
    return drained;
  }

  isShuttingDown(): boolean {
    return this.#state !== 'running';
  }

  /** Ready keys waiting for a worker. */
  len(): number {
    // Stale entries (a key moved up to the urgent lane) may count once more until skipped.
    return this.#ready.length + this.#urgentLane.length;
  }

  /** Keys handed out and not yet done. */
  inFlight(): number {
    return this.#processing.size;
  }

  /** Sum of the seconds every in-flight key has been processed so far (client-go's unfinished_work_seconds). */
  unfinishedWorkSeconds(): number {
    let total = 0;
    for (const startedAt of this.#processing.values()) total += this.#seconds(startedAt);
    return total;
  }

  /** Seconds the longest-running in-flight key has been processed, 0 if none. */
  longestRunningProcessorSeconds(): number {
    let longest = 0;
    for (const startedAt of this.#processing.values()) longest = Math.max(longest, this.#seconds(startedAt));
    return longest;
  }

  #enqueue(key: string): void {
    const getter = this.#getters.shift();
    if (getter !== undefined) {
      // Hand over synchronously: the key is marked in flight before any other
      // get() can run, which is what keeps two workers off the same key.
      this.#lane(key).push(key);
      getter(this.#take());
      return;
    }
    this.#lane(key).push(key);
    this.#metrics.depth?.(this.len());
  }

  #lane(key: string): FairFifo {
    return this.#urgent.has(key) ? this.#urgentLane : this.#ready;
  }

  #take(): string | undefined {
    let key: string | undefined;
    do {
      key = this.#urgentLane.shift() ?? this.#ready.shift();
      if (key === undefined) return undefined;
    } while (!this.#dirty.has(key) || this.#processing.has(key));
    const now = this.#now();
    this.#dirty.delete(key);
    this.#urgent.delete(key);
    this.#processing.set(key, now);
    const addedAt = this.#addedAt.get(key) ?? now;
    this.#addedAt.delete(key);
    this.#metrics.depth?.(this.len());
    this.#metrics.queueLatency?.((now - addedAt) / 1000);
    return key;
  }

  #isDrained(): boolean {
    return this.#state !== 'running' && this.#dirty.size === 0 && this.#processing.size === 0;
  }

  // Once shutting down, releases getters that can never receive a key and
  // drain waiters whose condition now holds.
  #settleShutdown(): void {
    if (this.#state === 'running') return;
    if (this.#state === 'stopped' || this.#dirty.size === 0) {
      for (let getter = this.#getters.shift(); getter !== undefined; getter = this.#getters.shift()) {
        getter(undefined);
      }
    }
    if (this.#isDrained()) {
      const waiters = [...this.#drainWaiters];
      this.#drainWaiters.clear();
      for (const finish of waiters) finish();
    }
  }

  #clearDelayed(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer.handle);
    this.#timer = undefined;
    this.#delayed.clear();
    this.#due.clear();
  }

  #seconds(since: number): number {
    return (this.#now() - since) / 1000;
  }
}
