import { paths } from '../../src/kube/paths.js';
import { OWNED_SECRETS, meta, readyForGeneration, secretData, type BenchCluster } from './cluster.js';

/**
 * Counts, from watches, the UserGroups Ready for their current generation and the token Secrets present, and
 * notes the moment both reach N: no polling, so the measurement adds no list load of its own.
 */
export class ConvergenceTracker {
  readonly ready = new Set<string>();
  readonly secrets = new Set<string>();
  doneAt: number | undefined;
  error: string | undefined;
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
        { onError },
      ),
    );
    this.watches.push(
      cluster.watch(
        secretPath,
        secretVersion,
        (event) => {
          const { name } = meta(event.object);
          if (event.type !== 'DELETED' && secretData(event.object, 'token')) this.secrets.add(name);
          else this.secrets.delete(name);
          this.check();
        },
        { labelSelector: this.secretSelector, onError },
      ),
    );
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
