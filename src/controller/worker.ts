// The workers: take keys off the one work queue, reconcile them, and requeue each as the reconcile contract says.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ItemBackoff, type RandomSource, type RateLimiter } from '../kube/backoff.js';
import { WorkQueue, type WorkQueueMetrics } from '../kube/workqueue.js';
import { errorText } from '../platform/error-text.js';
import { nextTurn, sleep } from '../platform/sleep.js';
import { requeue, type ReconcileResult, type Reconciler } from './reconcile-contract.js';
import { RETRY_PERSISTENT, RETRY_TRANSIENT, type RetryClass } from './retry-policy.js';

/** How one reconcile went, for the usergroup_reconcile_* metrics. */
export type ReconcileVerdict = 'success' | 'requeue' | 'error';

export interface WorkersOptions {
  readonly concurrency: number;
  readonly reconcile: Reconciler;
  readonly log: Logger;
  readonly queueMetrics?: WorkQueueMetrics | undefined;
  readonly reconciled?: ((verdict: ReconcileVerdict, seconds: number) => void) | undefined;
}

/**
 * `concurrency` workers over one work queue, like controller-runtime's: take a key, reconcile it, and turn what came
 * of it — a throw included — into what the queue does with the key (reconcile-contract.ts's requeue). This is the only
 * place a reconcile's error is caught and the only place a key is requeued. Running only between start() and a stop.
 */
export class Workers {
  private queue: WorkQueue | undefined;
  private running: Promise<void>[] = [];
  private abortController: AbortController | undefined;
  /** A stop in progress; a start waits for it. */
  private stopping: Promise<void> | undefined;
  /** Set while work is wanted (the last call was a start): what runs as the workers start. */
  private starting: (() => Iterable<string>) | undefined;

  constructor(private readonly options: WorkersOptions) {}

  /**
   * Begins work. `onStart` runs as the workers start and gives the keys to queue once (level-triggered start).
   * While a stop is still draining, the start waits for it, so two generations of workers never run side by side.
   */
  start(onStart: () => Iterable<string>): void {
    this.starting = onStart;
    if (this.queue || this.stopping) return;
    const queue = new WorkQueue({ rateLimiter: new RetryPolicy(), ...(this.options.queueMetrics ? { metrics: this.options.queueMetrics } : {}) });
    const abort = new AbortController();
    this.queue = queue;
    this.abortController = abort;
    for (const key of onStart()) queue.add(key);
    this.running = Array.from({ length: this.options.concurrency }, () => this.work(queue, abort.signal));
    this.options.log.info({ concurrency: this.options.concurrency }, 'workers started');
  }

  /** Stops taking work; in-flight reconciles may finish within `graceMs`, then are aborted (graceful shutdown). */
  stop(graceMs: number): Promise<void> {
    this.starting = undefined;
    this.stopping ??= this.drain(graceMs).finally(() => {
      this.stopping = undefined;
      if (this.starting) this.start(this.starting);
    });
    return this.stopping;
  }

  /**
   * Stops at once, also when a graceful stop is under way: in-flight reconciles are abandoned and their service
   * calls cut off. For a replica that lost its Lease: it must stop acting immediately.
   */
  abort(): Promise<void> {
    this.abortController?.abort();
    return this.stop(0);
  }

  /** Queues a key, ahead of background work when `urgent` (someone waits on it); nothing while stopped. */
  add(key: string, urgent = false): void {
    this.queue?.add(key, urgent);
  }

  /** Whether workers are at work (between a start and a stop). */
  get active(): boolean {
    return this.queue !== undefined;
  }

  /** The queue's in-flight work (for the workqueue gauges); undefined while stopped. */
  inFlight(): { unfinishedSeconds: number; longestSeconds: number } | undefined {
    const queue = this.queue;
    return queue && { unfinishedSeconds: queue.unfinishedWorkSeconds(), longestSeconds: queue.longestRunningProcessorSeconds() };
  }

  private async drain(graceMs: number): Promise<void> {
    const { queue, running, abortController } = this;
    if (!queue) return;
    this.queue = undefined;
    queue.shutDown();
    if (graceMs > 0 && !abortController?.signal.aborted) {
      // The grace timer is cancelled once the workers are done, so it never holds the process up.
      const grace = new AbortController();
      const drained = await Promise.race([Promise.all(running).then(() => true), sleep(graceMs, grace.signal).then(() => false)]);
      grace.abort();
      if (!drained) this.options.log.warn({ graceMs }, 'reconciles still running after the grace period; aborting them');
    }
    abortController?.abort();
    await Promise.allSettled(running);
    this.running = [];
    this.options.log.info('workers stopped');
  }

  private async work(queue: WorkQueue, signal: AbortSignal): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const started = performance.now();
      const result = await this.reconcile(key, queue, signal);
      const addedAfter = requeue(queue, key, result, Date.now());
      const verdict: ReconcileVerdict = result.kind === 'done' ? (addedAfter ? 'requeue' : 'success') : 'error';
      this.options.reconciled?.(verdict, (performance.now() - started) / 1000);
      queue.done(key);
      // A reconcile with nothing to do awaits only cached answers: without this, a restart's 100,000 of them ran
      // as one microtask chain for over a minute, with no socket read, /metrics, /healthz or Lease renewal between.
      await nextTurn();
    }
  }

  /** One reconcile; whatever it throws is a failure of the key, retried like a transient one. */
  private async reconcile(key: string, queue: WorkQueue, signal: AbortSignal): Promise<ReconcileResult> {
    const reconcileId = randomBytes(4).toString('hex');
    try {
      return await this.options.reconcile({ key, reconcileId, signal, wake: () => queue.add(key) });
    } catch (err) {
      const log = this.options.log.child({ usergroup: key, reconcileId });
      if (signal.aborted) log.info('stopped before finishing: work was withdrawn (shutdown or lost leadership)');
      else log.error({ err: errorText(err) }, 'reconcile failed');
      return { kind: 'failed', cause: 'crashed' };
    }
  }
}

/** The work queue's rate limiter: one jittered exponential backoff per retry class. */
export class RetryPolicy implements RateLimiter<RetryClass> {
  readonly #transient: ItemBackoff;
  readonly #persistent: ItemBackoff;

  constructor(random?: RandomSource) {
    this.#transient = new ItemBackoff({ ...RETRY_TRANSIENT, ...(random ? { random } : {}) });
    this.#persistent = new ItemBackoff({ ...RETRY_PERSISTENT, ...(random ? { random } : {}) });
  }

  when(key: string, retryClass: RetryClass = 'transient'): number {
    return (retryClass === 'persistent' ? this.#persistent : this.#transient).when(key);
  }

  forget(key: string): void {
    this.#transient.forget(key);
    this.#persistent.forget(key);
  }
}
