import { paths } from '../../src/kube/paths.js';
import { OWNED_SECRETS, meta, readyForGeneration, secretData, type BenchCluster, type Json } from './cluster.js';

/**
 * Counts, from watches, the UserGroups Ready for their current generation and the token Secrets present, and
 * notes the moment both reach N: no polling, so the measurement adds no list load of its own. Should a watch
 * fall behind the apiserver's history (410 Gone: at 100,000 groups this process is busy serving the simulator
 * too), its set is counted again from a paged list and the watch goes on from there.
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

  async start(cluster: BenchCluster, namespace: string): Promise<void> {
    const ugPath = paths.userGroups(namespace);
    const secretPath = paths.secrets(namespace);
    const [ugVersion, secretVersion] = await Promise.all([cluster.collectionVersion(ugPath), cluster.collectionVersion(secretPath, this.secretSelector)]);
    const onError = (message: string): void => {
      this.error ??= message;
    };
    const hasToken = (object: Json): boolean => Boolean(secretData(object, 'token'));
    this.watches.push(
      cluster.watch(
        ugPath,
        ugVersion,
        (event) => {
          const { name } = meta(event.object);
          if (event.type !== 'DELETED' && readyForGeneration(event.object)) this.ready.add(name);
          else this.ready.delete(name);
          this.check();
        },
        { onError, relist: () => this.recount(cluster, ugPath, undefined, this.ready, readyForGeneration) },
      ),
    );
    this.watches.push(
      cluster.watch(
        secretPath,
        secretVersion,
        (event) => {
          const { name } = meta(event.object);
          if (event.type !== 'DELETED' && hasToken(event.object)) this.secrets.add(name);
          else this.secrets.delete(name);
          this.check();
        },
        { labelSelector: this.secretSelector, onError, relist: () => this.recount(cluster, secretPath, this.secretSelector, this.secrets, hasToken) },
      ),
    );
  }

  /** Counts one set again from a paged list (after a 410); resolves with the list's version to watch on from. */
  private async recount(
    cluster: BenchCluster,
    collection: string,
    labelSelector: string | undefined,
    set: Set<string>,
    counts: (o: Json) => boolean,
  ): Promise<string> {
    const fresh = new Set<string>();
    const version = await cluster.eachPage(collection, labelSelector, (items) => {
      for (const item of items) if (counts(item)) fresh.add(meta(item).name);
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
