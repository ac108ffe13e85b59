import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { objectKey, type ObjectMeta } from '../../src/api/meta.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import type { UserGroupService } from '../../src/api/usergroupservice.js';
import { API_KEY_SECRET_TYPE, Connections } from '../../src/controller/connections.js';
import type { CallContext } from '../../src/service/call-gates.js';
import type { CallResult } from '../../src/service/types.js';
import type { ServiceClientOptions } from '../../src/service/client.js';
import { parseEgressPolicy } from '../../src/service/egress-policy.js';
import { SecretValue } from '../../src/service/secret-value.js';

/**
 * The connection layer between reconciles and the service: egress policy, API-key opt-in, the breaker
 * and the token bucket, against a real local HTTP server that counts what reaches it.
 */
let mode: 'ok' | '503' | '429' | 'hold' = 'ok';
let requests = 0;
let sockets = 0;
/** Held requests (mode 'hold') whose connection the client closed. */
let closedByClient = 0;
/** Resolved, in order, by the requests the server starts holding. */
const onHeld: (() => void)[] = [];
let server: http.Server;
let port = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => {
      if (mode === 'hold') {
        res.on('close', () => {
          closedByClient++;
        });
        onHeld.shift()?.();
        return;
      }
      if (mode === '429') {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"success":0,"message":"slow down"}');
        return;
      }
      if (mode === '503') {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"success":0,"message":"down"}');
        return;
      }
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ success: 1, user_group: { team_id: 1, token: `tok-${requests}-abcdefghijklmnop`, name: 'n', provided_id: 'g' } }));
    });
  });
  server.on('connection', () => sockets++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  port = (server.address() as AddressInfo).port;
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);

const meta = (namespace: string, name: string): ObjectMeta => ({
  name,
  namespace,
  uid: `${namespace}-${name}`,
  resourceVersion: '1',
  generation: 1,
  creationTimestamp: '2026-01-01T00:00:00Z',
  deletionTimestamp: undefined,
  labels: {},
  annotations: {},
  ownerReferences: [],
});

function service(namespace: string, name: string, url: string, secretName = 'key', allowInsecure = true): UserGroupService {
  return { metadata: meta(namespace, name), spec: { ok: true, value: { url, apiKeySecretRef: { name: secretName, key: 'apiKey' }, allowInsecure } } };
}

function secret(namespace: string, name: string, type: string): ObservedSecret {
  const parsed = parseSecret({ metadata: { ...meta(namespace, name) }, type, data: { apiKey: Buffer.from('the-api-key').toString('base64') } });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

function connections(options: {
  hosts?: string[];
  http?: boolean;
  qps?: number;
  burst?: number;
  services?: UserGroupService[];
  secrets?: ObservedSecret[];
  clientOptions?: ServiceClientOptions;
  persistentRateLimit?: { ms: number; answers: number };
}) {
  const services = new Map((options.services ?? []).map((s) => [objectKey(s.metadata), s]));
  const secrets = new Map((options.secrets ?? []).map((s) => [objectKey(s.metadata), s]));
  let secretReads = 0;
  const egress = parseEgressPolicy(options.hosts ?? ['127.0.0.1'], options.http ?? true);
  if (!egress.ok) throw new Error('bad policy');
  const c = new Connections({
    defaultService: undefined,
    services: { get: (k) => services.get(k), list: () => [...services.values()] },
    clusterServices: { get: () => undefined, list: () => [] },
    namespaceLabels: () => ({}),
    readSecret: async (ns, name) => {
      secretReads++;
      return secrets.get(`${ns}/${name}`);
    },
    clientOptions: options.clientOptions ?? { timeoutMs: 2_000 },
    qps: options.qps ?? 1_000,
    burst: options.burst ?? 1_000,
    log: pino({ level: 'silent' }),
    egress: egress.policy,
    breaker: { threshold: 3, minFailingMs: 0, baseOpenMs: 60_000, maxOpenMs: 60_000 },
    ...(options.persistentRateLimit ? { persistentRateLimit: options.persistentRateLimit } : {}),
  });
  return { c, secretReads: () => secretReads };
}

const ctx = (key: string, wake: () => void = () => undefined): CallContext => ({ key, followUp: false, wake });
const request = { userGroupId: 'g', name: 'G' };
const deferredWhy = (r: CallResult): string | undefined => (!r.ok && 'deferred' in r ? r.deferred.why : undefined);

describe('Connections of a namespace (UserGroupService)', () => {
  it('refuses a host the policy does not list before reading the Secret or connecting', async () => {
    const before = sockets;
    const { c, secretReads } = connections({
      hosts: ['analytics.example.com'],
      services: [service('t', 'own', `http://127.0.0.1:${port}`)],
      secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)],
    });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    expect(r).toMatchObject({ ok: false, reason: 'ServiceNotAllowed' });
    expect(secretReads()).toBe(0);
    expect(sockets).toBe(before);
  });

  it('refuses plain http unless the operator allows it, whatever allowInsecure says', async () => {
    const { c } = connections({ http: false, services: [service('t', 'own', `http://127.0.0.1:${port}`)], secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)] });
    expect(await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g')).toMatchObject({
      ok: false,
      reason: 'ServiceNotAllowed',
      message: expect.stringContaining('--allow-http-services') as unknown,
    });
  });

  it('workers resolving one connection at the same moment (a start) share one read of its API-key Secret', async () => {
    const { c, secretReads } = connections({ services: [service('t', 'own', `http://127.0.0.1:${port}`)], secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)] });
    const all = await Promise.all(Array.from({ length: 16 }, () => c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g')));
    expect(all.every((r) => r.ok)).toBe(true);
    expect(secretReads()).toBe(1);
    // After a 401 the key is read again, once.
    c.forgetSecret('t/key');
    await Promise.all(Array.from({ length: 4 }, () => c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g')));
    expect(secretReads()).toBe(2);
  });

  it('the account and the record seal follow the API key alone: the same for every resolve and URL spelling, new when the key changes', async () => {
    const key = secret('t', 'key', API_KEY_SECRET_TYPE);
    const other = parseSecret({
      metadata: { ...meta('t', 'key2') },
      type: API_KEY_SECRET_TYPE,
      data: { apiKey: Buffer.from('another-key').toString('base64') },
    });
    if (!other.ok) throw new Error(other.error);
    const { c } = connections({
      services: [
        service('t', 'own', `http://127.0.0.1:${port}`),
        service('t', 'spelt', `http://127.0.0.1:${port}/`),
        service('t', 'rekeyed', `http://127.0.0.1:${port}`, 'key2'),
      ],
      secrets: [key, other.value],
    });
    const resolved = async (name: string) => {
      const r = await c.resolve('t', { kind: 'UserGroupService', name }, 'g');
      if (!r.ok) throw new Error(r.message);
      return { account: r.connection.account, seal: r.connection.seal('record') };
    };
    const first = await resolved('own');
    expect(await resolved('own')).toEqual(first);
    expect(await resolved('spelt')).toEqual(first);
    const rekeyed = await resolved('rekeyed');
    expect(rekeyed.account).not.toBe(first.account);
    expect(rekeyed.seal).not.toBe(first.seal);
  });

  it('sends no Secret that did not opt in by its type', async () => {
    const before = requests;
    const { c } = connections({ services: [service('t', 'own', `http://127.0.0.1:${port}`)], secrets: [secret('t', 'key', 'Opaque')] });
    expect(await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g')).toMatchObject({
      ok: false,
      reason: 'ConnectionInvalid',
      message: expect.stringContaining(API_KEY_SECRET_TYPE) as unknown,
    });
    expect(requests).toBe(before);
  });

  it('defers calls beyond the rate limit instead of waiting, and keeps the reserved slot for its key', async () => {
    // The bucket's clock and timers on fake time (the sockets stay real): the 2 s until the next token pass at once.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    mode = 'ok';
    const { c } = connections({
      qps: 0.5,
      burst: 1,
      services: [service('t', 'own', `http://127.0.0.1:${port}`)],
      secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)],
    });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    if (!r.ok) throw new Error(r.message);
    expect((await r.connection.upsert(request, ctx('t/a'))).ok).toBe(true);
    const started = performance.now();
    const second = await r.connection.upsert(request, ctx('t/b'));
    expect(performance.now() - started).toBeLessThan(100);
    expect(second).toMatchObject({ ok: false, deferred: { why: 'throttled' } });
    const afterMs = !second.ok && 'deferred' in second ? second.deferred.afterMs : 0;
    // The next token exists 2 s after the first was taken (less whatever the first call took).
    expect(afterMs).toBeGreaterThan(1_000);
    expect(afterMs).toBeLessThanOrEqual(2_000);
    // Back early (a watch event): still deferred, and no second reservation pushed everyone else back.
    const early = await r.connection.upsert(request, ctx('t/b'));
    expect(!early.ok && 'deferred' in early ? early.deferred.afterMs : 0).toBeLessThanOrEqual(afterMs);
    await vi.advanceTimersByTimeAsync(afterMs + 10);
    expect((await r.connection.upsert(request, ctx('t/b'))).ok).toBe(true);
  });

  it("429 with Retry-After (the account's limit, shared with other clusters): waited out, never a failure or the breaker, until nothing else comes back", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    mode = '429';
    const { c } = connections({
      services: [service('t', 'own', `http://127.0.0.1:${port}`)],
      secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)],
      persistentRateLimit: { ms: 50, answers: 3 },
    });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    if (!r.ok) throw new Error(r.message);
    // Follow-ups, so that the pause each 429 starts does not keep them from the service.
    const follow = (key: string): CallContext => ({ ...ctx(key), followUp: true });
    const first = await r.connection.upsert(request, follow('t/a'));
    expect(first).toMatchObject({ ok: false, deferred: { why: 'throttled' } });
    expect(!first.ok && 'deferred' in first ? first.deferred.afterMs : 0).toBeGreaterThanOrEqual(1_000);
    // The pause holds every first call of the connection, without a call.
    const before = requests;
    expect(deferredWhy(await r.connection.upsert(request, ctx('t/b')))).toBe('throttled');
    expect(requests).toBe(before);
    // More 429s than the breaker's threshold (3): still deferrals, the breaker closed.
    await vi.advanceTimersByTimeAsync(60);
    expect(deferredWhy(await r.connection.upsert(request, follow('t/a')))).toBe('throttled');
    // The third 429 in a row, 50 ms after the first: no share of the rate is left; it is reported.
    expect(await r.connection.upsert(request, follow('t/a'))).toMatchObject({ ok: false, failure: { kind: 'rate-limited' } });
    // One answer that is not a 429 starts the count again.
    mode = 'ok';
    expect((await r.connection.upsert(request, follow('t/a'))).ok).toBe(true);
    mode = '429';
    expect(deferredWhy(await r.connection.upsert(request, follow('t/a')))).toBe('throttled');
    mode = 'ok';
  });

  it('stops calling a failing service (breaker), parks callers and wakes them when it answers again', async () => {
    mode = '503';
    const { c } = connections({ services: [service('t', 'own', `http://127.0.0.1:${port}`)], secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)] });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    if (!r.ok) throw new Error(r.message);
    const before = requests;
    const outcomes: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) outcomes.push(deferredWhy(await r.connection.upsert(request, ctx(`t/k${i}`))) ?? 'sent');
    expect(outcomes).toEqual(['sent', 'sent', 'sent']);
    expect(requests - before).toBe(3);
    const woken: string[] = [];
    for (let i = 0; i < 50; i++)
      expect(
        deferredWhy(
          await r.connection.upsert(
            request,
            ctx(`t/p${i}`, () => woken.push(`t/p${i}`)),
          ),
        ),
      ).toBe('paused');
    expect(requests - before).toBe(3);
    expect(woken).toEqual([]);
  });
});

describe('a call withdrawn by its signal (shutdown, lost leadership)', () => {
  const nextHeld = (): Promise<void> =>
    new Promise((resolve) => {
      onHeld.push(resolve);
    });
  /** Undefined once the server holds the call; else why it never got there (deferred by the breaker, say). */
  const reachesServer = (call: Promise<CallResult>, held: Promise<void>): Promise<string | undefined> =>
    Promise.race([held.then(() => undefined), call.then((res) => deferredWhy(res) ?? 'answered')]);

  it("is cut off at once, throws the signal's reason, and is no failure for the breaker", async () => {
    const { c } = connections({
      services: [service('t', 'own', `http://127.0.0.1:${port}`)],
      secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)],
      clientOptions: { timeoutMs: 30_000 },
    });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    if (!r.ok) throw new Error(r.message);
    // One answer first: a connection that never had one takes one call at a time anyway.
    mode = 'ok';
    expect((await r.connection.upsert(request, ctx('t/first'))).ok).toBe(true);
    mode = 'hold';
    const before = { requests, closedByClient };
    // More withdrawn calls in a row than the breaker's threshold (3, no minimum duration): were they counted
    // as failures, the connection would be paused, or held to one call at a time while one is out.
    for (let i = 0; i < 5; i++) {
      const withdraw = new AbortController();
      const held = nextHeld();
      const call =
        i % 2 === 0
          ? r.connection.upsert(request, { ...ctx(`t/w${i}`), signal: withdraw.signal })
          : r.connection.rotate(new SecretValue('tok-held-abcdefghijklmnop'), { ...ctx(`t/w${i}`), signal: withdraw.signal });
      expect(await reachesServer(call, held), `call ${i}`).toBeUndefined();
      const reason = new Error(`withdrawn ${i}`);
      const abortedAt = performance.now();
      withdraw.abort(reason);
      await expect(call).rejects.toBe(reason);
      expect(performance.now() - abortedAt).toBeLessThan(500);
    }
    expect(requests - before.requests).toBe(5);
    await eventually(() => closedByClient - before.closedByClient === 5);
    // Nothing says the service is failing: calls go out, several at once (two failures in a row would allow
    // one; three would pause the connection), and an answer comes back.
    const parallel = [nextHeld(), nextHeld()];
    const withdrawBoth = new AbortController();
    const both = [0, 1].map((i) => r.connection.upsert(request, { ...ctx(`t/p${i}`), signal: withdrawBoth.signal }));
    expect(
      await reachesServer(
        Promise.race(both),
        Promise.all(parallel).then(() => undefined),
      ),
    ).toBeUndefined();
    expect(requests - before.requests).toBe(7);
    withdrawBoth.abort();
    for (const call of both) await expect(call).rejects.toMatchObject({ name: 'AbortError' });
    mode = 'ok';
    expect((await r.connection.upsert(request, ctx('t/after'))).ok).toBe(true);
  });

  it('an already aborted signal sends nothing', async () => {
    const { c } = connections({ services: [service('t', 'own', `http://127.0.0.1:${port}`)], secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)] });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    if (!r.ok) throw new Error(r.message);
    const before = requests;
    await expect(r.connection.upsert(request, { ...ctx('t/gone'), signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    expect(requests).toBe(before);
  });

  it('an answer that comes in after the signal fired is not handed to the reconcile', async () => {
    mode = 'ok';
    const withdraw = new AbortController();
    // The signal fires while the client reports the finished call: the answer is complete, but too late.
    const { c } = connections({
      services: [service('t', 'own', `http://127.0.0.1:${port}`)],
      secrets: [secret('t', 'key', API_KEY_SECRET_TYPE)],
      clientOptions: { timeoutMs: 2_000, observe: () => withdraw.abort() },
    });
    const r = await c.resolve('t', { kind: 'UserGroupService', name: 'own' }, 'g');
    if (!r.ok) throw new Error(r.message);
    await expect(r.connection.rotate(new SecretValue('tok-late-abcdefghijklmnop'), { ...ctx('t/late'), signal: withdraw.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
  });
});

async function eventually(check: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
