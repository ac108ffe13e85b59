import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeClient } from './http.js';
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
  /** Writes for one series run in order so a patch never races its create. */
  chain: Promise<void>;
}

export interface EventRecorderOptions {
  readonly controller: string;
  readonly instance: string;
  readonly log: Logger;
  /** Repeats within this window are folded into one Event's series. */
  readonly seriesWindowMs?: number;
  /** A series is patched at most this often, so a retry storm costs the apiserver little. */
  readonly patchIntervalMs?: number;
  readonly onEmit?: (type: EventType, reason: string) => void;
}

/**
 * events.k8s.io/v1 Events, aggregated like client-go's recorder: the same
 * (object, type, reason, note) again within the window bumps series.count on one
 * Event instead of creating another, and those patches are rate-limited.
 * Fire-and-forget: a failed Event is logged, never fails a reconcile.
 */
export class EventRecorder {
  private readonly series = new Map<string, Series>();
  private readonly window: number;
  private readonly patchInterval: number;

  constructor(private readonly client: KubeClient, private readonly options: EventRecorderOptions) {
    this.window = options.seriesWindowMs ?? 10 * 60_000;
    this.patchInterval = options.patchIntervalMs ?? 30_000;
  }

  emit(regarding: EventRegarding, type: EventType, reason: string, action: string, note: string): void {
    this.options.onEmit?.(type, reason);
    const now = Date.now();
    this.prune(now);
    const key = `${regarding.uid}\u0000${type}\u0000${reason}\u0000${note}`;
    const existing = this.series.get(key);
    if (existing && now - existing.lastSeen < this.window) {
      existing.count++;
      existing.lastSeen = now;
      if (now - existing.lastWritten >= this.patchInterval) {
        existing.lastWritten = now;
        const count = existing.count;
        existing.chain = existing.chain.then(() => this.patchSeries(regarding.namespace, existing.name, count, now));
      }
      return;
    }
    const name = `${regarding.name}.${randomBytes(8).toString('hex')}`;
    const created: Series = { name, count: 1, lastSeen: now, lastWritten: now, chain: Promise.resolve() };
    created.chain = this.create(regarding, type, reason, action, note, name, now);
    this.series.set(key, created);
  }

  /** Waits for writes in flight (used at shutdown and by tests). */
  async flush(): Promise<void> {
    await Promise.all([...this.series.values()].map((s) => s.chain));
  }

  private async create(regarding: EventRegarding, type: EventType, reason: string, action: string, note: string, name: string, now: number): Promise<void> {
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
    await this.send('POST', paths.events(regarding.namespace), body, 'application/json');
  }

  private async patchSeries(namespace: string, name: string, count: number, now: number): Promise<void> {
    await this.send('PATCH', paths.event(namespace, name), { series: { count, lastObservedTime: microTime(now) } }, 'application/merge-patch+json');
  }

  private async send(method: string, path: string, body: unknown, contentType: string): Promise<void> {
    try {
      const res = await this.client.request(method, path, { body, contentType });
      if (res.status >= 300) this.options.log.debug({ path, status: res.status }, 'event not recorded');
    } catch (err) {
      this.options.log.debug({ path, err: String(err) }, 'event not recorded');
    }
  }

  private prune(now: number): void {
    if (this.series.size < 10_000) return;
    for (const [key, s] of this.series) if (now - s.lastSeen >= this.window) this.series.delete(key);
  }
}

/** The apiserver's MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
