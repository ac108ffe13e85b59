import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectKey } from '../../src/api/meta.js';
import type { UserGroup } from '../../src/api/usergroup.js';
import { KubeClient } from '../../src/kube/http.js';
import { DEFAULT_MAX_PAGE_BYTES, Informer } from '../../src/kube/informer.js';
import { DEFAULT_MAX_WATCH_LINE_BYTES } from '../../src/kube/watch-stream.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { eventually } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import { userGroupInformer } from '../support/usergroup-informer.js';

/*
 * Issue 15, against the real apiserver: what admission cannot refuse (properties nested under a top-level
 * entry, where CEL and the schema cannot look) reaches the controller, which must (1) read lists of such
 * objects in bounded pieces: as a watch-list, one watch event per object under the event bound; where
 * that cannot be, in pages of bounded bytes; (2) keep none of their payload, and (3) report them
 * Ready=False InvalidSpec without calling the service.
 */

const BIG = 40;
/** About 1 MB of properties, nested so that admission (64 entries, 16384-character top-level strings) lets it in. */
const bigSpec = (i: number): Record<string, unknown> => ({
  userGroupId: `big-${i}`,
  name: `Big ${i}`,
  properties: { payload: { blob: 'x'.repeat(1_000_000) } },
});
const rotate = 'usergroup.dev/rotate-requested-at';

describe('bounded memory: UserGroups over the size limits', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('bounded');
    // 40 MB in all: 40 watch events of 1 MB in a watch-list; listed in pages, five pages at the default 8 MiB
    // bound, one of 40 MB at 500 objects per page were it not there.
    for (let i = 0; i < BIG; i += 8) {
      await Promise.all(Array.from({ length: Math.min(8, BIG - i) }, (_, j) => env.createUserGroup(`big-${i + j}`, bigSpec(i + j))));
    }
  });
  afterAll(async () => ifAssigned(env)?.close());

  /** An informer over the namespace's UserGroups, counting its apiserver requests as the operator's metrics do. */
  async function informer(options: { maxWatchEventBytes?: number } = {}): Promise<{ client: KubeClient; informer: Informer<UserGroup>; requests: string[] }> {
    const requests: string[] = [];
    const client = await KubeClient.create(await kubeAccessFromKubeConfig(env.kc), 'bounded-memory-test', (verb, code) => requests.push(`${verb} ${code}`));
    const inf = userGroupInformer(client, env.namespace, options);
    return { client, informer: inf, requests };
  }

  const expectTrimmed = (listed: UserGroup[]): void => {
    for (const ug of listed) {
      expect(ug.spec.ok).toBe(false);
      expect(ug.spec.ok ? '' : ug.spec.error).toMatch(/^spec\.properties is 10000\d\d bytes as JSON; at most 16384 are allowed$/);
    }
    // 40 MB went through; what stays is names, versions and error messages.
    expect(JSON.stringify(listed).length).toBeLessThan(BIG * 1000);
  };

  it(`streams ${BIG} UserGroups of 1 MB each as one watch-list, one event (line) at a time under the ${DEFAULT_MAX_WATCH_LINE_BYTES} byte bound and no list page at all, keeps none of their payload, and watches one more`, async () => {
    const { client, informer: inf, requests } = await informer();
    try {
      inf.start();
      await inf.waitForSync();
      const listed = inf.list();
      expect(listed).toHaveLength(BIG);
      // One request, a watch whose events are the objects: no response ever held a page of them. Each event was
      // one line under the bound (a longer one would have ended the watch-list as failed, and a LIST followed).
      expect(requests).toEqual(['WATCH 200']);
      expect(inf.stats).toMatchObject({ watchLists: 1, lists: 0, failures: 0, oversizedPages: 0, largestPageBytes: 0 });
      expectTrimmed(listed);
      console.log(
        `bounded-memory: streamed ${BIG} × 1 MB as one watch-list (${requests.length} request), each event under ${DEFAULT_MAX_WATCH_LINE_BYTES} bytes`,
      );

      // A watch event of 1 MB on the same connection, after the initial ones: delivered, parsed, and trimmed the same way.
      await env.createUserGroup('big-watched', bigSpec(BIG));
      const watched = await eventually('the watch to deliver big-watched', () => Promise.resolve(inf.get(`${env.namespace}/big-watched`)));
      expect(watched.spec).toEqual({ ok: false, error: expect.stringMatching(/^spec\.properties is 10000\d\d bytes as JSON/) as unknown });
      expect(objectKey(watched.metadata)).toBe(`${env.namespace}/big-watched`);
      expect(inf.stats.failures).toBe(0);
      expect(requests).toEqual(['WATCH 200']);
    } finally {
      await inf.stop();
      client.close();
    }
  });

  it(`where a watch-list cannot finish (here: its events over a 512 KiB bound), lists the ${BIG + 1} UserGroups in pages of at most 8 MiB instead`, async () => {
    const { client, informer: inf, requests } = await informer({ maxWatchEventBytes: 512 << 10 });
    try {
      inf.start();
      await inf.waitForSync();
      const listed = inf.list();
      expect(listed).toHaveLength(BIG + 1); // big-watched too, from the test above
      // The watch-list failed at its first event, before its end bookmark; this list was paged instead.
      const [first, ...rest] = requests;
      expect(first).toBe('WATCH 200');
      const pages = rest.filter((r) => !r.startsWith('WATCH'));
      expect(pages.every((r) => r === 'GET 200')).toBe(true);
      expect(inf.stats).toMatchObject({ watchLists: 0, lists: 1, failures: 1 });
      // The first page (500 asked, 41 MB available) was abandoned at the bound and asked for again, smaller;
      // 41 MB in pages of at most 8 MiB are at least 5 pages read whole.
      expect(inf.stats.oversizedPages).toBeGreaterThanOrEqual(1);
      expect(pages.length).toBeGreaterThanOrEqual(inf.stats.oversizedPages + 5);
      expect(inf.stats.largestPageBytes).toBeGreaterThan(4 << 20);
      expect(inf.stats.largestPageBytes).toBeLessThanOrEqual(DEFAULT_MAX_PAGE_BYTES);
      expectTrimmed(listed);
      console.log(
        `bounded-memory: after the unfinished watch-list, listed ${BIG + 1} × 1 MB in pages of at most ${inf.stats.largestPageBytes} bytes (${inf.stats.oversizedPages} abandoned on the way; ${pages.length} LIST requests after the WATCH)`,
      );
    } finally {
      await inf.stop();
      client.close();
    }
  });

  it('reports what admission could not stop as Ready=False InvalidSpec with an Event, and makes no service call for it', async () => {
    await env.startOperator();
    // Admission sees one top-level entry (an object): its 20 KB are over the limit only as a whole.
    await env.createUserGroup('nested-20k', { userGroupId: 'nested-20k', name: 'Nested', properties: { a: { blob: 'x'.repeat(20_000) } } });
    await env.createUserGroup('good', { userGroupId: 'good', name: 'Good', properties: { region: 'eu', blob: 'x'.repeat(16_000) } });

    const nested = await env.waitForReady('nested-20k', 'InvalidSpec');
    const message = nested.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '';
    expect(message).toMatch(/^spec\.properties is 200\d\d bytes as JSON; at most 16384 are allowed$/);
    const events = await eventually('an InvalidSpec Event', async () => {
      const found = (await env.eventsFor('nested-20k')).filter((e) => e.reason === 'InvalidSpec');
      return found.length > 0 ? found : undefined;
    });
    expect(events[0]?.type).toBe('Warning');
    expect(events[0]?.note).toBe(message);
    await env.waitForReady('good');

    // The controller's own informer listed the 41 big ones through bounded pages too: each is InvalidSpec.
    for (const name of ['big-0', `big-${BIG - 1}`, 'big-watched']) {
      const big = await env.waitForReady(name, 'InvalidSpec');
      expect(big.status?.conditions?.find((c) => c.type === 'Ready')?.message).toMatch(/^spec\.properties is 10000\d\d bytes as JSON/);
    }

    // A rotation request longer than 256 characters: refused and not kept; a short one then rotates once.
    await env.requestRotation('good', 'r'.repeat(300));
    const refused = await env.waitForReady('good', 'InvalidSpec');
    expect(refused.status?.conditions?.find((c) => c.type === 'Ready')?.message).toBe(
      `the ${rotate} annotation is longer than 256 characters; use a short value such as a timestamp`,
    );
    expect(env.simGroup('good')?.rotations).toBe(0);
    await env.requestRotation('good', '2025-06-01T00:00:00Z');
    await eventually('the rotation of good', async () =>
      (await env.getUserGroup('good')).status?.rotation?.lastHandledRequest === '2025-06-01T00:00:00Z' ? true : undefined,
    );
    await env.waitForReady('good');
    expect(env.simGroup('good')?.rotations).toBe(1);

    // Nothing over a limit ever reached the service.
    for (const id of ['nested-20k', 'big-0', `big-${BIG - 1}`, `big-${BIG}`]) expect(env.simGroup(id), id).toBeUndefined();
    expect(env.calls().upsert).toMatchObject({ created: 1 });
  });
});
