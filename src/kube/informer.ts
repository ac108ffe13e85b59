import type { Logger } from 'pino';
import { isRecord, objectKey } from '../api/meta.js';
import type { KubeClient } from './http.js';
import { watchOnce, type WatchEnd } from './watch-stream.js';
import { afterWatch } from './watch-retry.js';

export interface Cached {
  readonly metadata: { readonly namespace: string; readonly name: string; readonly resourceVersion: string };
}

export type InformerEventType = 'added' | 'updated' | 'deleted';
export type InformerHandler<T> = (type: InformerEventType, object: T, old: T | undefined) => void;

export interface InformerOptions<T> {
  /** For logs and metrics, e.g. "usergroups". */
  readonly name: string;
  readonly client: KubeClient;
  /** Collection path: cluster-wide (/apis/g/v/usergroups) or one namespace (/api/v1/namespaces/ns/secrets). */
  readonly path: string;
  readonly labelSelector?: string;
  /**
   * List and watch PartialObjectMetadata instead of whole objects: the apiserver leaves out data and spec,
   * which matters for Secrets that are not ours (a Helm release Secret can be a megabyte).
   */
  readonly metadataOnly?: boolean;
  /** Parses an item from the apiserver; undefined drops it (logged). */
  readonly parse: (raw: unknown) => T | undefined;
  readonly log: Logger;
  readonly pageSize?: number;
  /** Server-side watch timeout; randomised per watch so many watches do not reconnect in step. */
  readonly watchTimeoutSeconds?: () => number;
  /** A watch that delivers no byte (not even a bookmark) for this long is treated as dead. */
  readonly inactivityMs?: number;
  readonly retryInitialMs?: number;
  readonly retryMaxMs?: number;
}

/**
 * List + watch into a local store, the way client-go's reflector does:
 * resourceVersion bookkeeping with bookmarks; 410 Gone → re-list (diffed against
 * the store so deletions seen only through a re-list are still reported);
 * dropped connections → re-watch from the last resourceVersion; a silent
 * connection → dropped and re-watched; any other error → retried with backoff,
 * re-listing after repeated failures. It never stops on its own.
 */
export class Informer<T extends Cached> {
  private readonly store = new Map<string, T>();
  private readonly handlers: InformerHandler<T>[] = [];
  private resourceVersion = '';
  private syncedFlag = false;
  private readonly syncWaiters: (() => void)[] = [];
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private failingSince: number | undefined;
  /** Whether the current watch has delivered an event yet. */
  private delivered = false;
  /** Counts of how the watch connections ended, for tests and metrics. */
  readonly stats = { lists: 0, watches: 0, gone: 0, silent: 0, failures: 0 };

  constructor(private readonly options: InformerOptions<T>) {}

  on(handler: InformerHandler<T>): void {
    this.handlers.push(handler);
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  get synced(): boolean {
    return this.syncedFlag;
  }

  waitForSync(): Promise<void> {
    if (this.syncedFlag) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  /** How long the informer has been failing to list or watch (0 when healthy). */
  failingForMs(now = Date.now()): number {
    return this.failingSince === undefined ? 0 : now - this.failingSince;
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  /**
   * Puts an object we just wrote into the store, unless the store already has a
   * newer version, so the next reconcile does not act on our own stale view.
   */
  upsertLocal(object: T): void {
    const key = objectKey(object.metadata);
    const existing = this.store.get(key);
    if (!existing || !isOlder(object.metadata.resourceVersion, existing.metadata.resourceVersion)) this.store.set(key, object);
  }

  private async run(): Promise<void> {
    const { log } = this.options;
    let delay = this.options.retryInitialMs ?? 500;
    const maxDelay = this.options.retryMaxMs ?? 30_000;
    const backoff = async (): Promise<void> => {
      await sleep(delay * (0.5 + Math.random() / 2), this.abort.signal);
      delay = Math.min(maxDelay, delay * 2);
    };
    while (!this.abort.signal.aborted) {
      try {
        await this.relist();
      } catch (err) {
        this.markFailing();
        log.warn({ informer: this.options.name, err: String(err) }, 'list failed; retrying');
        await backoff();
        continue;
      }
      delay = this.options.retryInitialMs ?? 500;
      let failures = 0;
      while (!this.abort.signal.aborted) {
        this.delivered = false;
        const end = await this.watch();
        const after = afterWatch(end, this.delivered, failures);
        if (end.kind === 'gone') {
          this.stats.gone++;
          log.info({ informer: this.options.name, resourceVersion: this.resourceVersion }, 'watch expired (410 Gone); re-listing');
        } else if (end.kind === 'silent') {
          this.stats.silent++;
          log.warn({ informer: this.options.name, silentMs: end.ms }, 'watch went silent; reconnecting');
          // The path to the apiserver may be dead without closing; idle pooled connections likely are too.
          this.options.client.dropIdleConnections();
        } else if (end.kind === 'failed') {
          this.stats.failures++;
          this.markFailing();
          log.warn({ informer: this.options.name, status: end.status, err: end.message }, 'watch failed; retrying');
        }
        if (after.next === 'watch' && after.resetBackoff) delay = this.options.retryInitialMs ?? 500;
        if (after.backoff) await backoff();
        if (after.next === 'relist') {
          if (after.because === 'repeated failures') log.info({ informer: this.options.name }, 'repeated watch failures; re-listing');
          break;
        }
        failures = after.failures;
      }
    }
  }

  private async relist(): Promise<void> {
    const { client, path, labelSelector } = this.options;
    const fresh = new Map<string, T>();
    let continueToken = '';
    let listVersion = '';
    do {
      const query: Record<string, string> = { limit: String(this.options.pageSize ?? 500) };
      if (labelSelector) query['labelSelector'] = labelSelector;
      if (continueToken) query['continue'] = continueToken;
      const { status, body } = await client.request('GET', path, { query, timeoutMs: 120_000, ...(this.options.metadataOnly ? { accept: METADATA_LIST } : {}) });
      if (status === 410 && continueToken) {
        // The continue token expired mid-list: start over.
        fresh.clear();
        continueToken = '';
        continue;
      }
      if (status !== 200 || !isRecord(body)) throw new Error(`list ${path}: HTTP ${status}${isRecord(body) && typeof body['message'] === 'string' ? `: ${body['message']}` : ''}`);
      const metadata = isRecord(body['metadata']) ? body['metadata'] : {};
      listVersion = typeof metadata['resourceVersion'] === 'string' ? metadata['resourceVersion'] : '';
      continueToken = typeof metadata['continue'] === 'string' ? metadata['continue'] : '';
      for (const raw of Array.isArray(body['items']) ? body['items'] : []) {
        const item = this.parse(raw);
        if (item) fresh.set(objectKey(item.metadata), item);
      }
    } while (continueToken);
    this.stats.lists++;

    const previous = new Map(this.store);
    this.store.clear();
    for (const [key, item] of fresh) this.store.set(key, item);
    this.resourceVersion = listVersion;
    this.markHealthy();
    for (const [key, item] of fresh) {
      const old = previous.get(key);
      if (!old) this.emit('added', item, undefined);
      else if (old.metadata.resourceVersion !== item.metadata.resourceVersion) this.emit('updated', item, old);
    }
    for (const [key, old] of previous) if (!fresh.has(key)) this.emit('deleted', old, undefined);
    if (!this.syncedFlag) {
      this.syncedFlag = true;
      for (const resolve of this.syncWaiters.splice(0)) resolve();
    }
  }

  private watch(): Promise<WatchEnd> {
    this.stats.watches++;
    const timeoutSeconds = this.options.watchTimeoutSeconds?.() ?? 300 + Math.floor(Math.random() * 300);
    return watchOnce(this.options.client, this.options.path, {
      resourceVersion: this.resourceVersion,
      ...(this.options.labelSelector ? { labelSelector: this.options.labelSelector } : {}),
      ...(this.options.metadataOnly ? { accept: METADATA_OBJECT } : {}),
      timeoutSeconds,
      inactivityMs: this.options.inactivityMs ?? (timeoutSeconds + 60) * 1000,
      signal: this.abort.signal,
      onEvent: (event) => {
        this.delivered = true;
        this.markHealthy();
        const rv = isRecord(event.object['metadata']) ? event.object['metadata']['resourceVersion'] : undefined;
        if (event.type === 'BOOKMARK') {
          if (typeof rv === 'string') this.resourceVersion = rv;
          return;
        }
        const item = this.parse(event.object);
        if (typeof rv === 'string') this.resourceVersion = rv;
        if (!item) return;
        const key = objectKey(item.metadata);
        const old = this.store.get(key);
        if (event.type === 'DELETED') {
          this.store.delete(key);
          this.emit('deleted', item, old);
          return;
        }
        // The echo of our own write-through is no news: its writer has seen it, and handling it again would
        // re-run that reconcile at once (e.g. ignoring the Retry-After it is waiting out).
        if (old && old.metadata.resourceVersion === item.metadata.resourceVersion) return;
        // A write-through of our own may already hold a newer version: never go back in time.
        if (!old || !isOlder(item.metadata.resourceVersion, old.metadata.resourceVersion)) this.store.set(key, item);
        this.emit(old ? 'updated' : 'added', this.store.get(key) ?? item, old);
      },
    });
  }

  private parse(raw: unknown): T | undefined {
    const item = this.options.parse(raw);
    if (!item) this.options.log.warn({ informer: this.options.name }, 'dropping an object that cannot be parsed');
    return item;
  }

  private emit(type: InformerEventType, object: T, old: T | undefined): void {
    for (const handler of this.handlers) {
      try {
        handler(type, object, old);
      } catch (err) {
        this.options.log.error({ informer: this.options.name, err: String(err) }, 'event handler failed');
      }
    }
  }

  private markHealthy(): void {
    this.failingSince = undefined;
  }

  private markFailing(): void {
    this.failingSince ??= Date.now();
  }
}

const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/** resourceVersions are opaque, but etcd-backed ones are increasing integers; compare only when both are. */
function isOlder(candidate: string, current: string): boolean {
  if (!/^\d+$/.test(candidate) || !/^\d+$/.test(current)) return false;
  return BigInt(candidate) < BigInt(current);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
