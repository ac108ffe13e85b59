import { splitKey } from '../api/meta.js';
import type { Cached, Informer, InformerHandler } from './informer.js';

/** Read access to what the informers hold, whatever namespaces they cover. */
export interface ObjectCache<T> {
  get(key: string): T | undefined;
  list(): T[];
}

/**
 * One logical cache over one informer per watched namespace (or one cluster-wide
 * informer when `--namespaces` is not set).
 */
export class InformerGroup<T extends Cached> implements ObjectCache<T> {
  private readonly byNamespace: Map<string, Informer<T>>;

  /** `informers` maps a namespace to its informer; the key '' means all namespaces. */
  constructor(informers: ReadonlyMap<string, Informer<T>>) {
    this.byNamespace = new Map(informers);
  }

  get informers(): Informer<T>[] {
    return [...this.byNamespace.values()];
  }

  private informerFor(namespace: string): Informer<T> | undefined {
    return this.byNamespace.get(namespace) ?? this.byNamespace.get('');
  }

  get(key: string): T | undefined {
    return this.informerFor(splitKey(key).namespace)?.get(key);
  }

  list(): T[] {
    return this.informers.flatMap((i) => i.list());
  }

  upsertLocal(object: T): void {
    this.informerFor(object.metadata.namespace)?.upsertLocal(object);
  }

  on(handler: InformerHandler<T>): void {
    for (const informer of this.informers) informer.on(handler);
  }

  start(): void {
    for (const informer of this.informers) informer.start();
  }

  async waitForSync(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.waitForSync()));
  }

  get synced(): boolean {
    return this.informers.every((i) => i.synced);
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.stop()));
  }
}
