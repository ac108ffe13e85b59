import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../src/kube/http.js';
import { Informer, type InformerEventType } from '../../src/kube/informer.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { adminKubeConfig, createNamespace, deleteNamespace, eventually } from '../support/kube.js';

/*
 * Issue 18, against the real kube-apiserver: an informer fills its cache with one watch-list request (the
 * WatchList protocol: sendInitialEvents, then the initial-events-end bookmark) where it used to make a LIST
 * request per 500 objects, and that request goes on as its watch. Requests are counted as the operator's
 * metrics count them, through the KubeClient's observer. The re-list after 410 Gone is in resilience.test.ts
 * (it restarts the apiserver); refusals and unfinished watch-lists, which this apiserver does not produce, are
 * in test/unit/watch-list.test.ts.
 */

/** More than a LIST page (500): listed in pages this takes two LIST requests. */
const N = 600;
const SELECTED = 'watch-list.test/set=a';

interface Meta {
  metadata: { namespace: string; name: string; resourceVersion: string };
}

interface Recorded {
  readonly type: InformerEventType;
  readonly name: string;
  /** The objects in the store when the handler ran, and whether the informer was synced then. */
  readonly storeSize: number;
}

describe('watch-list: an informer over many objects, against the real apiserver', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let namespace = '';

  beforeAll(async () => {
    kc = adminKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    namespace = await createNamespace('watch-list', kc);
    const started = Date.now();
    const create = (name: string, set: string) =>
      core.createNamespacedSecret({ namespace, body: { metadata: { name, labels: { 'watch-list.test/set': set } }, stringData: { k: name } } });
    for (let i = 0; i < N; i += 25) await Promise.all(Array.from({ length: Math.min(25, N - i) }, (_, j) => create(`s-${i + j}`, 'a')));
    // Not selected: the label selector applies to the watch-list too.
    for (const name of ['other-1', 'other-2']) await create(name, 'b');
    console.log(`[watch-list] ${N + 2} Secrets created in ${Date.now() - started} ms`);
  });
  afterAll(async () => {
    if (namespace) await deleteNamespace(namespace, kc);
  });

  /** An informer over the namespace's selected Secrets (metadata only, as the controller's), counting its requests. */
  async function informer(options: { watchList?: boolean } = {}) {
    const requests: string[] = [];
    const kinds = new Set<string>();
    const client = await KubeClient.create(await kubeAccessFromKubeConfig(kc), 'watch-list-test', (verb, code) => requests.push(`${verb} ${code}`));
    const inf = new Informer<Meta>({
      name: 'secrets',
      client,
      path: `/api/v1/namespaces/${namespace}/secrets`,
      labelSelector: SELECTED,
      metadataOnly: true,
      parse: (raw) => {
        const object = raw as { kind?: string; metadata?: Meta['metadata'] };
        kinds.add(String(object.kind));
        const m = object.metadata;
        return m && { metadata: { namespace: m.namespace, name: m.name, resourceVersion: m.resourceVersion } };
      },
      log: pino({ level: 'silent' }),
      ...options,
    });
    const events: Recorded[] = [];
    inf.on((type, object) => events.push({ type, name: object.metadata.name, storeSize: inf.list().length }));
    return { client, informer: inf, requests, events, kinds };
  }

  it(`starts over ${N} objects with exactly one WATCH request and no LIST; synced only once all of them are in; later changes arrive on the same connection`, async () => {
    const { client, informer: inf, requests, events, kinds } = await informer();
    try {
      const started = Date.now();
      inf.start();
      await inf.waitForSync();
      const tookMs = Date.now() - started;
      // Synced means complete: every handler call for the initial state saw all of it in the store already.
      expect(inf.list()).toHaveLength(N);
      expect(events).toHaveLength(N);
      expect(events.every((e) => e.type === 'added' && e.storeSize === N)).toBe(true);
      expect(new Set(events.map((e) => e.name)).size).toBe(N);
      // As PartialObjectMetadata (the Accept header of a metadata-only informer), selected by label.
      expect([...kinds]).toEqual(['PartialObjectMetadata']);
      expect(inf.get(`${namespace}/other-1`)).toBeUndefined();
      expect(requests).toEqual(['WATCH 200']);
      expect(inf.stats).toMatchObject({ watchLists: 1, lists: 0, watches: 1, failures: 0, largestPageBytes: 0 });
      console.log(`[watch-list] synced over ${N} Secrets in ${tookMs} ms with ${requests.length} request(s): ${requests.join(', ')}`);

      // Later changes: on the same connection (no other request), each as its own event.
      await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'late', labels: { 'watch-list.test/set': 'a' } } } });
      await core.patchNamespacedSecret(
        { namespace, name: 's-0', body: { metadata: { annotations: { touched: 'yes' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await core.deleteNamespacedSecret({ namespace, name: 's-1' });
      await eventually('the three changes as events', () => Promise.resolve(events.length >= N + 3 ? true : undefined));
      expect(events.slice(N).map((e) => `${e.type} ${e.name}`)).toEqual(['added late', 'updated s-0', 'deleted s-1']);
      expect(inf.list()).toHaveLength(N);
      expect(requests).toEqual(['WATCH 200']);
      expect(inf.stats).toMatchObject({ watchLists: 1, lists: 0, watches: 1 });
    } finally {
      await inf.stop();
      client.close();
    }
  });

  it('listed in pages instead (watch-lists off, the fallback), the same start takes two LIST requests and then a WATCH', async () => {
    const { client, informer: inf, requests, events, kinds } = await informer({ watchList: false });
    try {
      inf.start();
      await inf.waitForSync();
      // The first test's changes: N objects again (one created, one deleted).
      expect(inf.list()).toHaveLength(N);
      expect(events).toHaveLength(N);
      expect([...kinds]).toEqual(['PartialObjectMetadata']);
      await eventually('the watch to open', () => Promise.resolve(requests.includes('WATCH 200') ? true : undefined));
      expect(requests).toEqual(['GET 200', 'GET 200', 'WATCH 200']);
      expect(inf.stats).toMatchObject({ watchLists: 0, lists: 1, watches: 1 });
      expect(inf.stats.largestPageBytes).toBeGreaterThan(0);
    } finally {
      await inf.stop();
      client.close();
    }
  });
});
