import { setTimeout as sleep } from 'node:timers/promises';
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { kubectl } from './cluster.js';

interface Listed {
  metadata: { resourceVersion?: string };
}

interface List {
  metadata: { resourceVersion?: string };
  items: unknown[];
}

async function listOnce(path: string, query: Readonly<Record<string, string>>): Promise<List> {
  const search = new URLSearchParams(query).toString();
  return JSON.parse(await kubectl(['get', '--raw', search === '' ? path : `${path}?${search}`])) as List;
}

export type WatchEventType = 'LISTED' | 'ADDED' | 'MODIFIED' | 'DELETED';

/**
 * A watch that keeps watching for as long as a test needs, through what ends a single watch request: the
 * apiserver closing it (it does whenever a CRD of the resource changes: an upgrade applies new CRDs), client-node's
 * 30 s inactivity timeout, a refused request while the resource is being re-served. It resumes from the last
 * resourceVersion seen, so no event is missed; only after 410 Gone does it list again, and then every object is
 * reported as LISTED (a change that came and went in between is then lost, and `relists` says it happened).
 */
export class ResumableWatch<T extends Listed> {
  /** Watch requests that ended and were made again. */
  resumes = 0;
  /** Lists after the first (after 410 Gone). */
  relists = 0;
  #resourceVersion: string | undefined;
  #abort: AbortController | undefined;
  #stopped = false;
  readonly #loop: Promise<void>;

  private constructor(
    private readonly kc: KubeConfig,
    private readonly path: string,
    private readonly query: Readonly<Record<string, string>>,
    private readonly onEvent: (type: WatchEventType, object: T) => void,
    first: List,
  ) {
    this.#report(first);
    this.#loop = this.#run();
  }

  /** Lists `path` (reporting every item as LISTED) and watches it from there until stop(). */
  static async start<T extends Listed>(
    kc: KubeConfig,
    path: string,
    query: Readonly<Record<string, string>>,
    onEvent: (type: WatchEventType, object: T) => void,
  ): Promise<ResumableWatch<T>> {
    return new ResumableWatch(kc, path, query, onEvent, await listOnce(path, query));
  }

  #report(list: List): void {
    for (const item of list.items) this.onEvent('LISTED', item as T);
    this.#resourceVersion = list.metadata.resourceVersion;
  }

  async #run(): Promise<void> {
    const watch = new Watch(this.kc);
    while (!this.#stopped) {
      if (this.#resourceVersion === undefined) {
        try {
          this.#report(await listOnce(this.path, this.query));
          this.relists += 1;
        } catch {
          await sleep(250);
          continue;
        }
      }
      const ending = { gone: false };
      const ended = new Promise<unknown>((resolve) => {
        void watch
          .watch(
            this.path,
            { ...this.query, resourceVersion: this.#resourceVersion, allowWatchBookmarks: true },
            (type: string, object: T & { code?: number }) => {
              if (type === 'ERROR') {
                if (object.code === 410) ending.gone = true;
                return;
              }
              if (object.metadata.resourceVersion !== undefined) this.#resourceVersion = object.metadata.resourceVersion;
              if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') this.onEvent(type, object);
            },
            resolve,
          )
          .then((abort) => {
            this.#abort = abort;
            if (this.#stopped) abort.abort();
          });
      });
      const err = await ended;
      // stop() may have been called meanwhile (a method call, so the loop's narrowing does not hide it).
      if (this.#isStopped()) break;
      if (ending.gone) this.#resourceVersion = undefined;
      this.resumes += 1;
      // A refused request (the resource being re-served) is retried soon, not in a tight loop.
      if (err !== null && err !== undefined) await sleep(200);
    }
  }

  #isStopped(): boolean {
    return this.#stopped;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort?.abort();
    await this.#loop;
  }
}
