// The Event recorder: events.k8s.io/v1 Events, aggregated like client-go's, with a budget per namespace.
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isRetryable } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';
import { NamespaceBudget, type NamespaceBudgetOptions } from './namespace-budget.js';

export interface EventRegarding {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

export type EventType = 'Normal' | 'Warning';

interface Series {
  readonly name: string;
  count: number;
  lastSeen: number;
  lastWritten: number;
  /** While the series' create is queued or in flight: its patches wait for it. Dropped once settled. */
  creating: Promise<void> | undefined;
}

export interface EventRecorderOptions {
  readonly controller: string;
  readonly instance: string;
  readonly log: Logger;
  /** A series is patched at most this often, so a retry storm costs the apiserver little. */
  readonly patchIntervalMs?: number;
  readonly onEmit?: (type: EventType, reason: string) => void;
  /** An Event not written because the queue of Event writes was full. */
  readonly onDrop?: (type: EventType, reason: string) => void;
  /** Attempts per Event write (default 5, backing off from 0.5 s). */
  readonly retries?: number;
  /** Event writes waiting at most (default 1000, as client-go's broadcaster); Warnings get as many again. */
  readonly maxQueued?: number;
  /** Event writes in flight at most (default 4). */
  readonly writers?: number;
  /**
   * New Warning Events per namespace (default WARNING_BUDGET): a tenant flooding its namespace with refused or
   * failing objects gets their conditions written, but not an Event write each on the apiserver everyone shares.
   */
  readonly warningsPerNamespace?: NamespaceBudgetOptions;
}

/** 100 new Warnings at once per namespace, then one a second: generous for a team, a cap for a flood. */
export const WARNING_BUDGET: NamespaceBudgetOptions = { burst: 100, perSecond: 1 };

/**
 * events.k8s.io/v1 Events, aggregated like client-go's recorder: the same
 * (object, type, reason, note) again within the window bumps series.count on one
 * Event instead of creating another, and those patches are rate-limited.
 * Fire-and-forget, from a bounded queue drained by a few writers, dropping what does
 * not fit: 10,000 UserGroups created at once must not mean 10,000 concurrent Event
 * writes next to the real work. Four writers, not client-go's broadcaster's one: at the
 * benchmark one writer keeps up with 4,000 of 10,000 first syncs (the rest dropped, though
 * each is the record of a group's creation), four with all of them while each first sync also
 * writes a claim, and with 7,681-7,921 of 10,000 at ~100 groups/s without that write (2026-11-27).
 * A series' patch waits for its create. A failed or dropped Event is logged, never fails a reconcile.
 */
/**
 * Series remembered at most, the least recently seen forgotten first (client-go's EventCorrelator keeps an LRU
 * of 4,096): one per UserGroup would be ~20 MiB at 100,000. A forgotten series' next occurrence is a new Event.
 */
export const MAX_SERIES = 4096;
/** Repeats within this window are folded into one Event's series (client-go: 10 minutes). */
const SERIES_WINDOW_MS = 10 * 60_000;

export class EventRecorder {
  private readonly series = new Map<string, Series>();
  private readonly patchInterval: number;
  private readonly maxQueued: number;
  private readonly writers: number;
  private readonly queue: (() => Promise<void>)[] = [];
  /** The drain loops running, at most `writers`. */
  private readonly draining = new Set<Promise<void>>();
  private lastPrune = Date.now();
  private readonly warnings: NamespaceBudget;

  constructor(
    private readonly client: KubeClient,
    private readonly options: EventRecorderOptions,
  ) {
    this.patchInterval = options.patchIntervalMs ?? 30_000;
    this.maxQueued = options.maxQueued ?? 1000;
    this.writers = Math.max(1, options.writers ?? 4);
    this.warnings = new NamespaceBudget(options.warningsPerNamespace ?? WARNING_BUDGET);
  }

  emit(regarding: EventRegarding, type: EventType, reason: string, action: string, note: string): void {
    this.options.onEmit?.(type, reason);
    const now = Date.now();
    this.prune(now);
    // A digest, not the note itself: one series per object is kept for the window, 10,000 notes add up.
    const key = createHash('sha1').update(`${regarding.uid}\u0000${type}\u0000${reason}\u0000${note}`).digest('base64');
    const existing = this.series.get(key);
    if (existing && now - existing.lastSeen < SERIES_WINDOW_MS) {
      // Most recently seen last: the map's order is the eviction order.
      this.series.delete(key);
      this.series.set(key, existing);
      existing.count++;
      existing.lastSeen = now;
      if (now - existing.lastWritten >= this.patchInterval) {
        const count = existing.count;
        const queued = this.enqueue(type, reason, async () => {
          await existing.creating;
          const ok = await this.patchSeries(regarding.namespace, existing.name, count, now);
          // The Event is gone (expired, deleted) or unreachable: the next occurrence starts a new one.
          if (!ok && this.series.get(key) === existing) this.series.delete(key);
        });
        if (queued) existing.lastWritten = now;
      }
      return;
    }
    if (type === 'Warning' && !this.warnings.take(regarding.namespace)) {
      this.options.onDrop?.(type, reason);
      this.options.log.debug({ type, reason, namespace: regarding.namespace }, "event dropped: the namespace's Warning budget is spent");
      return;
    }
    const name = `${regarding.name}.${randomBytes(8).toString('hex')}`;
    let attempted = (): void => undefined;
    const created: Series = { name, count: 1, lastSeen: now, lastWritten: now, creating: new Promise((resolve) => (attempted = resolve)) };
    const queued = this.enqueue(type, reason, async () => {
      try {
        const ok = await this.create(regarding, type, reason, action, note, name, now);
        // Never recorded: forget the series so the next occurrence creates the Event afresh.
        if (!ok && this.series.get(key) === created) this.series.delete(key);
      } finally {
        created.creating = undefined;
        attempted();
      }
    });
    if (!queued) return;
    this.series.set(key, created);
    if (this.series.size > MAX_SERIES) {
      const oldest = this.series.keys().next().value;
      if (oldest !== undefined) this.series.delete(oldest);
    }
  }

  /** Waits for queued writes (used at shutdown and by tests), but not longer than `timeoutMs`. */
  async flush(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.draining.size > 0 && Date.now() < deadline) {
      await Promise.race([Promise.all(this.draining), new Promise((resolve) => setTimeout(resolve, deadline - Date.now()).unref())]);
    }
  }

  private enqueue(type: EventType, reason: string, write: () => Promise<void>): boolean {
    if (this.queue.length >= (type === 'Warning' ? 2 * this.maxQueued : this.maxQueued)) {
      this.options.onDrop?.(type, reason);
      this.options.log.debug({ type, reason, queued: this.queue.length }, 'event dropped: too many Event writes queued');
      return false;
    }
    this.queue.push(write);
    if (this.draining.size < this.writers) {
      const loop: Promise<void> = this.drain().finally(() => this.draining.delete(loop));
      this.draining.add(loop);
    }
    return true;
  }

  private async drain(): Promise<void> {
    for (let write = this.queue.shift(); write; write = this.queue.shift()) {
      try {
        await write();
      } catch (err) {
        this.options.log.debug({ err: String(err) }, 'event not recorded');
      }
    }
  }

  private async create(regarding: EventRegarding, type: EventType, reason: string, action: string, note: string, name: string, now: number): Promise<boolean> {
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name, namespace: regarding.namespace },
      eventTime: microTime(now),
      reportingController: this.options.controller,
      reportingInstance: this.options.instance.slice(0, 128),
      action: action.slice(0, 128),
      reason: reason.slice(0, 128),
      type,
      note: note.slice(0, 1024),
      regarding: { apiVersion: regarding.apiVersion, kind: regarding.kind, namespace: regarding.namespace, name: regarding.name, uid: regarding.uid },
    };
    return (await this.send('POST', paths.events(regarding.namespace), body, 'application/json')) === 'ok';
  }

  private async patchSeries(namespace: string, name: string, count: number, now: number): Promise<boolean> {
    return (
      'ok' === (await this.send('PATCH', paths.event(namespace, name), { series: { count, lastObservedTime: microTime(now) } }, 'application/merge-patch+json'))
    );
  }

  /**
   * Like client-go's recorder, retries what may pass later (connection errors, 5xx,
   * 429) a few times with backoff; gives up at once on what will not (4xx).
   */
  private async send(method: string, path: string, body: unknown, contentType: string): Promise<'ok' | 'failed'> {
    const attempts = this.options.retries ?? 5;
    let delayMs = 500;
    for (let attempt = 1; ; attempt++) {
      let retryable: boolean;
      let detail: Record<string, unknown>;
      try {
        const res = await call(this.client, method, path, { body, contentType });
        if (res.ok) return 'ok';
        retryable = isRetryable(res.error);
        detail = { status: res.error.code, err: res.error.message };
      } catch (err) {
        retryable = true;
        detail = { err: String(err) };
      }
      if (!retryable || attempt >= attempts) {
        this.options.log.debug({ path, attempts: attempt, ...detail }, 'event not recorded');
        return 'failed';
      }
      await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
      delayMs *= 2;
    }
  }

  private prune(now: number): void {
    // Once a minute: a scan per emit would cost O(series) each time at 10,000 UserGroups.
    if (now - this.lastPrune < 60_000) return;
    this.lastPrune = now;
    for (const [key, s] of this.series) if (now - s.lastSeen >= SERIES_WINDOW_MS) this.series.delete(key);
  }
}

/** The apiserver's MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
