// The informer: list and watch one collection into a local store, as client-go's reflector does.
import type { Logger } from 'pino';
import { objectKey } from '../api/meta.js';
import { isRecord } from '../platform/json-value.js';
import { isGone } from './api-error.js';
import { call, ResponseTooLargeError, type ApiResult, type KubeClient } from './http.js';
import { DEFAULT_MAX_WATCH_LINE_BYTES, watchOnce, type WatchEnd, type WatchEvent } from './watch-stream.js';
import { afterUnfinishedWatchList, eventResourceVersion, initialEventMeaning } from './watch-list.js';
import { afterWatch } from './watch-retry.js';
import { sleep } from '../platform/sleep.js';

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
  /**
   * Whether an object belongs in this cache, judged on its raw metadata before the parse (a shard's share of the
   * namespaces): one that does not is neither parsed, stored nor emitted, unless the store holds it already (put
   * there by upsertLocal because a reconcile needed it), whose changes are then followed.
   */
  readonly admit?: (metadata: Readonly<Record<string, unknown>>) => boolean;
  /** Parses an item from the apiserver; undefined drops it (logged). */
  readonly parse: (raw: unknown) => T | undefined;
  readonly log: Logger;
  /** Objects per list page (the `limit` asked for); 500 by default, as client-go's reflector. */
  readonly pageSize?: number;
  /**
   * The most bytes one list page may take (default DEFAULT_MAX_PAGE_BYTES). A bigger page is abandoned
   * while it is read and asked for again with half the `limit`, so a page of large objects never becomes
   * one huge string and one huge parse.
   */
  readonly maxPageBytes?: number;
  /**
   * (Re)list with one watch-list request (the WatchList protocol, watch-list.ts) rather than paged LISTs;
   * true by default. An apiserver that refuses it is remembered and listed in pages from then on; false
   * lists in pages only.
   */
  readonly watchList?: boolean;
  /**
   * The most bytes one watch event may take (default DEFAULT_MAX_WATCH_LINE_BYTES): a longer one ends the watch
   * as failed before more of it is held. With watch-lists every object arrives as one such event.
   */
  readonly maxWatchEventBytes?: number;
  /** A watch that delivers no byte (not even a bookmark) for this long is treated as dead. */
  readonly inactivityMs?: number;
  readonly retryInitialMs?: number;
}

/**
 * How an informer's lists and watches went: paged lists made, watch-lists that reached their initial-events-end
 * bookmark, watches opened (watch-list requests included), watches ended by 410 Gone, by silence or by failure
 * (before or after a watch-list's initial events), list pages abandoned for their size, and the largest page
 * read whole (bytes).
 */
export interface InformerStats {
  lists: number;
  watchLists: number;
  watches: number;
  gone: number;
  silent: number;
  failures: number;
  oversizedPages: number;
  largestPageBytes: number;
}

/**
 * List + watch into a local store, the way client-go's reflector does (with its
 * WatchListClient feature): the list is one watch-list request whose initial events
 * fill the store and which then goes on as the watch (a paged LIST + watch when the
 * apiserver refuses watch-lists or one does not finish);
 * resourceVersion bookkeeping with bookmarks; 410 Gone → re-list (diffed against
 * the store so deletions seen only through a re-list are still reported);
 * dropped connections → re-watch from the last resourceVersion; a silent
 * connection → dropped and re-watched; any other error → retried with backoff,
 * re-listing after repeated failures. It never stops on its own.
 */
export class Informer<T extends Cached> {
  /** Replaced whole by a (re)list; changed in place by watch events and write-throughs. */
  private store = new Map<string, T>();
  private readonly handlers: InformerHandler<T>[] = [];
  private resourceVersion = '';
  private syncedFlag = false;
  private readonly syncWaiters: (() => void)[] = [];
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private failingSince: number | undefined;
  /** Whether the current watch has delivered an event yet. */
  private delivered = false;
  /** Off once the apiserver has shown it does not do watch-lists: re-lists are paged LISTs from then on. */
  private useWatchList: boolean;
  /** Set by a 410 Gone: the next watch-list asks for the latest state rather than one not older than ours. */
  private resourceVersionExpired = false;
  /** Read at scrape time by the usergroup_informer_* metrics. */
  readonly stats: InformerStats = { lists: 0, watchLists: 0, watches: 0, gone: 0, silent: 0, failures: 0, oversizedPages: 0, largestPageBytes: 0 };

  constructor(private readonly options: InformerOptions<T>) {
    this.useWatchList = options.watchList ?? true;
  }

  /** The resource it caches, as metrics and logs name it. */
  get name(): string {
    return this.options.name;
  }

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
    if (!existing || !isOlderResourceVersion(object.metadata.resourceVersion, existing.metadata.resourceVersion)) this.store.set(key, object);
  }

  private async run(): Promise<void> {
    const { log } = this.options;
    let delay = this.options.retryInitialMs ?? 500;
    const backoff = async (): Promise<void> => {
      await sleep(delay * (0.5 + Math.random() / 2), this.abort.signal);
      delay = Math.min(RETRY_MAX_MS, delay * 2);
    };
    while (!this.abort.signal.aborted) {
      // The end of the watch-list connection, which went on as the watch once the store was filled.
      let watchListEnd: WatchEnd | undefined;
      try {
        watchListEnd = await this.sync();
      } catch (err) {
        this.markFailing();
        log.warn({ informer: this.options.name, err: String(err) }, 'list failed; retrying');
        await backoff();
        continue;
      }
      delay = this.options.retryInitialMs ?? 500;
      let failures = 0;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- stop() may abort during the awaits below
      while (!this.abort.signal.aborted) {
        let end: WatchEnd;
        if (watchListEnd) {
          end = watchListEnd;
          watchListEnd = undefined;
        } else {
          this.delivered = false;
          end = await this.watch();
        }
        const after = afterWatch(end, this.delivered, failures);
        this.countEnd(end);
        if (end.kind === 'gone') {
          this.resourceVersionExpired = true;
          log.info({ informer: this.options.name, resourceVersion: this.resourceVersion }, 'watch expired (410 Gone); re-listing');
        } else if (end.kind === 'silent') {
          log.warn({ informer: this.options.name, silentMs: end.ms }, 'watch went silent; reconnecting');
          // The path to the apiserver may be dead without closing; idle pooled connections likely are too.
          this.options.client.dropIdleConnections();
        } else if (end.kind === 'failed') {
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

  /** Counts how a watch ended, for the usergroup_informer_watch_ends_total metric. */
  private countEnd(end: WatchEnd): void {
    if (end.kind === 'gone') this.stats.gone++;
    else if (end.kind === 'silent') this.stats.silent++;
    else if (end.kind === 'failed') this.stats.failures++;
  }

  /**
   * Fills the store with the apiserver's current state (at start and on every re-list): by one watch-list
   * request while the apiserver does them, else by paged LIST. Returns how the watch-list connection ended,
   * as it went on as the watch after its initial events; undefined after a LIST (or when stopped).
   * Throws when the store could not be filled (the caller backs off and tries again).
   */
  private async sync(): Promise<WatchEnd | undefined> {
    const { log, name } = this.options;
    if (this.useWatchList) {
      let resourceVersion = this.resourceVersionExpired ? '' : this.resourceVersion;
      for (;;) {
        const attempt = await this.watchList(resourceVersion);
        if (attempt.synced) return attempt.end;
        if (this.abort.signal.aborted) return undefined;
        this.countEnd(attempt.end);
        const next = afterUnfinishedWatchList({ ...attempt, resourceVersion });
        const detail = attempt.end.kind === 'failed' ? { status: attempt.end.status, err: attempt.end.message } : { end: attempt.end.kind };
        if (next.next === 'latest') {
          log.info({ informer: name, resourceVersion, ...detail }, 'watch-list resourceVersion unavailable; asking for the latest state');
          resourceVersion = '';
          continue;
        }
        if (next.next === 'backoff') throw new Error(`watch-list: ${attempt.end.kind === 'failed' ? attempt.end.message : attempt.end.kind}`);
        if (next.remember) {
          // Once per informer: from now on it lists in pages.
          this.useWatchList = false;
          log.info({ informer: name, reason: next.reason, ...detail }, 'the apiserver does not do watch-lists; listing in pages from now on');
        } else {
          log.info({ informer: name, reason: next.reason, ...detail }, 'watch-list unfinished; listing in pages this time');
        }
        break;
      }
    }
    await this.relist();
    return undefined;
  }

  /**
   * One watch-list request. Its initial events are collected into a map of their own, and nothing is
   * emitted for them one by one: at the initial-events-end bookmark that map replaces the store (diffed
   * against it, as a paged list is) and the informer is synced, so "synced" still means "complete". The
   * same connection then goes on as the watch, from the bookmark's resourceVersion.
   */
  private async watchList(resourceVersion: string): Promise<{ synced: boolean; end: WatchEnd; elapsedMs: number; timeoutMs: number }> {
    const timeoutSeconds = watchTimeoutSeconds();
    const initial = new Map<string, T>();
    let synced = false;
    // Gives up on the initial events a little after the watch's own timeout, should a server that ignores
    // sendInitialEvents not end the watch either (see afterUnfinishedWatchList).
    const giveUp = new AbortController();
    const timer = setTimeout(() => giveUp.abort(), (timeoutSeconds + INITIAL_EVENTS_GRACE_SECONDS) * 1000);
    timer.unref();
    const started = Date.now();
    try {
      const end = await this.openWatch(resourceVersion, true, timeoutSeconds, AbortSignal.any([this.abort.signal, giveUp.signal]), (event) => {
        if (synced) {
          this.onWatchEvent(event);
        } else if (this.collectInitialEvent(event, initial)) {
          clearTimeout(timer);
          synced = true;
          this.delivered = true;
          this.stats.watchLists++;
          this.replaceStore(initial, eventResourceVersion(event));
        }
      });
      return { synced, end, elapsedMs: Date.now() - started, timeoutMs: timeoutSeconds * 1000 };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Applies one event of a watch-list's initial phase to the state being collected; true at its end bookmark. */
  private collectInitialEvent(event: WatchEvent, into: Map<string, T>): boolean {
    const meaning = initialEventMeaning(event);
    if (meaning === 'end') return true;
    if (meaning === 'bookmark') return false;
    if (!this.admits(event.object)) return false;
    const item = this.parse(event.object);
    if (item && meaning === 'object') into.set(objectKey(item.metadata), item);
    else if (item) into.delete(objectKey(item.metadata));
    return false;
  }

  /** A paged LIST: pages of at most `pageSize` objects and `maxPageBytes` bytes, restarted if its continue token expires. */
  private async relist(): Promise<void> {
    const { client, path, labelSelector, log } = this.options;
    const pageSize = this.options.pageSize ?? 500;
    const maxBytes = this.options.maxPageBytes ?? DEFAULT_MAX_PAGE_BYTES;
    const fresh = new Map<string, T>();
    let continueToken = '';
    let listVersion: string;
    let limit = pageSize;
    for (;;) {
      const query: Record<string, string> = { limit: String(limit) };
      if (labelSelector) query['labelSelector'] = labelSelector;
      if (continueToken) query['continue'] = continueToken;
      let page: ApiResult;
      try {
        page = await call(client, 'GET', path, { query, timeoutMs: 120_000, maxBytes, ...(this.options.metadataOnly ? { accept: METADATA_LIST } : {}) });
      } catch (err) {
        if (!(err instanceof ResponseTooLargeError)) throw err;
        this.stats.oversizedPages++;
        // At limit 1 the page is one object; the apiserver's own limits (etcd: 1.5 MiB) keep this from happening.
        if (limit === 1) throw new Error(`list ${path}: one object is larger than ${maxBytes} bytes`, { cause: err });
        const next = nextPageLimit(limit, pageSize, { tooLarge: true });
        log.info({ informer: this.options.name, limit, next, maxBytes }, 'list page over its byte bound; asking again for fewer objects');
        limit = next;
        continue;
      }
      if (!page.ok) {
        if (!continueToken || !isGone(page.error)) throw page.error;
        // The continue token expired mid-list: start over.
        fresh.clear();
        continueToken = '';
        continue;
      }
      const body = page.body;
      if (!isRecord(body)) throw new Error(`list ${path}: HTTP ${page.status} but the answer is not a list`);
      const bytes = page.bytes ?? 0;
      this.stats.largestPageBytes = Math.max(this.stats.largestPageBytes, bytes);
      const metadata = isRecord(body['metadata']) ? body['metadata'] : {};
      listVersion = typeof metadata['resourceVersion'] === 'string' ? metadata['resourceVersion'] : '';
      continueToken = typeof metadata['continue'] === 'string' ? metadata['continue'] : '';
      for (const raw of Array.isArray(body['items']) ? body['items'] : []) {
        if (!this.admits(raw)) continue;
        const item = this.parse(raw);
        if (item) fresh.set(objectKey(item.metadata), item);
      }
      if (!continueToken) break;
      limit = nextPageLimit(limit, pageSize, { tooLarge: false, bytes, maxBytes });
    }
    this.stats.lists++;
    this.replaceStore(fresh, listVersion);
  }

  /**
   * Makes a complete state (from a paged list or a watch-list) the store, and emits what changed against
   * the previous store: deletions seen only through a re-list are still reported, unchanged objects emit
   * nothing. The first time, the informer is synced and its waiters are let go.
   */
  private replaceStore(fresh: Map<string, T>, resourceVersion: string): void {
    const previous = this.store;
    this.store = fresh;
    this.resourceVersion = resourceVersion;
    this.resourceVersionExpired = false;
    this.markHealthy();
    for (const change of storeChanges(previous, fresh)) this.emit(change.type, change.object, change.old);
    if (!this.syncedFlag) {
      this.syncedFlag = true;
      for (const resolve of this.syncWaiters.splice(0)) resolve();
    }
  }

  private watch(): Promise<WatchEnd> {
    const timeoutSeconds = watchTimeoutSeconds();
    return this.openWatch(this.resourceVersion, false, timeoutSeconds, this.abort.signal, (event) => this.onWatchEvent(event));
  }

  private openWatch(
    resourceVersion: string,
    sendInitialEvents: boolean,
    timeoutSeconds: number,
    signal: AbortSignal,
    onEvent: (event: WatchEvent) => void,
  ): Promise<WatchEnd> {
    this.stats.watches++;
    return watchOnce(this.options.client, this.options.path, {
      resourceVersion,
      sendInitialEvents,
      ...(this.options.labelSelector ? { labelSelector: this.options.labelSelector } : {}),
      ...(this.options.metadataOnly ? { accept: METADATA_OBJECT } : {}),
      timeoutSeconds,
      inactivityMs: this.options.inactivityMs ?? (timeoutSeconds + 60) * 1000,
      maxLineBytes: this.options.maxWatchEventBytes ?? DEFAULT_MAX_WATCH_LINE_BYTES,
      signal,
      onEvent,
    });
  }

  /** One event of a watch (or of a watch-list after its initial events): applied to the store and emitted. */
  private onWatchEvent(event: WatchEvent): void {
    this.delivered = true;
    this.markHealthy();
    const rv = isRecord(event.object['metadata']) ? event.object['metadata']['resourceVersion'] : undefined;
    if (event.type === 'BOOKMARK') {
      if (typeof rv === 'string') this.resourceVersion = rv;
      return;
    }
    if (typeof rv === 'string') this.resourceVersion = rv;
    if (!this.admits(event.object)) return;
    // Each of our writes comes back once as an event: its echo is known by name and resourceVersion without
    // the typed parse (three per converged UserGroup: its claim, its Secret, its status).
    if (event.type !== 'DELETED' && typeof rv === 'string' && this.cachedVersion(event.object['metadata']) === rv) return;
    const item = this.parse(event.object);
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
    if (!old || !isOlderResourceVersion(item.metadata.resourceVersion, old.metadata.resourceVersion)) this.store.set(key, item);
    this.emit(old ? 'updated' : 'added', this.store.get(key) ?? item, old);
  }

  /** The resourceVersion the store holds for the object these raw metadata name. */
  private cachedVersion(metadata: unknown): string | undefined {
    if (!isRecord(metadata) || typeof metadata['name'] !== 'string') return undefined;
    const namespace = typeof metadata['namespace'] === 'string' ? metadata['namespace'] : '';
    return this.store.get(objectKey({ namespace, name: metadata['name'] }))?.metadata.resourceVersion;
  }

  /** Whether the admit option lets this raw object in, or the store holds it already. */
  private admits(raw: unknown): boolean {
    const admit = this.options.admit;
    if (!admit || !isRecord(raw) || !isRecord(raw['metadata'])) return true;
    const metadata = raw['metadata'];
    if (admit(metadata)) return true;
    const { name, namespace } = metadata;
    return typeof name === 'string' && this.store.has(objectKey({ namespace: typeof namespace === 'string' ? namespace : '', name }));
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

/**
 * A list page's byte bound: 500 small objects (a UserGroup is ~2 KiB, a Secret's metadata less) fit many
 * times over, and even a page cut to one object fits the largest etcd stores (1.5 MiB), with room.
 */
export const DEFAULT_MAX_PAGE_BYTES = 8 << 20;
/** The longest wait between failed lists or watches. */
const RETRY_MAX_MS = 30_000;
/**
 * How long past its timeoutSeconds a watch-list may go without its initial-events-end bookmark before the
 * informer gives up on it (the same slack as the default inactivity bound).
 */
const INITIAL_EVENTS_GRACE_SECONDS = 60;

/** A watch's timeoutSeconds: randomised per watch, as client-go's reflector does, so that many watches do not reconnect in step. */
function watchTimeoutSeconds(): number {
  return 300 + Math.floor(Math.random() * 300);
}

/** One difference between the store and a new complete state, as the handlers are told of it. */
export interface StoreChange<T> {
  readonly type: InformerEventType;
  readonly object: T;
  readonly old: T | undefined;
}

/**
 * What a (re)list changed, in the order it is emitted: objects new to the store (added) or at another
 * resourceVersion (updated, with the old one), then the objects that are gone (deleted). An object at the
 * same resourceVersion is unchanged: nothing.
 */
export function* storeChanges<T extends Cached>(previous: ReadonlyMap<string, T>, fresh: ReadonlyMap<string, T>): Generator<StoreChange<T>> {
  for (const [key, object] of fresh) {
    const old = previous.get(key);
    if (!old) yield { type: 'added', object, old: undefined };
    else if (old.metadata.resourceVersion !== object.metadata.resourceVersion) yield { type: 'updated', object, old };
  }
  for (const [key, old] of previous) if (!fresh.has(key)) yield { type: 'deleted', object: old, old: undefined };
}

/** How the last list page went: abandoned over the byte bound, or read whole with its size. */
export type PageOutcome = { readonly tooLarge: true } | { readonly tooLarge: false; readonly bytes: number; readonly maxBytes: number };

/**
 * The `limit` of the next list page: halved (down to 1) after a page over the byte bound; after a page that
 * used less than half the bound, doubled back towards the page size, so a few large objects early in a list
 * do not slow the rest of it. Never above the page size, never below 1.
 */
export function nextPageLimit(current: number, pageSize: number, last: PageOutcome): number {
  if (last.tooLarge) return Math.max(1, Math.floor(current / 2));
  if (last.bytes < last.maxBytes / 2) return Math.min(pageSize, current * 2);
  return Math.min(pageSize, current);
}

const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/** resourceVersions are opaque, but etcd-backed ones are increasing integers; compare only when both are. */
function isOlderResourceVersion(candidate: string, current: string): boolean {
  if (!/^\d+$/.test(candidate) || !/^\d+$/.test(current)) return false;
  return BigInt(candidate) < BigInt(current);
}
