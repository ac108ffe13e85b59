// Read-only caches over the informers: one logical cache across namespaces, and a type-narrowed view of one.
import { splitKey } from '../api/meta.js';
import type { Cached, Informer, InformerHandler } from './informer.js';

/** Read access to what the informers hold, whatever namespaces they cover. */
export interface ObjectCache<T> {
  get(key: string): T | undefined;
  list(): T[];
}

/** Where a writer puts what it just wrote (or read), so it is known before its watch event: Informer.upsertLocal. */
export interface LocalCache<T> {
  upsertLocal(object: T): void;
}

/**
 * One logical cache over one informer per watched namespace (or one cluster-wide
 * informer when `--namespaces` is not set).
 */
export class InformerGroup<T extends Cached> implements ObjectCache<T>, LocalCache<T> {
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

/**
 * The objects of one InformerGroup that pass a type guard, as a cache of their own: one watch can feed two
 * kinds of entry (e.g. token Secrets and the names of all other Secrets). An object that changes kind is an
 * add or a delete here, as a label-selected watch reports an object entering or leaving its selector.
 */
export class NarrowedCache<T extends Cached, U extends T> implements ObjectCache<U>, LocalCache<U> {
  constructor(
    private readonly group: Pick<InformerGroup<T>, 'get' | 'list' | 'upsertLocal' | 'on'>,
    private readonly is: (object: T) => object is U,
  ) {}

  get(key: string): U | undefined {
    const object = this.group.get(key);
    return object !== undefined && this.is(object) ? object : undefined;
  }

  list(): U[] {
    return this.group.list().filter((o): o is U => this.is(o));
  }

  upsertLocal(object: U): void {
    this.group.upsertLocal(object);
  }

  on(handler: InformerHandler<U>): void {
    this.group.on((type, object, old) => {
      const now = this.is(object) ? object : undefined;
      const before = old !== undefined && this.is(old) ? old : undefined;
      if (type === 'deleted') {
        const gone = now ?? before;
        if (gone) handler('deleted', gone, undefined);
      } else if (now) handler(before ? 'updated' : 'added', now, before);
      else if (before) handler('deleted', before, undefined);
    });
  }
}
