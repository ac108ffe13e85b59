import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../src/kube/http.js';
import { Informer, storeChanges, type InformerEventType } from '../../src/kube/informer.js';
import type { KubeAccess } from '../../src/kube/kubeconfig.js';
import {
  afterUnfinishedWatchList,
  eventResourceVersion,
  initialEventMeaning,
  isInitialEventsEnd,
  isWatchListRefusal,
  type UnfinishedWatchList,
} from '../../src/kube/watch-list.js';
import type { WatchEnd, WatchEvent } from '../../src/kube/watch-stream.js';

/*
 * The WatchList protocol in the informer: what an event means before the initial events end, what to do
 * when a watch-list does not get there, the diff a (re)list emits, and the informer against a stand-in
 * apiserver (HTTP on loopback) that scripts each request: startup by one watch-list, a re-list after 410
 * by another (diffed), the fallback to paged LIST on refusal (remembered) and on an unfinished stream (not).
 * The real apiserver's side is in test/integration/watch-list.test.ts.
 */

interface Thing {
  metadata: { namespace: string; name: string; resourceVersion: string };
}
const thing = (name: string, rv: string): Thing => ({ metadata: { namespace: 'ns', name, resourceVersion: rv } });
const event = (type: WatchEvent['type'], object: object): WatchEvent => ({ type, object: { ...object } });
const endBookmark = (rv: string): WatchEvent =>
  event('BOOKMARK', { kind: 'Thing', metadata: { resourceVersion: rv, annotations: { 'k8s.io/initial-events-end': 'true' } } });

describe('initialEventMeaning', () => {
  it('tells objects of the state, deletions, ordinary bookmarks and the initial-events-end bookmark apart', () => {
    expect(initialEventMeaning(event('ADDED', thing('a', '1')))).toBe('object');
    expect(initialEventMeaning(event('MODIFIED', thing('a', '2')))).toBe('object');
    expect(initialEventMeaning(event('DELETED', thing('a', '3')))).toBe('deleted');
    expect(initialEventMeaning(event('BOOKMARK', { metadata: { resourceVersion: '4' } }))).toBe('bookmark');
    expect(initialEventMeaning(endBookmark('5'))).toBe('end');
  });

  it('takes only a BOOKMARK whose annotation is exactly "true" as the end', () => {
    expect(isInitialEventsEnd(endBookmark('5'))).toBe(true);
    expect(isInitialEventsEnd(event('BOOKMARK', { metadata: { resourceVersion: '5', annotations: { 'k8s.io/initial-events-end': 'false' } } }))).toBe(false);
    expect(isInitialEventsEnd(event('BOOKMARK', { metadata: { resourceVersion: '5', annotations: 'k8s.io/initial-events-end' } }))).toBe(false);
    expect(isInitialEventsEnd(event('BOOKMARK', { metadata: 'x' }))).toBe(false);
    // The annotation on an object is the object's business, not the protocol's.
    expect(isInitialEventsEnd(event('ADDED', { metadata: { name: 'a', annotations: { 'k8s.io/initial-events-end': 'true' } } }))).toBe(false);
  });

  it('reads the resourceVersion of an event, "" when there is none', () => {
    expect(eventResourceVersion(endBookmark('42'))).toBe('42');
    expect(eventResourceVersion(event('BOOKMARK', { metadata: {} }))).toBe('');
    expect(eventResourceVersion(event('BOOKMARK', { metadata: { resourceVersion: 42 } }))).toBe('');
  });
});

describe('afterUnfinishedWatchList', () => {
  const attempt = (end: WatchEnd, over: Partial<UnfinishedWatchList> = {}): UnfinishedWatchList => ({
    end,
    resourceVersion: '',
    elapsedMs: 1_000,
    timeoutMs: 300_000,
    ...over,
  });
  const failed = (status: number | undefined, message: string): WatchEnd => ({ kind: 'failed', status, message });

  it('lists in pages from now on when the apiserver refuses the watch-list', () => {
    const refused = { next: 'list', remember: true, reason: 'the apiserver refused the watch-list request' };
    // The apiserver's answer with the feature off, or from before it (kube-apiserver < 1.27).
    expect(afterUnfinishedWatchList(attempt(failed(422, 'HTTP 422: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch')))).toEqual(
      refused,
    );
    expect(afterUnfinishedWatchList(attempt(failed(400, 'HTTP 400: bad request')))).toEqual(refused);
    // The same refusal as an ERROR event in a 200 stream.
    expect(afterUnfinishedWatchList(attempt(failed(422, 'watch error: sendInitialEvents is forbidden for watch')))).toEqual(refused);
    expect(afterUnfinishedWatchList(attempt(failed(403, 'HTTP 403: sendInitialEvents is not allowed here')))).toEqual(refused);
  });

  it('lists in pages this time only for failures that say nothing against watch-lists', () => {
    const once = (end: WatchEnd, over?: Partial<UnfinishedWatchList>) => afterUnfinishedWatchList(attempt(end, over));
    expect(once(failed(403, 'HTTP 403: secrets is forbidden: User "x" cannot watch resource "secrets"'))).toMatchObject({ next: 'list', remember: false });
    expect(once(failed(404, 'HTTP 404: the server could not find the requested resource'))).toMatchObject({ next: 'list', remember: false });
    expect(once(failed(500, 'HTTP 500: etcdserver: leader changed'))).toMatchObject({ next: 'list', remember: false });
    expect(once(failed(200, 'watch event larger than 4194304 bytes'))).toMatchObject({ next: 'list', remember: false });
    expect(once(failed(undefined, 'ECONNRESET: socket hang up'))).toMatchObject({ next: 'list', remember: false });
    expect(once({ kind: 'silent', ms: 360_000 })).toMatchObject({ next: 'list', remember: false });
    // An apiserver shutting down ends its watches early: that is no sign of an apiserver without watch-lists.
    expect(once({ kind: 'closed' }, { elapsedMs: 299_000 })).toEqual({
      next: 'list',
      remember: false,
      reason: 'the watch-list ended before its initial events did (closed)',
    });
    // A 410 for the latest state (it cannot be expired): list.
    expect(once({ kind: 'gone' })).toMatchObject({ next: 'list', remember: false });
  });

  it('remembers a watch-list that ran its whole timeout without the end bookmark (a server ignoring sendInitialEvents)', () => {
    const atTimeout = afterUnfinishedWatchList(attempt({ kind: 'closed' }, { elapsedMs: 300_000 }));
    expect(atTimeout).toEqual({ next: 'list', remember: true, reason: 'no initial-events-end bookmark within the watch timeout' });
    // Given up on by the informer itself, past the timeout plus its grace.
    expect(afterUnfinishedWatchList(attempt({ kind: 'closed' }, { elapsedMs: 360_000 }))).toEqual(atTimeout);
  });

  it('asks again for the latest state when the resourceVersion it asked for is expired or too new for this apiserver', () => {
    expect(afterUnfinishedWatchList(attempt({ kind: 'gone' }, { resourceVersion: '1234' }))).toEqual({ next: 'latest' });
    const tooLarge = failed(504, 'watch error: Timeout: Too large resource version: 999999999, current: 377');
    expect(afterUnfinishedWatchList(attempt(tooLarge, { resourceVersion: '999999999' }))).toEqual({ next: 'latest' });
    // Asked for the latest already: nothing newer to ask for.
    expect(afterUnfinishedWatchList(attempt(tooLarge))).toMatchObject({ next: 'list', remember: false });
  });

  it('backs off, rather than adding a LIST, while the apiserver is away or overloaded', () => {
    expect(afterUnfinishedWatchList(attempt(failed(429, 'HTTP 429: too many requests')))).toEqual({ next: 'backoff' });
    expect(afterUnfinishedWatchList(attempt(failed(undefined, 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443')))).toEqual({ next: 'backoff' });
  });

  it('isWatchListRefusal: 400 and 422 always, other client errors only when they name the watch-list parameters, never 408/410/429 or 5xx', () => {
    expect(isWatchListRefusal(422, '')).toBe(true);
    expect(isWatchListRefusal(400, '')).toBe(true);
    expect(isWatchListRefusal(403, 'resourceVersionMatch forbidden')).toBe(true);
    expect(isWatchListRefusal(405, 'watch-list is not supported')).toBe(true);
    expect(isWatchListRefusal(403, 'forbidden')).toBe(false);
    for (const status of [408, 410, 429, 500, 503, 200]) expect(isWatchListRefusal(status, 'sendInitialEvents'), String(status)).toBe(false);
    expect(isWatchListRefusal(undefined, 'sendInitialEvents')).toBe(false);
  });
});

describe('storeChanges', () => {
  const map = (...things: Thing[]) => new Map(things.map((t) => [`ns/${t.metadata.name}`, t]));

  it('added and updated (with the old object) in the new state, then deleted; nothing for an unchanged resourceVersion', () => {
    const previous = map(thing('same', '1'), thing('changed', '2'), thing('gone', '3'));
    const fresh = map(thing('new', '9'), thing('same', '1'), thing('changed', '8'));
    expect([...storeChanges(previous, fresh)]).toEqual([
      { type: 'added', object: thing('new', '9'), old: undefined },
      { type: 'updated', object: thing('changed', '8'), old: thing('changed', '2') },
      { type: 'deleted', object: thing('gone', '3'), old: undefined },
    ]);
  });

  it('everything is added into an empty store, everything deleted from an empty state, nothing for equal states', () => {
    expect([...storeChanges(map(), map(thing('a', '1'), thing('b', '2')))].map((c) => c.type)).toEqual(['added', 'added']);
    expect([...storeChanges(map(thing('a', '1')), map())]).toEqual([{ type: 'deleted', object: thing('a', '1'), old: undefined }]);
    expect([...storeChanges(map(thing('a', '1')), map(thing('a', '1')))]).toEqual([]);
  });
});

// The informer against a stand-in apiserver whose every request is scripted by the test.

const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A request as the stand-in saw it: a watch-list, a plain watch or a list, and its resourceVersion. */
interface Seen {
  readonly kind: 'watch-list' | 'watch' | 'list';
  readonly resourceVersion: string;
  readonly query: URLSearchParams;
}

/** Each request is answered by the next script in line; the last one answers every request after it. */
type Script = (res: ServerResponse, seen: Seen) => void;

async function standIn(scripts: Script[]): Promise<{ client: KubeClient; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const query = new URL(req.url ?? '/', 'http://x').searchParams;
    const kind = query.get('sendInitialEvents') === 'true' ? 'watch-list' : query.get('watch') === 'true' ? 'watch' : 'list';
    const request = { kind, resourceVersion: query.get('resourceVersion') ?? '', query } as const;
    seen.push(request);
    const script = scripts[Math.min(seen.length, scripts.length) - 1];
    if (!script) throw new Error('no script');
    script(res, request);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const access: KubeAccess = {
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tls: {},
    authorization: () => Promise.resolve(undefined),
    namespace: undefined,
    context: 'x',
  };
  return { client: await KubeClient.create(access, 'test'), seen };
}

const streaming = (res: ServerResponse): void => void res.writeHead(200, { 'content-type': 'application/json' });
/** A line of a watch stream: an event, or an ERROR (which ends the watch; watchOnce never passes it on). */
type Line = WatchEvent | { readonly type: 'ERROR'; readonly object: Record<string, unknown> };
const errorLine = (code: number, message: string): Line => ({ type: 'ERROR', object: { kind: 'Status', code, message } });
const send = (res: ServerResponse, ...events: Line[]): void => {
  for (const e of events) res.write(`${JSON.stringify(e)}\n`);
};
const added = (name: string, rv: string): WatchEvent => event('ADDED', thing(name, rv));
/** A plain watch that sends nothing more (held open, as a quiet real one, until the informer stops). */
const quietWatch: Script = (res) => streaming(res);
const listOf =
  (rv: string, ...things: Thing[]): Script =>
  (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'List', metadata: { resourceVersion: rv }, items: things }));
  };
const status = (code: number, message: string): Script => {
  return (res) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', code, message }));
  };
};
const goneEvent = errorLine(410, 'too old resource version: 1 (10)');

interface Recorded {
  readonly type: InformerEventType;
  readonly name: string;
  readonly rv: string;
  /** What the store held when the handler ran, and whether the informer said it was synced. */
  readonly storeSize: number;
}

function informerOver(
  client: KubeClient,
  options: { watchList?: boolean; admit?: (metadata: Readonly<Record<string, unknown>>) => boolean } = {},
): { informer: Informer<Thing>; events: Recorded[]; parsed: () => number } {
  let parsed = 0;
  const informer = new Informer<Thing>({
    name: 'things',
    client,
    path: '/apis/x/v1/things',
    parse: (raw) => {
      parsed++;
      const m = (raw as { metadata?: Thing['metadata'] }).metadata;
      return m?.name ? { metadata: { namespace: m.namespace, name: m.name, resourceVersion: m.resourceVersion } } : undefined;
    },
    log: pino({ level: 'silent' }),
    retryInitialMs: 10,
    ...options,
  });
  const events: Recorded[] = [];
  informer.on((type, object) => events.push({ type, name: object.metadata.name, rv: object.metadata.resourceVersion, storeSize: informer.list().length }));
  return { informer, events, parsed: () => parsed };
}

const names = (informer: Informer<Thing>): string[] =>
  informer
    .list()
    .map((t) => `${t.metadata.name}@${t.metadata.resourceVersion}`)
    .sort();

describe('Informer over a watch-list', () => {
  it('starts with one watch-list request: nothing is emitted before the end bookmark, all of it at once then, and the same connection goes on as the watch', async () => {
    let release: (() => void) | undefined;
    const { client, seen } = await standIn([
      (res) => {
        streaming(res);
        send(res, added('a', '1'), added('b', '2'), event('BOOKMARK', { metadata: { resourceVersion: '3' } }), added('c', '3'));
        release = () => {
          send(res, endBookmark('5'));
          setTimeout(() => send(res, event('MODIFIED', thing('b', '6')), event('DELETED', thing('a', '7'))), 20);
        };
      },
    ]);
    const { informer, events, parsed } = informerOver(client);
    try {
      informer.start();
      // The three initial events have arrived (and been parsed), but they are no news until the state is complete.
      await expect.poll(() => parsed()).toBe(3);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(informer.synced).toBe(false);
      expect(events).toEqual([]);
      expect(informer.list()).toEqual([]);

      release?.();
      await informer.waitForSync();
      // Each handler call saw the whole state in the store already.
      expect(events).toEqual(['a', 'b', 'c'].map((name, i) => ({ type: 'added', name, rv: String(i + 1), storeSize: 3 })));
      expect(names(informer)).toEqual(['a@1', 'b@2', 'c@3']);

      await expect.poll(() => events.length).toBe(5);
      expect(events.slice(3)).toEqual([
        { type: 'updated', name: 'b', rv: '6', storeSize: 3 },
        { type: 'deleted', name: 'a', rv: '7', storeSize: 2 },
      ]);
      expect(names(informer)).toEqual(['b@6', 'c@3']);
      expect(seen.map((s) => s.kind)).toEqual(['watch-list']);
      const query = Object.fromEntries(seen[0]!.query);
      expect(query).toMatchObject({
        watch: 'true',
        sendInitialEvents: 'true',
        resourceVersionMatch: 'NotOlderThan',
        allowWatchBookmarks: 'true',
        resourceVersion: '',
      });
      expect(Number(query['timeoutSeconds'])).toBeGreaterThanOrEqual(300);
      expect(informer.stats).toMatchObject({ lists: 0, watchLists: 1, watches: 1, gone: 0, failures: 0 });
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('knows the echo of its own write-through by name and resourceVersion: no parse, no handler; other versions are news', async () => {
    let release: (() => void) | undefined;
    const { client } = await standIn([
      (res) => {
        streaming(res);
        send(res, added('a', '1'), endBookmark('2'));
        release = () => send(res, event('MODIFIED', thing('a', '5')), event('MODIFIED', thing('a', '6')));
      },
    ]);
    const { informer, events, parsed } = informerOver(client);
    try {
      informer.start();
      await informer.waitForSync();
      // What a writer of ours does with the object it got back from the apiserver.
      informer.upsertLocal(thing('a', '5'));
      const parsedBefore = parsed();
      release?.();
      await expect.poll(() => events.length).toBe(2);
      expect(events[1]).toMatchObject({ type: 'updated', name: 'a', rv: '6' });
      expect(parsed() - parsedBefore).toBe(1);
      expect(names(informer)).toEqual(['a@6']);
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('after 410 Gone re-lists by watch-list for the latest state, and emits only what changed (deleted, updated, added)', async () => {
    const { client, seen } = await standIn([
      (res) => {
        streaming(res);
        send(res, added('a', '1'), added('b', '2'), added('c', '3'), endBookmark('10'));
        setTimeout(() => send(res, goneEvent), 50);
      },
      (res) => {
        streaming(res);
        send(res, added('a', '1'), added('b', '20'), added('d', '21'), endBookmark('30'));
      },
    ]);
    const { informer, events } = informerOver(client);
    try {
      informer.start();
      await informer.waitForSync();
      await expect.poll(() => seen.length).toBe(2);
      await expect.poll(() => events.length).toBe(6);
      expect(events.slice(3)).toEqual([
        { type: 'updated', name: 'b', rv: '20', storeSize: 3 },
        { type: 'added', name: 'd', rv: '21', storeSize: 3 },
        { type: 'deleted', name: 'c', rv: '3', storeSize: 3 },
      ]);
      expect(names(informer)).toEqual(['a@1', 'b@20', 'd@21']);
      // The resourceVersion it had is expired: the re-list asks for the latest state.
      expect(seen.map((s) => `${s.kind} ${s.resourceVersion}`)).toEqual(['watch-list ', 'watch-list ']);
      expect(informer.stats).toMatchObject({ lists: 0, watchLists: 2, watches: 2, gone: 1 });
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('re-lists after repeated watch failures from a state not older than its own, and asks for the latest when that one is too new for the apiserver', async () => {
    const { client, seen } = await standIn([
      (res) => {
        streaming(res);
        send(res, added('a', '1'), endBookmark('10'));
        res.end(); // the watch ends (as at its timeout): watched again from 10
      },
      status(500, 'etcdserver: leader changed'),
      status(500, 'etcdserver: leader changed'),
      status(500, 'etcdserver: leader changed'),
      (res) => {
        streaming(res);
        send(res, errorLine(504, 'Timeout: Too large resource version: 10, current: 5'));
        res.end();
      },
      (res) => {
        streaming(res);
        send(res, added('a', '1'), added('b', '4'), endBookmark('5'));
      },
    ]);
    const { informer, events } = informerOver(client);
    try {
      informer.start();
      await expect.poll(() => events.length, { timeout: 5000 }).toBe(2);
      expect(seen.map((s) => `${s.kind} ${s.resourceVersion}`)).toEqual(['watch-list ', 'watch 10', 'watch 10', 'watch 10', 'watch-list 10', 'watch-list ']);
      expect(seen[4]!.query.get('resourceVersionMatch')).toBe('NotOlderThan');
      expect(events[1]).toEqual({ type: 'added', name: 'b', rv: '4', storeSize: 2 });
      expect(informer.stats).toMatchObject({ lists: 0, watchLists: 2, failures: 4 });
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('falls back to a paged LIST when the apiserver refuses watch-lists, and remembers it: the re-list after 410 is a LIST too', async () => {
    const { client, seen } = await standIn([
      status(422, 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch'),
      listOf('10', thing('a', '1'), thing('b', '2')),
      (res) => {
        streaming(res);
        send(res, goneEvent);
        res.end();
      },
      listOf('20', thing('b', '2'), thing('c', '15')),
      quietWatch,
    ]);
    const { informer, events } = informerOver(client);
    try {
      informer.start();
      await informer.waitForSync();
      await expect.poll(() => seen.length).toBe(5);
      await expect.poll(() => events.length).toBe(4);
      expect(seen.map((s) => `${s.kind} ${s.resourceVersion}`)).toEqual(['watch-list ', 'list ', 'watch 10', 'list ', 'watch 20']);
      expect(events.map((e) => `${e.type} ${e.name}`)).toEqual(['added a', 'added b', 'added c', 'deleted a']);
      expect(informer.stats).toMatchObject({ lists: 2, watchLists: 0, watches: 3, failures: 1, gone: 1 });
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('falls back to a paged LIST for a watch-list that ends before its end bookmark, and tries a watch-list again at the next re-list', async () => {
    const { client, seen } = await standIn([
      (res) => {
        streaming(res);
        send(res, added('a', '1'));
        res.end(); // e.g. an apiserver shutting down
      },
      listOf('10', thing('a', '1'), thing('b', '2')),
      (res) => {
        streaming(res);
        send(res, goneEvent);
        res.end();
      },
      (res) => {
        streaming(res);
        send(res, added('b', '2'), endBookmark('20'));
      },
    ]);
    const { informer, events } = informerOver(client);
    try {
      informer.start();
      await informer.waitForSync();
      expect(names(informer)).toEqual(['a@1', 'b@2']);
      await expect.poll(() => seen.length).toBe(4);
      await expect.poll(() => events.length).toBe(3);
      expect(seen.map((s) => `${s.kind} ${s.resourceVersion}`)).toEqual(['watch-list ', 'list ', 'watch 10', 'watch-list ']);
      expect(events.map((e) => `${e.type} ${e.name}`)).toEqual(['added a', 'added b', 'deleted a']);
      expect(informer.stats).toMatchObject({ lists: 1, watchLists: 1, watches: 3 });
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('lists in pages only with watchList: false', async () => {
    const { client, seen } = await standIn([listOf('10', thing('a', '1')), quietWatch]);
    const { informer } = informerOver(client, { watchList: false });
    try {
      informer.start();
      await informer.waitForSync();
      await expect.poll(() => seen.length).toBe(2);
      expect(seen.map((s) => `${s.kind} ${s.resourceVersion}`)).toEqual(['list ', 'watch 10']);
      expect(informer.stats).toMatchObject({ lists: 1, watchLists: 0, watches: 1 });
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it("with admit (a shard's share): other namespaces' objects are neither parsed, stored nor emitted, but one put in by upsertLocal is followed", async () => {
    const inNs = (ns: string, name: string, rv: string): Thing => ({ metadata: { namespace: ns, name, resourceVersion: rv } });
    let release: (() => void) | undefined;
    const { client } = await standIn([
      (res) => {
        streaming(res);
        send(res, event('ADDED', inNs('mine', 'a', '1')), event('ADDED', inNs('theirs', 'b', '2')), endBookmark('3'));
        release = () =>
          send(
            res,
            event('MODIFIED', inNs('theirs', 'b', '4')),
            event('MODIFIED', inNs('theirs', 'c', '6')),
            event('MODIFIED', inNs('mine', 'a', '7')),
            event('DELETED', inNs('theirs', 'c', '8')),
          );
      },
    ]);
    const { informer, events, parsed } = informerOver(client, { admit: (m) => m['namespace'] === 'mine' });
    try {
      informer.start();
      await informer.waitForSync();
      expect(names(informer)).toEqual(['a@1']);
      expect(parsed()).toBe(1);
      // A reconcile read theirs/c (another shard's claim, say): from now on its changes count.
      informer.upsertLocal(inNs('theirs', 'c', '5'));
      release?.();
      await expect.poll(() => events.length).toBe(4);
      expect(events.map((e) => `${e.type} ${e.name}@${e.rv}`)).toEqual(['added a@1', 'updated c@6', 'updated a@7', 'deleted c@8']);
      expect(names(informer)).toEqual(['a@7']);
      expect(parsed()).toBe(4);
    } finally {
      await informer.stop();
      client.close();
    }
  });
});
