import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeClient, ResponseTooLargeError } from '../../src/kube/http.js';
import { Informer, nextPageLimit } from '../../src/kube/informer.js';
import type { KubeAccess } from '../../src/kube/kubeconfig.js';
import { LineSplitter, watchOnce } from '../../src/kube/watch-stream.js';

/*
 * Nothing the apiserver sends becomes an unbounded string: a list page is abandoned past its byte bound and
 * asked for again with a smaller limit; a watch event (one line) is abandoned past its own bound.
 */

const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse, url: URL) => void): Promise<string> {
  const server = createServer((req, res) => handler(req, res, new URL(req.url ?? '/', 'http://x')));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const access = (server: string): KubeAccess => ({ server, tls: {}, authorization: () => Promise.resolve(undefined), namespace: undefined, context: 'x' });

/** Writes `total` bytes in 64 KiB chunks, respecting backpressure; resolves with what was written when done or cut off. */
function stream(res: ServerResponse, total: number, fill = 'x'): Promise<{ written: number; cut: boolean }> {
  const chunk = Buffer.alloc(64 << 10, fill);
  let written = 0;
  return new Promise((resolve) => {
    res.on('close', () => resolve({ written, cut: written < total }));
    const pump = (): void => {
      while (written < total) {
        const part = chunk.subarray(0, Math.min(chunk.length, total - written));
        written += part.length;
        if (!res.write(part)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
}

describe('nextPageLimit', () => {
  const ok = (bytes: number) => ({ tooLarge: false, bytes, maxBytes: 8 << 20 }) as const;

  it('halves after an oversized page, down to 1', () => {
    expect(nextPageLimit(500, 500, { tooLarge: true })).toBe(250);
    expect(nextPageLimit(3, 500, { tooLarge: true })).toBe(1);
    expect(nextPageLimit(1, 500, { tooLarge: true })).toBe(1);
  });

  it('doubles back towards the page size only after a page that used less than half the bound', () => {
    expect(nextPageLimit(7, 500, ok(1 << 20))).toBe(14);
    expect(nextPageLimit(300, 500, ok(1 << 20))).toBe(500);
    expect(nextPageLimit(7, 500, ok(4 << 20))).toBe(7);
    expect(nextPageLimit(500, 500, ok(0))).toBe(500);
  });
});

describe('KubeClient.request with maxBytes', () => {
  it('abandons a chunked body past the bound and closes its connection; a body within it is read whole', async () => {
    let sent: Promise<{ written: number; cut: boolean }> | undefined;
    const url = await serve((_req, res, u) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (u.pathname === '/small') return void res.end(JSON.stringify({ items: ['ü'.repeat(1000)] }));
      sent = stream(res, 256 << 20);
    });
    const client = await KubeClient.create(access(url), 'test');
    try {
      const small = await client.request('GET', '/small', { maxBytes: 4096 });
      expect(small.body).toEqual({ items: ['ü'.repeat(1000)] });
      // Counted in bytes, not characters: 1000 "ü" are 2000 bytes.
      expect(small.bytes).toBe(Buffer.byteLength(JSON.stringify({ items: ['ü'.repeat(1000)] })));
      await expect(client.request('GET', '/small', { maxBytes: 1000 })).rejects.toBeInstanceOf(ResponseTooLargeError);

      const err: unknown = await client.request('GET', '/big', { maxBytes: 1 << 20 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ResponseTooLargeError);
      expect(String(err)).toContain('GET /big: response body exceeds 1048576 bytes');
      const outcome = await sent;
      // The server could not send its 256 MiB: the client hung up after about 1 MiB (plus socket buffers).
      expect(outcome?.cut).toBe(true);
      expect(outcome?.written).toBeLessThan(32 << 20);
      // The client still works: the abandoned connection was not returned to the pool.
      expect((await client.request('GET', '/small')).status).toBe(200);
    } finally {
      client.close();
    }
  });

  it('refuses at once a body whose Content-Length is over the bound', async () => {
    let bodyRequested = false;
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(64 << 20) });
      res.flushHeaders();
      setTimeout(() => {
        bodyRequested = true;
        res.destroy();
      }, 2000).unref();
    });
    const client = await KubeClient.create(access(url), 'test');
    try {
      const started = Date.now();
      await expect(client.request('GET', '/big', { maxBytes: 1 << 20 })).rejects.toBeInstanceOf(ResponseTooLargeError);
      expect(Date.now() - started).toBeLessThan(1500);
      expect(bodyRequested).toBe(false);
    } finally {
      client.close();
    }
  });
});

/**
 * A fake list endpoint over `count` objects of about `size(i)` bytes each; `continue` is the next offset. It
 * refuses watch-lists as an apiserver without them does (422), so the informer lists in pages.
 */
function listServer(
  count: number,
  size: number | ((i: number) => number),
  options: { goneOnce?: boolean } = {},
): Promise<{ url: string; requests: { limit: number; continue: string }[]; watchLists: () => number }> {
  const sizeOf = typeof size === 'number' ? () => size : size;
  const requests: { limit: number; continue: string }[] = [];
  let watchLists = 0;
  let gone = options.goneOnce === true;
  const item = (i: number) => ({
    metadata: { name: `obj-${i}`, namespace: 'ns', uid: `u${i}`, resourceVersion: String(100 + i) },
    blob: 'x'.repeat(sizeOf(i)),
  });
  return serve((_req, res, u) => {
    if (u.searchParams.get('sendInitialEvents') === 'true') {
      watchLists++;
      res.writeHead(422, { 'content-type': 'application/json' });
      return void res.end(
        '{"kind":"Status","code":422,"reason":"Invalid","message":"ListOptions.meta.k8s.io \\"\\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"}',
      );
    }
    if (u.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"999"}}}\n');
      return; // held open, like a real watch, until the informer stops
    }
    const limit = Number(u.searchParams.get('limit'));
    const cont = u.searchParams.get('continue') ?? '';
    requests.push({ limit, continue: cont });
    if (cont && gone) {
      gone = false;
      res.writeHead(410, { 'content-type': 'application/json' });
      return void res.end('{"kind":"Status","code":410,"reason":"Expired","message":"continue token expired"}');
    }
    const from = Number(cont || 0);
    const to = Math.min(count, from + limit);
    res.writeHead(200, { 'content-type': 'application/json' });
    // Streamed item by item, without a Content-Length, as the apiserver streams list responses.
    res.write(`{"kind":"List","metadata":{"resourceVersion":"999"${to < count ? `,"continue":"${to}"` : ''}},"items":[`);
    const write = (i: number): void => {
      if (res.destroyed) return;
      if (i >= to) return void res.end(']}');
      const ok = res.write(`${i > from ? ',' : ''}${JSON.stringify(item(i))}`);
      if (ok) write(i + 1);
      else res.once('drain', () => write(i + 1));
    };
    write(from);
  }).then((url) => ({ url, requests, watchLists: () => watchLists }));
}

function informerOver(
  client: KubeClient,
  options: { maxPageBytes: number; pageSize?: number },
): Informer<{ metadata: { namespace: string; name: string; resourceVersion: string } }> {
  return new Informer({
    name: 'things',
    client,
    path: '/apis/x/v1/things',
    parse: (raw) => {
      const m = (raw as { metadata?: { namespace: string; name: string; resourceVersion: string } }).metadata;
      // Keep only the metadata, as the real parsers do: the blob must not stay.
      return m ? { metadata: { namespace: m.namespace, name: m.name, resourceVersion: m.resourceVersion } } : undefined;
    },
    log: pino({ level: 'silent' }),
    retryInitialMs: 10,
    ...options,
  });
}

describe('Informer list pages', () => {
  it('asks again with half the limit for a page over its byte bound, keeping its continue token, and lists everything', async () => {
    // 40 objects of ~100 KB: 500 of them would be 4 MB; the bound is 1 MiB, so about 10 fit in a page.
    const { url, requests, watchLists } = await listServer(40, 100_000);
    const client = await KubeClient.create(access(url), 'test');
    const informer = informerOver(client, { maxPageBytes: 1 << 20 });
    try {
      informer.start();
      await informer.waitForSync();
      // The watch-list was refused (422): the informer listed in pages instead.
      expect(watchLists()).toBe(1);
      expect(informer.stats).toMatchObject({ lists: 1, watchLists: 0 });
      expect(
        informer
          .list()
          .map((o) => o.metadata.name)
          .sort(),
      ).toEqual(Array.from({ length: 40 }, (_, i) => `obj-${i}`).sort());
      // 500 → 250 → 125 → 62 → 31 → 15 abandoned, 7 fits (~700 KB, over half the bound: stays 7).
      expect(requests.slice(0, 7)).toEqual([500, 250, 125, 62, 31, 15, 7].map((limit) => ({ limit, continue: '' })));
      expect(requests.slice(7, 9)).toEqual([
        { limit: 7, continue: '7' },
        { limit: 7, continue: '14' },
      ]);
      expect(informer.stats.oversizedPages).toBe(6);
      expect(informer.stats.largestPageBytes).toBeGreaterThan(600_000);
      expect(informer.stats.largestPageBytes).toBeLessThanOrEqual(1 << 20);
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('grows the limit again once the pages are small, and never shrinks it for pages that fit', async () => {
    // 20 objects of 100 KB first, then 2000 of 100 bytes.
    const { url, requests } = await listServer(2020, (i) => (i < 20 ? 100_000 : 100));
    const client = await KubeClient.create(access(url), 'test');
    const informer = informerOver(client, { maxPageBytes: 1 << 20 });
    try {
      informer.start();
      await informer.waitForSync();
      expect(informer.list()).toHaveLength(2020);
      const limits = requests.map((r) => r.limit);
      // Down to 7 for the large ones (offsets 0, 7, 14: each page over half the bound), then doubled after
      // each small page from offset 21 on, back to 500.
      expect(requests.slice(6, 10)).toEqual([0, 7, 14, 21].map((offset) => ({ limit: 7, continue: offset ? String(offset) : '' })));
      expect(limits.slice(0, 10)).toEqual([500, 250, 125, 62, 31, 15, 7, 7, 7, 7]);
      expect(limits.slice(10, 17)).toEqual([14, 28, 56, 112, 224, 448, 500]);
      expect(limits.length).toBeLessThan(22);
    } finally {
      await informer.stop();
      client.close();
    }
    // Pages that always fit are never cut.
    const { url: roomyUrl, requests: roomyRequests } = await listServer(2000, 3_000);
    const roomyClient = await KubeClient.create(access(roomyUrl), 'test');
    const roomy = informerOver(roomyClient, { maxPageBytes: 4 << 20 });
    try {
      roomy.start();
      await roomy.waitForSync();
      expect(roomy.list()).toHaveLength(2000);
      expect(roomyRequests.map((r) => r.limit)).toEqual([500, 500, 500, 500]);
      expect(roomy.stats.oversizedPages).toBe(0);
    } finally {
      await roomy.stop();
      roomyClient.close();
    }
  });

  it('starts over when the continue token expires mid-list (410), ending with every object', async () => {
    const { url, requests } = await listServer(25, 10, { goneOnce: true });
    const client = await KubeClient.create(access(url), 'test');
    const informer = informerOver(client, { maxPageBytes: 1 << 20, pageSize: 10 });
    try {
      informer.start();
      await informer.waitForSync();
      expect(informer.list()).toHaveLength(25);
      expect(requests.map((r) => r.continue)).toEqual(['', '10', '', '10', '20']);
    } finally {
      await informer.stop();
      client.close();
    }
  });

  it('fails the list (and retries it) when one object alone is over the bound, never syncing with a partial store', async () => {
    const { url, requests, watchLists } = await listServer(3, 300_000);
    const client = await KubeClient.create(access(url), 'test');
    const informer = informerOver(client, { maxPageBytes: 200_000 });
    try {
      informer.start();
      await expect.poll(() => informer.stats.oversizedPages, { timeout: 5000 }).toBeGreaterThan(20);
      expect(informer.synced).toBe(false);
      // Refused once and remembered: every retry since was a paged list.
      expect(watchLists()).toBe(1);
      expect(informer.failingForMs()).toBeGreaterThan(0);
      expect(Math.min(...requests.map((r) => r.limit))).toBe(1);
    } finally {
      await informer.stop();
      client.close();
    }
  });
});

describe('watch events are bounded', () => {
  it('LineSplitter splits lines across chunks and multi-byte characters, and refuses a line over the bound', () => {
    const lines = new LineSplitter(10);
    const euro = Buffer.from('€'); // 3 bytes
    expect(lines.push(Buffer.from('ab\ncd'))).toEqual(['ab']);
    expect(lines.push(Buffer.concat([Buffer.from('e'), euro.subarray(0, 1)]))).toEqual([]);
    expect(lines.push(Buffer.concat([euro.subarray(1), Buffer.from('\n\nxyz\n')]))).toEqual(['cde€', '', 'xyz']);
    // Exactly 10 bytes pass, split or not.
    expect(lines.push(Buffer.from('0123456789\n'))).toEqual(['0123456789']);
    expect(lines.push(Buffer.from('01234'))).toEqual([]);
    expect(lines.push(Buffer.from('56789\n'))).toEqual(['0123456789']);
    // 11 do not: in one chunk, across chunks, or without a newline yet.
    expect(new LineSplitter(10).push(Buffer.from('0123456789a\n'))).toBeUndefined();
    const split = new LineSplitter(10);
    expect(split.push(Buffer.from('012345'))).toEqual([]);
    expect(split.push(Buffer.from('6789a\nok\n'))).toBeUndefined();
    const endless = new LineSplitter(10);
    expect(endless.push(Buffer.from('0123456789'))).toEqual([]);
    expect(endless.push(Buffer.from('a'))).toBeUndefined();
    // Bytes, not characters: four "€" are 12 bytes.
    expect(new LineSplitter(10).push(Buffer.from('€€€€\n'))).toBeUndefined();
  });

  it('ends a watch whose event grows past the bound, and hangs up on the server', async () => {
    let sent: Promise<{ written: number; cut: boolean }> | undefined;
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}\n{"type":"ADDED","object":{"blob":"');
      sent = stream(res, 256 << 20);
    });
    const client = await KubeClient.create(access(url), 'test');
    const events: string[] = [];
    try {
      const end = await watchOnce(client, '/apis/x/v1/things', {
        resourceVersion: '1',
        timeoutSeconds: 60,
        inactivityMs: 10_000,
        maxLineBytes: 1 << 20,
        signal: new AbortController().signal,
        onEvent: (e) => events.push(e.type),
      });
      expect(end).toEqual({ kind: 'failed', status: 200, message: 'watch event larger than 1048576 bytes' });
      expect(events).toEqual(['BOOKMARK']);
      const outcome = await sent;
      expect(outcome?.cut).toBe(true);
      expect(outcome?.written).toBeLessThan(32 << 20);
    } finally {
      client.close();
    }
  });
});
