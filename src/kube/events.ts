import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isRetryable } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

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
}

/**
 * events.k8s.io/v1 Events, aggregated like client-go's recorder: the same
 * (object, type, reason, note) again within the window bumps series.count on one
 * Event instead of creating another, and those patches are rate-limited.
 * Fire-and-forget, and written like client-go's broadcaster does: one write at a
 * time from a bounded queue, dropping what does not fit. Events are a courtesy and
 * must not compete with reconciles for the apiserver: 10,000 UserGroups created at
 * once would otherwise mean 10,000 concurrent Event writes next to the real work.
 * A failed or dropped Event is logged, never fails a reconcile.
 */
/** Repeats within this window are folded into one Event's series (client-go: 10 minutes). */
const SERIES_WINDOW_MS = 10 * 60_000;

export class EventRecorder {
  private readonly series = new Map<string, Series>();
  private readonly patchInterval: number;
  private readonly maxQueued: number;
  private readonly queue: (() => Promise<void>)[] = [];
  private writing: Promise<void> | undefined;
  private lastPrune = Date.now();

  constructor(
    private readonly client: KubeClient,
    private readonly options: EventRecorderOptions,
  ) {
    this.patchInterval = options.patchIntervalMs ?? 30_000;
    this.maxQueued = options.maxQueued ?? 1000;
  }

  emit(regarding: EventRegarding, type: EventType, reason: string, action: string, note: string): void {
    this.options.onEmit?.(type, reason);
    const now = Date.now();
    this.prune(now);
    // A digest, not the note itself: one series per object is kept for the window, 10,000 notes add up.
    const key = createHash('sha1').update(`${regarding.uid}\u0000${type}\u0000${reason}\u0000${note}`).digest('base64');
    const existing = this.series.get(key);
    if (existing && now - existing.lastSeen < SERIES_WINDOW_MS) {
      existing.count++;
      existing.lastSeen = now;
      if (now - existing.lastWritten >= this.patchInterval) {
        const count = existing.count;
        // Writes leave the queue in order, so a patch never overtakes its create.
        const queued = this.enqueue(type, reason, async () => {
          const ok = await this.patchSeries(regarding.namespace, existing.name, count, now);
          // The Event is gone (expired, deleted) or unreachable: the next occurrence starts a new one.
          if (!ok && this.series.get(key) === existing) this.series.delete(key);
        });
        if (queued) existing.lastWritten = now;
      }
      return;
    }
    const name = `${regarding.name}.${randomBytes(8).toString('hex')}`;
    const created: Series = { name, count: 1, lastSeen: now, lastWritten: now };
    const queued = this.enqueue(type, reason, async () => {
      const ok = await this.create(regarding, type, reason, action, note, name, now);
      // Never recorded: forget the series so the next occurrence creates the Event afresh.
      if (!ok && this.series.get(key) === created) this.series.delete(key);
    });
    if (queued) this.series.set(key, created);
  }

  /** Waits for queued writes (used at shutdown and by tests), but not longer than `timeoutMs`. */
  async flush(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.writing && Date.now() < deadline) {
      await Promise.race([this.writing, new Promise((resolve) => setTimeout(resolve, deadline - Date.now()).unref())]);
    }
  }

  private enqueue(type: EventType, reason: string, write: () => Promise<void>): boolean {
    if (this.queue.length >= (type === 'Warning' ? 2 * this.maxQueued : this.maxQueued)) {
      this.options.onDrop?.(type, reason);
      this.options.log.debug({ type, reason, queued: this.queue.length }, 'event dropped: too many Event writes queued');
      return false;
    }
    this.queue.push(write);
    this.writing ??= this.drain();
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
    this.writing = undefined;
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
