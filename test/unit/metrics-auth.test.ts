import { Writable } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { KubeResponse, RequestOptions } from '../../src/kube/http.js';
import { createLogger } from '../../src/observability/log.js';
import {
  bearerToken,
  MetricsAuthorizer,
  parseAccessReview,
  parseTokenReview,
  SUBJECT_ACCESS_REVIEWS_PATH,
  TOKEN_REVIEWS_PATH,
  type MetricsAuthOptions,
  type MetricsAuthResult,
  type MetricsAuthSource,
} from '../../src/observability/metrics-auth.js';

/*
 * The decision cache and the limits on review calls, with a stand-in for the apiserver and a fake clock. That the
 * reviews themselves are right (what the real apiserver answers, RBAC included) is test/integration/metrics-auth.test.ts.
 */

interface Identity {
  readonly username: string;
  readonly groups?: string[];
  readonly uid?: string;
  readonly extra?: Record<string, string[]>;
  readonly allowed: boolean;
}

/** Knows some tokens; answers like the apiserver (201, the spec echoed), optionally holding answers until told. */
function fakeApiserver(identities: Readonly<Record<string, Identity>>) {
  const sent: { path: string; body: Record<string, unknown> }[] = [];
  const held: (() => void)[] = [];
  let hold = false;
  let fail: KubeResponse | Error | undefined;
  const client = {
    request: async (method: string, path: string, options: RequestOptions = {}): Promise<KubeResponse> => {
      expect(method).toBe('POST');
      const body = options.body as { spec: Record<string, unknown> };
      sent.push({ path, body: body });
      if (hold) await new Promise<void>((resolve) => held.push(resolve));
      if (fail instanceof Error) throw fail;
      if (fail) return fail;
      if (path === TOKEN_REVIEWS_PATH) {
        const who = identities[String(body.spec['token'])];
        return {
          status: 201,
          body: {
            kind: 'TokenReview',
            spec: body.spec,
            status: who
              ? {
                  authenticated: true,
                  user: { username: who.username, groups: who.groups ?? [], ...(who.uid ? { uid: who.uid } : {}), ...(who.extra ? { extra: who.extra } : {}) },
                }
              : { authenticated: false, error: 'invalid bearer token' },
          },
        };
      }
      const who = Object.values(identities).find((i) => i.username === body.spec['user']);
      return {
        status: 201,
        body: {
          kind: 'SubjectAccessReview',
          spec: body.spec,
          status: { allowed: who?.allowed === true, ...(who?.allowed ? {} : { reason: 'no RBAC policy matched' }) },
        },
      };
    },
  };
  return {
    client,
    sent,
    tokenReviews: () => sent.filter((s) => s.path === TOKEN_REVIEWS_PATH).length,
    accessReviews: () => sent.filter((s) => s.path === SUBJECT_ACCESS_REVIEWS_PATH).length,
    hold: (on: boolean) => {
      hold = on;
    },
    release: () => {
      for (const r of held.splice(0)) r();
    },
    fail: (with_: KubeResponse | Error | undefined) => {
      fail = with_;
    },
  };
}

const IDS: Record<string, Identity> = {
  'prom-token': {
    username: 'system:serviceaccount:monitoring:prometheus',
    groups: ['system:serviceaccounts', 'system:authenticated'],
    uid: 'u-1',
    extra: { 'authentication.kubernetes.io/pod-name': ['prometheus-0'] },
    allowed: true,
  },
  'tenant-token': { username: 'system:serviceaccount:team-a:default', groups: ['system:serviceaccounts'], allowed: false },
};

function setup(options: Partial<MetricsAuthOptions> = {}) {
  const api = fakeApiserver(IDS);
  let clock = 1_000_000;
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const results: { result: MetricsAuthResult; source: MetricsAuthSource }[] = [];
  const auth = new MetricsAuthorizer({
    client: api.client,
    log: createLogger('debug', sink),
    now: () => clock,
    observeRequest: (result, source) => results.push({ result, source }),
    ...options,
  });
  return {
    api,
    auth,
    lines,
    results,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

const req = (authorization?: string): IncomingMessage => ({ headers: authorization === undefined ? {} : { authorization } }) as IncomingMessage;
const metricsHandler = async () => ({ status: 200, contentType: 'text/plain', body: 'usergroup_leader 1\n' });

describe('MetricsAuthorizer', () => {
  it('401 without a bearer token, and no review call for it', async () => {
    const { api, auth } = setup();
    const route = auth.guard(metricsHandler);
    for (const header of [undefined, '', 'Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', `Bearer ${'x'.repeat(8193)}`]) {
      const res = await route(req(header));
      expect(res.status, String(header).slice(0, 20)).toBe(401);
      expect(res.headers?.['www-authenticate']).toMatch(/^Bearer/);
    }
    expect(api.sent).toEqual([]);
  });

  it('200 for a token whose identity may get /metrics: the SubjectAccessReview repeats the identity and asks for get on /metrics', async () => {
    const { api, auth } = setup();
    const res = await auth.guard(metricsHandler)(req('Bearer prom-token'));
    expect(res).toMatchObject({ status: 200, body: 'usergroup_leader 1\n' });
    expect(api.sent.map((s) => s.path)).toEqual([TOKEN_REVIEWS_PATH, SUBJECT_ACCESS_REVIEWS_PATH]);
    expect(api.sent[0]?.body).toEqual({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'prom-token' } });
    expect(api.sent[1]?.body).toEqual({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: 'system:serviceaccount:monitoring:prometheus',
        uid: 'u-1',
        groups: ['system:serviceaccounts', 'system:authenticated'],
        extra: { 'authentication.kubernetes.io/pod-name': ['prometheus-0'] },
        nonResourceAttributes: { path: '/metrics', verb: 'get' },
      },
    });
  });

  it('403 for an authenticated identity without the permission; 401 for a token the apiserver does not know', async () => {
    const { auth } = setup();
    const route = auth.guard(metricsHandler);
    const denied = await route(req('Bearer tenant-token'));
    expect(denied.status).toBe(403);
    expect(denied.body).toContain('system:serviceaccount:team-a:default');
    expect(denied.body).not.toContain('usergroup_leader');
    expect((await route(req('bearer made-up'))).status).toBe(401);
  });

  it('reuses each decision for the TTL: repeated scrapes cost no review until it expires', async () => {
    const { api, auth, advance, results } = setup({ ttlMs: 10_000 });
    for (let i = 0; i < 20; i++) {
      expect((await auth.check('Bearer prom-token')).result).toBe('allowed');
      expect((await auth.check('Bearer tenant-token')).result).toBe('denied');
      expect((await auth.check('Bearer made-up')).result).toBe('unauthenticated');
      advance(400); // 20 × 400 ms = 8 s < TTL
    }
    expect([api.tokenReviews(), api.accessReviews()]).toEqual([3, 2]);
    expect(results.filter((r) => r.source === 'cache')).toHaveLength(57);
    expect(results.filter((r) => r.source === 'review')).toHaveLength(3);
    advance(2_001);
    expect((await auth.check('Bearer prom-token')).result).toBe('allowed');
    expect([api.tokenReviews(), api.accessReviews()]).toEqual([4, 3]);
  });

  it('concurrent requests with one token share one review', async () => {
    const { api, auth } = setup();
    api.hold(true);
    const all = Promise.all(Array.from({ length: 50 }, () => auth.check('Bearer prom-token')));
    await new Promise((r) => setImmediate(r));
    api.hold(false);
    api.release();
    await new Promise((r) => setImmediate(r));
    api.release();
    expect((await all).every((v) => v.result === 'allowed')).toBe(true);
    expect([api.tokenReviews(), api.accessReviews()]).toEqual([1, 1]);
  });

  it('a flood of distinct tokens: at most maxConcurrent reviews at once, at most the burst (then the rate) in all; the rest 429', async () => {
    const { api, auth, advance } = setup({ maxConcurrent: 4, reviewBurst: 10, reviewsPerSecond: 2 });
    api.hold(true);
    const first = Array.from({ length: 100 }, (_, i) => auth.check(`Bearer junk-${i}`));
    await new Promise((r) => setImmediate(r));
    expect(api.sent).toHaveLength(4);
    api.hold(false);
    api.release();
    const verdicts = await Promise.all(first);
    expect(verdicts.filter((v) => v.result === 'unauthenticated')).toHaveLength(4);
    expect(verdicts.filter((v) => v.result === 'throttled')).toHaveLength(96);
    // One at a time now: the bucket's remaining 6 calls pass, then 429 until it refills.
    const sequential: MetricsAuthResult[] = [];
    for (let i = 100; i < 120; i++) sequential.push((await auth.check(`Bearer junk-${i}`)).result);
    expect(sequential.filter((r) => r === 'unauthenticated')).toHaveLength(6);
    expect(api.tokenReviews()).toBe(10);
    advance(1_000);
    for (let i = 120; i < 140; i++) await auth.check(`Bearer junk-${i}`);
    expect(api.tokenReviews()).toBe(12);
    // A scraper whose decision is cached is not held up by the flood... once it has one.
    advance(10_000); // refills the bucket
    expect((await auth.check('Bearer prom-token')).result).toBe('allowed');
    for (let i = 140; i < 200; i++) await auth.check(`Bearer junk-${i}`);
    expect((await auth.check('Bearer prom-token')).result).toBe('allowed');
  });

  it('keeps at most maxEntries decisions', async () => {
    const { auth, advance } = setup({ maxEntries: 16, reviewBurst: 1000, reviewsPerSecond: 1000 });
    for (let i = 0; i < 100; i++) {
      await auth.check(`Bearer junk-${i}`);
      advance(1);
    }
    expect(auth.cachedDecisions).toBe(16);
  });

  it('a failed review is 503, not cached, and logged without the token', async () => {
    const { api, auth, lines, advance } = setup();
    api.fail({
      status: 403,
      body: {
        kind: 'Status',
        reason: 'Forbidden',
        message: 'tokenreviews.authentication.k8s.io is forbidden: User "x" cannot create resource',
        spec: { token: 'prom-token' },
      },
    });
    const res = await auth.guard(metricsHandler)(req('Bearer prom-token'));
    expect(res.status).toBe(503);
    api.fail(new Error('connect ECONNREFUSED'));
    expect((await auth.check('Bearer prom-token')).result).toBe('error');
    api.fail({ status: 201, body: { kind: 'TokenReview', spec: { token: 'prom-token' } } });
    expect((await auth.check('Bearer prom-token')).result).toBe('error');
    api.fail(undefined);
    expect((await auth.check('Bearer prom-token')).result).toBe('allowed');
    expect(api.tokenReviews()).toBe(4);
    const warnings = lines.filter((l) => l.includes('"level":"warn"'));
    expect(warnings).toHaveLength(1); // one per 10 s
    expect(warnings[0]).toContain('tokenreviews.authentication.k8s.io is forbidden');
    advance(10_000);
    api.fail(new Error('connect ECONNREFUSED'));
    await auth.check('Bearer tenant-token');
    expect(lines.filter((l) => l.includes('"level":"warn"'))).toHaveLength(2);
    expect(lines.join('\n')).toContain('"suppressed":2');
    for (const token of ['prom-token', 'tenant-token']) expect(lines.join('\n')).not.toContain(token);
  });
});

describe('review parsing', () => {
  it('bearer tokens', () => {
    expect(bearerToken('Bearer abc.def')).toBe('abc.def');
    expect(bearerToken('bEaReR   abc ')).toBe('abc');
    expect(bearerToken('Token abc')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });

  it('TokenReview: authenticated needs a user name; anything else is not authenticated or not an answer', () => {
    expect(parseTokenReview({ status: { authenticated: true, user: { username: 'u', groups: ['g', 3], extra: { k: ['v', null], bad: 'x' } } } })).toEqual({
      authenticated: true,
      user: { username: 'u', uid: undefined, groups: ['g'], extra: { k: ['v'] } },
    });
    expect(parseTokenReview({ status: { authenticated: true, user: {} } })).toBeUndefined();
    expect(parseTokenReview({ status: { authenticated: 'yes' } })).toEqual({ authenticated: false, error: undefined });
    expect(parseTokenReview({ status: {} })).toEqual({ authenticated: false, error: undefined });
    expect(parseTokenReview({})).toBeUndefined();
    expect(parseTokenReview('nope')).toBeUndefined();
  });

  it('SubjectAccessReview: allowed only when allowed is true and denied is not', () => {
    expect(parseAccessReview({ status: { allowed: true } })).toEqual({ allowed: true, reason: undefined });
    expect(parseAccessReview({ status: { allowed: true, denied: true } })?.allowed).toBe(false);
    expect(parseAccessReview({ status: { allowed: false, reason: 'r' } })).toEqual({ allowed: false, reason: 'r' });
    expect(parseAccessReview({ status: { allowed: 'true' } })).toBeUndefined();
    expect(parseAccessReview({})).toBeUndefined();
  });
});
