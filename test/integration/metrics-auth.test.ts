import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../devtools/controlplane/controlplane.js';
import { killAllControllers, msgIs, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { httpGet, type HttpAnswer } from '../../devtools/http-get.js';
import { eventually, kubectl } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * /metrics behind a TokenReview and a SubjectAccessReview, as `usergroup-operator run` serves it by default
 * (--metrics-auth), against the real kube-apiserver and its RBAC: nothing is mocked. ServiceAccount tokens come
 * from the TokenRequest API. How many reviews the operator makes is counted by the apiserver itself
 * (apiserver_request_total), which can only over-count (another client's reviews would add to it), so an upper
 * bound that holds for it holds for the operator.
 */

/** The operator's decision cache TTL (MetricsAuthorizer's default). */
const TTL_MS = 10_000;
/** Its review budget: burst and calls per second (MetricsAuthorizer's defaults). */
const BURST = 20;
const PER_SECOND = 2;

/** Sum of a Prometheus counter's samples whose labels include all of `labels`. */
function counter(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([^ ]+)/.exec(line);
    if (match?.[1] !== name) continue;
    const have = new Map([...(match[2] ?? '').matchAll(/([a-zA-Z_]+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(match[3]);
  }
  return sum;
}

/** The apiserver's own count of the review objects created so far (all clients). */
async function apiserverReviews(): Promise<{ tokenReviews: number; accessReviews: number }> {
  const res = await kubectl(['get', '--raw', '/metrics']);
  if (res.code !== 0) throw new Error(`kubectl get --raw /metrics: ${res.stderr}`);
  return {
    tokenReviews: counter(res.stdout, 'apiserver_request_total', { resource: 'tokenreviews', verb: 'POST' }),
    accessReviews: counter(res.stdout, 'apiserver_request_total', { resource: 'subjectaccessreviews', verb: 'POST' }),
  };
}

describe('/metrics needs a token allowed to get it (TokenReview + SubjectAccessReview)', () => {
  let env: TestEnv;
  let c: ControllerProcess;
  let metricsPort: number;
  let healthPort: number;
  let rbac: RbacAuthorizationV1Api;
  let reader: string;
  /** Every token sent in this file, to show none is ever logged. */
  const sent = new Set<string>();

  /** A fresh token (the operator has never seen it) for a ServiceAccount of the env's namespace. */
  async function tokenFor(serviceAccount: string): Promise<string> {
    const request = await env.core.createNamespacedServiceAccountToken({
      namespace: env.namespace,
      name: serviceAccount,
      body: { spec: { expirationSeconds: 3600 } },
    });
    const token = request.status?.token;
    if (!token) throw new Error('the TokenRequest returned no token');
    sent.add(token);
    return token;
  }
  const scrape = (token?: string): Promise<HttpAnswer> =>
    httpGet(metricsPort, '/metrics', { authorization: token === undefined ? undefined : `Bearer ${token}` });

  beforeAll(async () => {
    env = await TestEnv.create('metrics-auth');
    rbac = env.kc.makeApiClient(RbacAuthorizationV1Api);
    reader = `${env.namespace}-metrics-reader`;
    for (const name of ['scraper', 'nobody']) await env.core.createNamespacedServiceAccount({ namespace: env.namespace, body: { metadata: { name } } });
    // What the chart's <fullname>-metrics-reader ClusterRole holds, bound to "scraper" only.
    await rbac.createClusterRole({ body: { metadata: { name: reader }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: reader },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: reader },
        subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: env.namespace }],
      },
    });
    [metricsPort = 0, healthPort = 0] = await freePorts(2);
    // The CLI's default is --metrics-auth=true: not passed on purpose.
    c = env.spawnController(['--metrics-addr', `127.0.0.1:${metricsPort}`, '--health-addr', `127.0.0.1:${healthPort}`]);
    await waitLog(c, 'workers started', msgIs('workers started'));
  });

  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(rbac)
      ?.deleteClusterRoleBinding({ name: reader })
      .catch(() => undefined);
    await ifAssigned(rbac)
      ?.deleteClusterRole({ name: reader })
      .catch(() => undefined);
    await ifAssigned(env)?.close();
  });

  it('401 without a token, with another scheme, or with a token the apiserver does not know', async () => {
    const garbage = `garbage-${randomBytes(16).toString('hex')}`;
    sent.add(garbage);
    const forged = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ.c2lnbmF0dXJl';
    sent.add(forged);
    for (const authorization of [undefined, `Basic ${Buffer.from('admin:admin').toString('base64')}`, `Bearer ${garbage}`, `Bearer ${forged}`]) {
      const res = await httpGet(metricsPort, '/metrics', { authorization });
      expect(res.status, String(authorization)).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
      expect(res.body).not.toContain('usergroup_');
    }
  });

  it('403 for a ServiceAccount the cluster does not allow to get /metrics', async () => {
    const res = await scrape(await tokenFor('nobody'));
    expect(res.status).toBe(403);
    expect(res.body).toContain(`system:serviceaccount:${env.namespace}:nobody`);
    expect(res.body).not.toContain('usergroup_');
  });

  it('200 with the metrics for a ServiceAccount bound to a ClusterRole with get on /metrics; HEAD too', async () => {
    const token = await tokenFor('scraper');
    const res = await scrape(token);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(counter(res.body, 'usergroup_leader')).toBe(1);
    // This very request's reviews are counted before the metrics are rendered.
    expect(counter(res.body, 'usergroup_metrics_auth_reviews_total', { review: 'SubjectAccessReview', result: 'allowed' })).toBeGreaterThanOrEqual(1);
    expect(counter(res.body, 'usergroup_metrics_auth_reviews_total', { review: 'SubjectAccessReview', result: 'denied' })).toBeGreaterThanOrEqual(1);
    expect(counter(res.body, 'usergroup_metrics_auth_requests_total', { result: 'unauthenticated' })).toBeGreaterThanOrEqual(4);
    const head = await new Promise<number>((resolve, reject) => {
      http
        .request({ host: '127.0.0.1', port: metricsPort, path: '/metrics', method: 'HEAD', agent: false, headers: { authorization: `Bearer ${token}` } }, (r) =>
          resolve(r.statusCode ?? 0),
        )
        .on('error', reject)
        .end();
    });
    expect(head).toBe(200);
  });

  it("/healthz and /readyz stay open (the kubelet's probes carry no token)", async () => {
    expect((await httpGet(healthPort, '/healthz')).status).toBe(200);
    expect((await httpGet(healthPort, '/readyz')).status).toBe(200);
  });

  it('repeated scrapes cost one TokenReview (and one SubjectAccessReview) per token per TTL, as the apiserver counts them', async () => {
    const [allowed, refused] = [await tokenFor('scraper'), await tokenFor('nobody')];
    const garbage = `garbage-${randomBytes(16).toString('hex')}`;
    sent.add(garbage);
    const before = await apiserverReviews();
    const started = Date.now();
    const SCRAPES = 30;
    const statuses = { allowed: new Set<number>(), refused: new Set<number>(), garbage: new Set<number>() };
    const bodies: string[] = [];
    for (let i = 0; i < SCRAPES; i++) {
      const ok = await scrape(allowed);
      statuses.allowed.add(ok.status);
      bodies.push(ok.body);
      statuses.refused.add((await scrape(refused)).status);
      statuses.garbage.add((await scrape(garbage)).status);
      await sleep(100);
    }
    const elapsed = Date.now() - started;
    const after = await apiserverReviews();
    const tokenReviews = after.tokenReviews - before.tokenReviews;
    const accessReviews = after.accessReviews - before.accessReviews;
    // Each token's decision is reviewed again at most once per TTL.
    const windows = Math.floor(elapsed / TTL_MS) + 1;
    console.log(
      `[metrics-auth] ${3 * SCRAPES} scrapes with 3 tokens in ${elapsed} ms: ${tokenReviews} TokenReviews, ${accessReviews} SubjectAccessReviews at the apiserver (bound ${3 * windows} / ${2 * windows})`,
    );
    expect([...statuses.allowed]).toEqual([200]);
    expect([...statuses.refused]).toEqual([403]);
    expect([...statuses.garbage]).toEqual([401]);
    expect(tokenReviews).toBeGreaterThanOrEqual(3);
    expect(tokenReviews).toBeLessThanOrEqual(3 * windows);
    expect(accessReviews).toBeGreaterThanOrEqual(2);
    expect(accessReviews).toBeLessThanOrEqual(2 * windows);
    // The operator's own count agrees: between the first and the last allowed scrape, cached decisions answered
    // everything but a re-review per token and TTL, and the first refused and garbage requests.
    const cached = (body: string | undefined): number => counter(body ?? '', 'usergroup_metrics_auth_requests_total', { source: 'cache' });
    expect(cached(bodies.at(-1)) - cached(bodies[0])).toBeGreaterThanOrEqual(3 * (SCRAPES - 1) - 3 * (windows - 1) - 2);
  });

  it('a decision lasts at most the TTL: after the binding is removed, the same token is refused', async () => {
    const token = await tokenFor('scraper');
    expect((await scrape(token)).status).toBe(200);
    const reviewedAt = Date.now();
    await rbac.deleteClusterRoleBinding({ name: reader });
    // Still the cached decision right after.
    expect((await scrape(token)).status).toBe(200);
    await eventually('403 once the decision expired', async () => ((await scrape(token)).status === 403 ? true : undefined), 3 * TTL_MS, 250);
    const refusedAfter = Date.now() - reviewedAt;
    console.log(`[metrics-auth] refused ${refusedAfter} ms after the binding was deleted (TTL ${TTL_MS} ms)`);
    expect(refusedAfter).toBeGreaterThanOrEqual(TTL_MS - 1_000);
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: reader },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: reader },
        subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: env.namespace }],
      },
    });
  });

  it('a flood of made-up tokens costs the apiserver a bounded number of TokenReviews, and a scraper with a cached decision is served throughout', async () => {
    // The bucket never holds more than BURST, whatever the tests before left in it: the bound holds from any start.
    const token = await tokenFor('scraper');
    expect((await scrape(token)).status).toBe(200);
    const before = await apiserverReviews();
    const started = Date.now();
    const FLOOD = 400;
    const CONCURRENCY = 50;
    const statuses = new Map<number, number>();
    const scraperStatuses = new Set<number>();
    let next = 0;
    await Promise.all([
      ...Array.from({ length: CONCURRENCY }, async () => {
        while (next < FLOOD) {
          next++;
          const res = await httpGet(metricsPort, '/metrics', { authorization: `Bearer flood-${randomBytes(12).toString('hex')}` });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }),
      (async () => {
        for (let i = 0; i < 10; i++) {
          scraperStatuses.add((await scrape(token)).status);
          await sleep(50);
        }
      })(),
    ]);
    const elapsed = Date.now() - started;
    const after = await apiserverReviews();
    const tokenReviews = after.tokenReviews - before.tokenReviews;
    const bound = BURST + Math.ceil((elapsed / 1000) * PER_SECOND) + 1;
    console.log(
      `[metrics-auth] flood of ${FLOOD} distinct made-up tokens (${CONCURRENCY} at once) in ${elapsed} ms: ${JSON.stringify(Object.fromEntries(statuses))}; ${tokenReviews} TokenReviews at the apiserver (bound ${bound}); the cached scraper got ${[...scraperStatuses].join(', ')}`,
    );
    expect(elapsed).toBeLessThan(TTL_MS); // else the scraper's decision would have expired mid-flood
    expect([...statuses.keys()].sort()).toEqual([401, 429]);
    expect(statuses.get(429)).toBeGreaterThan(FLOOD / 2);
    expect(tokenReviews).toBeLessThanOrEqual(bound);
    expect([...scraperStatuses]).toEqual([200]);
  });

  it('never logs a token, and does log the refusals', async () => {
    const output = c.output.join('\n');
    expect(sent.size).toBeGreaterThanOrEqual(8);
    for (const token of sent) expect(output.includes(token), 'a token in the controller output').toBe(false);
    for (const token of sent) expect(output.includes(token.slice(-24)), 'a piece of a token in the controller output').toBe(false);
    expect(output).toContain('metrics request refused: not allowed to get /metrics');
    expect(output).toContain('metrics request refused: token not authenticated');
    expect(c.exited()).toBe(false);
  });
});
