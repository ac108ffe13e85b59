import { describe, expect, it } from 'vitest';
import { NarrowedCache } from '../../src/kube/cache.js';
import type { InformerEventType, InformerHandler } from '../../src/kube/informer.js';

/*
 * NarrowedCache: one informer's store seen as a cache of one kind of entry (the Secret cache: token Secrets and
 * the names of all others, from one watch). What a label-selected watch reports as an object entering or leaving
 * its selector, the narrowed cache must report as an add or a delete.
 */

interface Entry {
  readonly metadata: { readonly namespace: string; readonly name: string; readonly resourceVersion: string };
  readonly token?: true;
}
type Token = Entry & { readonly token: true };
const isToken = (e: Entry): e is Token => e.token === true;
const entry = (name: string, rv: string, token: boolean): Entry => ({
  metadata: { namespace: 'ns', name, resourceVersion: rv },
  ...(token ? { token: true } : {}),
});

/** A store with one handler, driven by hand as an informer would drive it. */
function fakeGroup(): { group: ConstructorParameters<typeof NarrowedCache<Entry, Token>>[0]; emit: InformerHandler<Entry>; store: Map<string, Entry> } {
  const store = new Map<string, Entry>();
  const handlers: InformerHandler<Entry>[] = [];
  const key = (e: Entry): string => `${e.metadata.namespace}/${e.metadata.name}`;
  return {
    store,
    group: {
      get: (k) => store.get(k),
      list: () => [...store.values()],
      upsertLocal: (e) => store.set(key(e), e),
      on: (h) => handlers.push(h),
    },
    emit: (type, object, old) => {
      if (type === 'deleted') store.delete(key(object));
      else store.set(key(object), object);
      for (const h of handlers) h(type, object, old);
    },
  };
}

describe('NarrowedCache', () => {
  it('gets and lists only the entries of its kind, and writes through to the one store', () => {
    const { group, emit, store } = fakeGroup();
    const tokens = new NarrowedCache(group, isToken);
    emit('added', entry('a', '1', true), undefined);
    emit('added', entry('b', '2', false), undefined);
    expect(tokens.get('ns/a')?.metadata.resourceVersion).toBe('1');
    expect(tokens.get('ns/b')).toBeUndefined();
    expect(tokens.list().map((e) => e.metadata.name)).toEqual(['a']);
    tokens.upsertLocal(entry('b', '3', true) as Token);
    expect(store.get('ns/b')?.token).toBe(true);
    expect(tokens.get('ns/b')?.metadata.resourceVersion).toBe('3');
  });

  it('reports a change of kind as an add or a delete, and nothing for the other kind', () => {
    const { group, emit } = fakeGroup();
    const seen: [InformerEventType, string, string | undefined][] = [];
    new NarrowedCache(group, isToken).on((type, object, old) => seen.push([type, object.metadata.resourceVersion, old?.metadata.resourceVersion]));
    emit('added', entry('x', '1', false), undefined); // another kind: nothing
    emit('updated', entry('x', '2', true), entry('x', '1', false)); // became a token Secret: added
    emit('updated', entry('x', '3', true), entry('x', '2', true)); // stays one: updated
    emit('updated', entry('x', '4', false), entry('x', '3', true)); // lost our label: deleted, as it was
    emit('updated', entry('x', '5', false), entry('x', '4', false)); // nothing
    emit('added', entry('y', '6', true), undefined);
    emit('deleted', entry('y', '7', true), entry('y', '6', true));
    // Deleted after a change of kind the watch did not show: still reported gone, as the store last held it.
    emit('added', entry('z', '8', true), undefined);
    emit('deleted', entry('z', '9', false), entry('z', '8', true));
    emit('deleted', entry('x', '10', false), entry('x', '5', false)); // nothing
    expect(seen).toEqual([
      ['added', '2', undefined],
      ['updated', '3', '2'],
      ['deleted', '3', undefined],
      ['added', '6', undefined],
      ['deleted', '7', undefined],
      ['added', '8', undefined],
      ['deleted', '8', undefined],
    ]);
  });
});
