import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ServiceClient, type ServiceCallSample, type ServiceClientOptions } from '../../src/service/client.js';
import { buildUpsertBody } from '../../src/service/upsert-body.js';
import { SecretValue } from '../../src/service/secret-value.js';
import type { ServiceFailure, ServiceResult } from '../../src/service/types.js';

const API_KEY = 'apikey-3f9c1e7d5b2a4c6e8f0a1b3c5d7e9f21';
const TOKEN = `ugt${'a1b2c3d4e5f60718'.repeat(4)}`;
const OLD_TOKEN = `ugt${'ffeeddccbbaa9988'.repeat(4)}`;

interface Received {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingHttpHeaders;
  body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, received: Received) => void;

const servers: Server[] = [];
const allResults: ServiceResult[] = [];

async function startServer(handler: Handler): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const r: Received = { method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(r);
      handler(req, res, r);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, server };
}

function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(value));
}

function okGroup(extra: Record<string, unknown> = {}): unknown {
  return {
    success: 1,
    user_group: { team_id: 3, token: TOKEN, name: 'Acme', provided_id: 'acme', new_user_group: 1, api_environment_tag: 'Testing', ...extra },
  };
}

function client(url: string, options: ServiceClientOptions = {}): ServiceClient {
  return new ServiceClient({ url, apiKey: new SecretValue(API_KEY) }, { timeoutMs: 2000, ...options });
}

/** Every result is checked for leaked credentials, whatever the test asserts about it. */
function track(result: ServiceResult): ServiceResult {
  allResults.push(result);
  const text = JSON.stringify(result);
  expect(text).not.toContain(API_KEY);
  expect(text).not.toContain(TOKEN);
  expect(text).not.toContain(OLD_TOKEN);
  return result;
}

function failure(result: ServiceResult): ServiceFailure {
  if (result.ok) {
    throw new Error('expected a failure');
  }
  return result.failure;
}

const upsertReq = { userGroupId: 'acme', name: 'Acme' };

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

afterAll(() => {
  expect(allResults.length).toBeGreaterThan(15);
  const text = JSON.stringify(allResults);
  expect(text).not.toContain(API_KEY);
  expect(text).not.toContain(TOKEN);
});

describe('buildUpsertBody', () => {
  it('sends mapping and properties only when defined', () => {
    expect(buildUpsertBody({ userGroupId: 'g', name: 'G' })).toEqual({ user_group_id: 'g', name: 'G' });
    expect(Object.keys(buildUpsertBody({ userGroupId: 'g', name: 'G', mapping: undefined, properties: undefined }))).toEqual(['user_group_id', 'name']);
    expect(buildUpsertBody({ userGroupId: 'g', name: 'G', mapping: { s1: 'ds1' }, properties: { a: 1 } })).toEqual({
      user_group_id: 'g',
      name: 'G',
      mapping: { s1: 'ds1' },
      properties: { a: 1 },
    });
  });
});

describe('ServiceClient requests', () => {
  it('PUTs the exact body with all fields and the expected headers', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup({ properties: { tier: 'gold' } })));
    const result = track(
      await client(srv.url, { userAgent: 'usergroup-operator/test' }).upsert({
        userGroupId: 'acme',
        name: 'Acme Corp',
        mapping: { '1': 'warehouse' },
        properties: { tier: 'gold', seats: 5, nested: { a: [1, 2] } },
      }),
    );
    expect(srv.received).toHaveLength(1);
    const r = srv.received[0];
    expect(r?.method).toBe('PUT');
    expect(r?.url).toBe('/api/user');
    expect(r?.body).toBe('{"user_group_id":"acme","name":"Acme Corp","mapping":{"1":"warehouse"},"properties":{"tier":"gold","seats":5,"nested":{"a":[1,2]}}}');
    expect(r?.headers.authorization).toBe(`Token ${API_KEY}`);
    expect(r?.headers['content-type']).toBe('application/json');
    expect(r?.headers.accept).toBe('application/json');
    expect(r?.headers['user-agent']).toBe('usergroup-operator/test');
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.group.token.reveal()).toBe(TOKEN);
    expect(result.group).toMatchObject({ teamId: 3, name: 'Acme', providedId: 'acme', created: true, environmentTag: 'Testing', properties: { tier: 'gold' } });
  });

  it('PUTs only user_group_id and name when the optional fields are absent', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    track(await client(srv.url).upsert({ userGroupId: 'acme', name: 'Acme' }));
    expect(srv.received[0]?.body).toBe('{"user_group_id":"acme","name":"Acme"}');
  });

  it('POSTs the current token to rotate and returns the new one', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    const result = track(await client(srv.url).rotate(new SecretValue(OLD_TOKEN)));
    expect(srv.received[0]?.method).toBe('POST');
    expect(srv.received[0]?.url).toBe('/api/user');
    expect(srv.received[0]?.body).toBe(`{"current_token":"${OLD_TOKEN}"}`);
    expect(result.ok && result.group.token.reveal()).toBe(TOKEN);
  });

  it.each([['/prefix'], ['/prefix/'], ['/prefix//']])('keeps a path prefix %s', async (prefix) => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    track(await client(`${srv.url}${prefix}`).upsert(upsertReq));
    expect(srv.received[0]?.url).toBe('/prefix/api/user');
  });

  it('handles a base URL with a trailing slash', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    track(await client(`${srv.url}/`).upsert(upsertReq));
    expect(srv.received[0]?.url).toBe('/api/user');
  });
});

describe('ServiceClient response classes', () => {
  it.each([401, 403])('%s is unauthorized, and an echoed API key is redacted', async (status) => {
    const srv = await startServer((_req, res) => sendJson(res, status, { message: `API key ${API_KEY} is not valid` }));
    const f = failure(track(await client(srv.url).upsert(upsertReq)));
    expect(f).toMatchObject({ kind: 'unauthorized', status });
    expect(f.message).toContain('is not valid');
  });

  it('429 is rate-limited with Retry-After', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 429, { error: 'too many requests' }, { 'retry-after': '3' }));
    const f = failure(track(await client(srv.url).upsert(upsertReq)));
    expect(f).toMatchObject({ kind: 'rate-limited', status: 429, retryAfterMs: 3000 });
    // got must not have retried on its own.
    expect(srv.received).toHaveLength(1);
  });

  it('429 with Retry-After: 0', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 429, {}, { 'retry-after': '0' }));
    expect(failure(track(await client(srv.url).upsert(upsertReq)))).toMatchObject({ kind: 'rate-limited', retryAfterMs: 0 });
  });

  it.each([500, 503])('%s is unavailable and not retried by got', async (status) => {
    const srv = await startServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(`upstream failed, key=${API_KEY} token=${TOKEN}`);
    });
    const f = failure(track(await client(srv.url).upsert(upsertReq)));
    expect(f).toMatchObject({ kind: 'unavailable', status });
    expect(srv.received).toHaveLength(1);
  });

  it('400 is rejected with the service message', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 400, { message: 'name must not be empty' }));
    expect(failure(track(await client(srv.url).upsert(upsertReq)))).toMatchObject({
      kind: 'rejected',
      status: 400,
      message: expect.stringContaining('name must not be empty') as unknown,
    });
  });

  it('does not follow a redirect', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(307, { location: '/elsewhere' });
      res.end();
    });
    expect(failure(track(await client(srv.url).upsert(upsertReq)))).toMatchObject({ kind: 'rejected', status: 307 });
    expect(srv.received).toHaveLength(1);
  });

  it('malformed JSON is invalid-response', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"success":1,"user_group":{"token":"${TOKEN}"`);
    });
    expect(failure(track(await client(srv.url).upsert(upsertReq)))).toMatchObject({ kind: 'invalid-response', status: 200 });
  });

  it('200 with success 0 is rejected', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, { success: 0, message: `token ${OLD_TOKEN} unknown` }));
    const f = failure(track(await client(srv.url).rotate(new SecretValue(OLD_TOKEN))));
    expect(f).toMatchObject({ kind: 'rejected', status: 200 });
    expect(f.message).toContain('unknown');
  });

  it.each<[string, unknown]>([
    ['missing', undefined],
    ['empty', ''],
  ])('a %s token is invalid-response', async (_label, token) => {
    const srv = await startServer((_req, res) => sendJson(res, 200, { success: 1, user_group: { name: 'Acme', token } }));
    expect(failure(track(await client(srv.url).upsert(upsertReq)))).toMatchObject({
      kind: 'invalid-response',
      message: expect.stringContaining('token') as unknown,
    });
  });
});

describe('ServiceClient transport failures', () => {
  it('connection refused is unavailable without a status', async () => {
    const srv = await startServer(() => undefined);
    const url = srv.url;
    for (const server of servers.splice(0)) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    const f = failure(track(await client(url).upsert(upsertReq)));
    expect(f).toMatchObject({ kind: 'unavailable', status: undefined });
    expect(f.message).toContain('ECONNREFUSED');
  });

  it('a server that never answers times out', async () => {
    const srv = await startServer(() => undefined);
    const started = performance.now();
    const f = failure(track(await client(srv.url, { timeoutMs: 200 }).upsert(upsertReq)));
    expect(f).toEqual({ kind: 'unavailable', status: undefined, message: 'request timed out after 200 ms' });
    expect(performance.now() - started).toBeLessThan(1500);
  });

  it('a body that drips slowly times out with the whole-request budget', async () => {
    const timers: NodeJS.Timeout[] = [];
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"success":1,');
      timers.push(setInterval(() => res.write(' '), 40));
    });
    try {
      const started = performance.now();
      const f = failure(track(await client(srv.url, { timeoutMs: 300 }).upsert(upsertReq)));
      expect(f).toMatchObject({ kind: 'unavailable', message: 'request timed out after 300 ms' });
      expect(performance.now() - started).toBeLessThan(1500);
    } finally {
      timers.forEach(clearInterval);
    }
  });

  it('a connection dropped mid-body is unavailable', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '500' });
      res.write('{"success":1,');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    expect(failure(track(await client(srv.url).upsert(upsertReq))).kind).toBe('unavailable');
  });

  it('an API key that cannot be a header value fails without leaking it', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    const badKey = `${API_KEY}\r\nX-Injected: 1`;
    const result = await new ServiceClient({ url: srv.url, apiKey: new SecretValue(badKey) }).upsert(upsertReq);
    track(result);
    expect(failure(result).kind).toBe('unavailable');
    expect(srv.received).toHaveLength(0);
  });
});

/** A server that holds every request it gets, and notes when the client closes the connection of one. */
async function startHoldingServer(): Promise<{ url: string; connections: () => number; held: Promise<void>; closed: Promise<number> }> {
  let connections = 0;
  let onHeld: () => void = () => undefined;
  let onClosed: (at: number) => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    onHeld = resolve;
  });
  const closed = new Promise<number>((resolve) => {
    onClosed = resolve;
  });
  const srv = await startServer((_req, res) => {
    // Never answered: only the client can end it (or afterEach, long after the test looked).
    res.on('close', () => onClosed(performance.now()));
    onHeld();
  });
  srv.server.on('connection', () => {
    connections += 1;
  });
  return { url: srv.url, connections: () => connections, held, closed };
}

describe('ServiceClient calls withdrawn by their signal', () => {
  it.each(['upsert', 'rotate'] as const)(
    "%s: aborted while the server holds it rejects at once with the signal's reason, and the connection is closed",
    async (operation) => {
      const srv = await startHoldingServer();
      const samples: ServiceCallSample[] = [];
      const c = client(srv.url, { timeoutMs: 30_000, observe: (s) => samples.push(s) });
      const withdraw = new AbortController();
      const call =
        operation === 'upsert' ? c.upsert(upsertReq, { signal: withdraw.signal }) : c.rotate(new SecretValue(OLD_TOKEN), { signal: withdraw.signal });
      await srv.held;
      const abortedAt = performance.now();
      const reason = new DOMException('withdrawn by the test', 'AbortError');
      withdraw.abort(reason);
      await expect(call).rejects.toBe(reason);
      const returnedMs = performance.now() - abortedAt;
      const closedMs = (await srv.closed) - abortedAt;
      // Not the 30 s timeout: the abort itself ends the call, and the server sees its connection go.
      expect(returnedMs).toBeLessThan(500);
      expect(closedMs).toBeLessThan(500);
      // It was sent, so it is reported, as neither a success nor a failure of the service.
      expect(samples).toEqual([{ operation, status: undefined, outcome: 'aborted', durationMs: expect.any(Number) as unknown }]);
    },
  );

  it('an already aborted signal sends nothing and reports nothing', async () => {
    const srv = await startHoldingServer();
    const samples: ServiceCallSample[] = [];
    const c = client(srv.url, { observe: (s) => samples.push(s) });
    const reason = new Error('stopped before it was sent');
    await expect(c.upsert(upsertReq, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await expect(c.rotate(new SecretValue(OLD_TOKEN), { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(srv.connections()).toBe(0);
    expect(samples).toEqual([]);
  });

  it('a signal that fires after the answer changes nothing: the answer is returned', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    const withdraw = new AbortController();
    const result = await client(srv.url).upsert(upsertReq, { signal: withdraw.signal });
    withdraw.abort();
    expect(result).toMatchObject({ ok: true, group: { teamId: 3 } });
  });

  it('a timeout is still a failure of the service, not an abort', async () => {
    const srv = await startHoldingServer();
    const result = await client(srv.url, { timeoutMs: 200 }).upsert(upsertReq, { signal: new AbortController().signal });
    expect(result).toMatchObject({ ok: false, failure: { kind: 'unavailable', message: 'request timed out after 200 ms' } });
  });
});

describe('ServiceClient response size limit', () => {
  const limit = 64 * 1024;

  it('stops reading a huge streamed 200 body', async () => {
    let written = 0;
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = 'x'.repeat(16 * 1024);
      const pump = (): void => {
        while (written < 8 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      res.on('close', () => res.removeAllListeners('drain'));
      pump();
    });
    const f = failure(track(await client(srv.url, { maxResponseBytes: limit }).upsert(upsertReq)));
    expect(f).toMatchObject({ kind: 'invalid-response', status: 200, message: expect.stringContaining(`${limit} bytes`) as unknown });
    expect(written).toBeLessThan(8 * 1024 * 1024);
  });

  it('rejects a declared Content-Length above the limit before reading', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(limit * 4) });
      res.write('{');
    });
    expect(failure(track(await client(srv.url, { maxResponseBytes: limit }).upsert(upsertReq))).kind).toBe('invalid-response');
  });

  it('counts decompressed bytes, so a gzip bomb is caught', async () => {
    const bomb = gzipSync(Buffer.alloc(limit * 16, 0x20));
    expect(bomb.length).toBeLessThan(limit);
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end(bomb);
    });
    expect(failure(track(await client(srv.url, { maxResponseBytes: limit }).upsert(upsertReq))).kind).toBe('invalid-response');
  });

  it('keeps the class of a huge 503 page', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(503, { 'content-type': 'text/html' });
      res.end('<p>'.repeat(limit));
    });
    expect(failure(track(await client(srv.url, { maxResponseBytes: limit }).upsert(upsertReq)))).toMatchObject({ kind: 'unavailable', status: 503 });
  });

  it('accepts a body right at the limit', async () => {
    const body = JSON.stringify(okGroup());
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    expect(track(await client(srv.url, { maxResponseBytes: Buffer.byteLength(body) }).upsert(upsertReq)).ok).toBe(true);
  });
});

describe('ServiceClient observation', () => {
  it('reports one sample per call', async () => {
    let calls = 0;
    const srv = await startServer((_req, res) => {
      calls += 1;
      if (calls === 1) {
        sendJson(res, 200, okGroup());
      } else {
        sendJson(res, 503, {});
      }
    });
    const samples: ServiceCallSample[] = [];
    const c = client(srv.url, { observe: (s) => samples.push(s) });
    track(await c.upsert(upsertReq));
    track(await c.rotate(new SecretValue(OLD_TOKEN)));
    expect(samples).toEqual([
      { operation: 'upsert', status: 200, outcome: 'ok', durationMs: expect.any(Number) as unknown },
      { operation: 'rotate', status: 503, outcome: 'unavailable', durationMs: expect.any(Number) as unknown },
    ]);
    expect(samples.every((s) => s.durationMs >= 0)).toBe(true);
  });

  it('survives an observer that throws', async () => {
    const srv = await startServer((_req, res) => sendJson(res, 200, okGroup()));
    const result = track(
      await client(srv.url, {
        observe: () => {
          throw new Error('metrics broke');
        },
      }).upsert(upsertReq),
    );
    expect(result.ok).toBe(true);
  });
});

describe('ServiceClient construction', () => {
  it('rejects an unparseable URL without repeating it', () => {
    expect(() => new ServiceClient({ url: 'not a url :secret', apiKey: new SecretValue(API_KEY) })).toThrow(/^(?!.*secret).*absolute URL/);
  });

  it('rejects nonsensical limits', () => {
    const connection = { url: 'https://h', apiKey: new SecretValue(API_KEY) };
    expect(() => new ServiceClient(connection, { timeoutMs: 0 })).toThrow(RangeError);
    expect(() => new ServiceClient(connection, { maxResponseBytes: 1.5 })).toThrow(RangeError);
  });
});
