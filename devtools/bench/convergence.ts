import { paths } from '../../src/kube/paths.js';
import type { WatchEvent } from '../../src/kube/watch-stream.js';
import { OWNED_SECRETS, meta, readyForGeneration, secretData, type BenchCluster, type Json } from './cluster.js';

/**
 * Counts, from watches, the UserGroups Ready for their current generation and the token Secrets present, and
 * notes the moment both reach N: no polling, so the measurement adds no list load of its own. Should a watch
 * fall behind the apiserver's history (410 Gone: at 100,000 groups this process is busy serving the simulator
 * too), its set is counted again from a paged list and the watch goes on from there. Over several namespaces (the
 * scale phase's spread) it watches cluster-wide, counts only objects in those namespaces, and keys them
 * "namespace/name" (every namespace has its ug-00000).
 */
export class ConvergenceTracker {
  readonly ready = new Set<string>();
  readonly secrets = new Set<string>();
  doneAt: number | undefined;
  error: string | undefined;
  /** How often a watch had to be replaced by a list (410 Gone). */
  relists = 0;
  private readonly watches: { stop(): void }[] = [];

  /**
   * `secretSelector`: the label selector of the token Secrets; the operator's own by default (the Go peer of the
   * `peer` phase labels its Secrets differently).
   */
  constructor(
    private readonly n: number,
    private readonly secretSelector: string = OWNED_SECRETS,
  ) {}

  async start(cluster: BenchCluster, namespace: string | readonly string[]): Promise<void> {
    const namespaces = typeof namespace === 'string' ? [namespace] : namespace;
    // One namespace: its own collections, as ever; several: cluster-wide, filtered here.
    const scope = namespaces.length === 1 ? namespaces[0] : undefined;
    const watched = new Set(namespaces);
    const keyOf = (object: Json): string | undefined => {
      const m = meta(object);
      if (scope !== undefined) return m.name;
      return watched.has(m.namespace) ? `${m.namespace}/${m.name}` : undefined;
    };
    const ugPath = paths.userGroups(scope);
    const secretPath = paths.secrets(scope);
    const [ugVersion, secretVersion] = await Promise.all([cluster.collectionVersion(ugPath), cluster.collectionVersion(secretPath, this.secretSelector)]);
    const onError = (message: string): void => {
      this.error ??= message;
    };
    const hasToken = (object: Json): boolean => Boolean(secretData(object, 'token'));
    const track = (set: Set<string>, counts: (o: Json) => boolean) => (event: WatchEvent) => {
      const key = keyOf(event.object);
      if (key === undefined) return;
      if (event.type !== 'DELETED' && counts(event.object)) set.add(key);
      else set.delete(key);
      this.check();
    };
    this.watches.push(
      cluster.watch(ugPath, ugVersion, track(this.ready, readyForGeneration), {
        onError,
        relist: () => this.recount(cluster, ugPath, undefined, this.ready, readyForGeneration, keyOf),
      }),
    );
    this.watches.push(
      cluster.watch(secretPath, secretVersion, track(this.secrets, hasToken), {
        labelSelector: this.secretSelector,
        onError,
        relist: () => this.recount(cluster, secretPath, this.secretSelector, this.secrets, hasToken, keyOf),
      }),
    );
  }

  /** Counts one set again from a paged list (after a 410); resolves with the list's version to watch on from. */
  private async recount(
    cluster: BenchCluster,
    collection: string,
    labelSelector: string | undefined,
    set: Set<string>,
    counts: (o: Json) => boolean,
    keyOf: (o: Json) => string | undefined,
  ): Promise<string> {
    const fresh = new Set<string>();
    const version = await cluster.eachPage(collection, labelSelector, (items) => {
      for (const item of items) {
        const key = keyOf(item);
        if (key !== undefined && counts(item)) fresh.add(key);
      }
    });
    set.clear();
    for (const name of fresh) set.add(name);
    this.relists++;
    this.check();
    return version;
  }

  stop(): void {
    for (const w of this.watches) w.stop();
  }

  private check(): void {
    if (this.doneAt !== undefined || this.ready.size < this.n || this.secrets.size < this.n) return;
    for (const name of this.ready) if (!this.secrets.has(name)) return;
    this.doneAt = performance.now();
  }
}
