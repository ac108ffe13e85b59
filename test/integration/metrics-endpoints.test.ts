import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningOperator } from '../../src/cli/run.js';
import { repoRoot } from '../support/repo-root.js';
import { freePorts } from '../../devtools/controlplane/controlplane.js';
import { asError } from '../support/errors.js';
import { httpGet } from '../../devtools/http-get.js';
import { apiserverPort, eventually, kubeconfigVia } from '../support/kube.js';
import { LEADER_ARGS, RETRY_MS } from '../support/leader-lease.js';
import { TestEnv, type OperatorHandle } from '../support/operator.js';
import { parsePrometheus, parseValue, type Family, type Sample } from '../support/prometheus-text.js';
import { waitInSync, waitRotationHandled } from '../support/service-sync.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * What an in-process controller serves on its metrics and health ports: the series on /metrics (parsed
 * strictly as Prometheus text) and /healthz and /readyz, for a leader and for a standby. Who may read
 * /metrics is test/integration/metrics-auth.test.ts.
 */

/** One parsed scrape: lookups by name and labels, and a check of a histogram's shape. */
class Scrape {
  constructor(
    readonly text: string,
    readonly families: Map<string, Family>,
  ) {}

  static parse(text: string): Scrape {
    return new Scrape(text, parsePrometheus(text));
  }

  type(family: string): string | undefined {
    return this.families.get(family)?.type;
  }

  samples(name: string, labels: Record<string, string> = {}): Sample[] {
    const all = [...this.families.values()].flatMap((f) => f.samples);
    return all.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** The value of the one sample that matches; undefined when none does. */
  value(name: string, labels: Record<string, string> = {}): number | undefined {
    const found = this.samples(name, labels);
    if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
    return found[0]?.value;
  }

  sum(name: string, labels: Record<string, string> = {}): number {
    return this.samples(name, labels).reduce((a, s) => a + s.value, 0);
  }

  /** Checks a histogram's shape for one label set: increasing le, non-decreasing counts, +Inf == _count. */
  histogram(family: string, labels: Record<string, string>): { count: number; sum: number; buckets: number } {
    expect(this.type(family), `${family} TYPE`).toBe('histogram');
    const buckets = this.samples(`${family}_bucket`, labels);
    expect(buckets.length, `${family}_bucket ${JSON.stringify(labels)}`).toBeGreaterThan(1);
    const les = buckets.map((b) => parseValue(b.labels['le'] ?? ''));
    for (let i = 1; i < buckets.length; i++) {
      expect(les[i]).toBeGreaterThan(les[i - 1] ?? -Infinity);
      expect(buckets[i]?.value).toBeGreaterThanOrEqual(buckets[i - 1]?.value ?? 0);
    }
    expect(les[les.length - 1]).toBe(Infinity);
    const count = this.value(`${family}_count`, labels);
    const sum = this.value(`${family}_sum`, labels);
    expect(count, `${family}_count`).toBeDefined();
    expect(sum, `${family}_sum`).toBeDefined();
    expect(buckets[buckets.length - 1]?.value).toBe(count);
    expect(sum).toBeGreaterThanOrEqual(0);
    return { count: count ?? 0, sum: sum ?? 0, buckets: buckets.length };
  }
}

/** GET /metrics: 200, in the text format 0.0.4, parsed. */
async function scrape(port: number): Promise<Scrape> {
  const res = await httpGet(port, '/metrics');
  expect(res.status).toBe(200);
  expect(res.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  return Scrape.parse(res.body);
}

// =============================================================================================

describe('/metrics, /healthz and /readyz', () => {
  let env: TestEnv;
  let op: RunningOperator;
  const tokens = new Set<string>();
  beforeAll(async () => {
    env = await TestEnv.create('metrics');
    // About what the metrics say; who may read them is test/integration/metrics-auth.test.ts.
    const handle = await env.startOperator({ args: ['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0', '--metrics-auth=false'] });
    if (!handle.operator) throw new Error('in-process handle without operator');
    op = handle.operator;
  });
  afterAll(async () => ifAssigned(env)?.close());

  it('exposes the expected series, parsed as Prometheus text, with sensible values', async () => {
    expect(op.metricsPort).toBeGreaterThan(0);
    // m3 rotates on a schedule (not due within the test): its token gets the usergroup_token_* series.
    for (const i of [1, 2, 3]) {
      await env.createUserGroup(`m${i}`, { userGroupId: `met-${i}`, name: `Metrics ${i}`, ...(i === 3 ? { rotation: { maxTokenAge: '2h' } } : {}) });
    }
    for (const i of [1, 2, 3]) tokens.add((await waitInSync(env, `m${i}`, `met-${i}`)).token);
    // update
    await env.patchUserGroup('m1', { spec: { name: 'Metrics 1 renamed', mapping: { region: 'eu' } } });
    await eventually('the rename at the service', async () => (env.simGroup('met-1')?.name === 'Metrics 1 renamed' ? true : undefined));
    await waitInSync(env, 'm1', 'met-1');
    // rotate
    await env.requestRotation('m2', 'metrics-1');
    tokens.add(await waitRotationHandled(env, 'm2', 'met-2', 'metrics-1'));
    // an error: a UserGroupService that does not exist
    await env.createUserGroup('broken', { userGroupId: 'met-broken', name: 'Broken', serviceRef: { name: 'does-not-exist' } });
    await env.waitForReady('broken', 'ConnectionNotFound', 'False');

    const s = await eventually(
      'a quiet scrape (queue drained, counters consistent)',
      async () => {
        const s = await scrape(op.metricsPort ?? 0);
        const reconciles = s.sum('usergroup_reconcile_total');
        const worked = s.value('workqueue_work_duration_seconds_count', { name: 'usergroup' }) ?? -1;
        const synced = s.value('usergroup_usergroups', { ready: 'True', reason: 'Synced' });
        return s.value('workqueue_depth', { name: 'usergroup' }) === 0 && worked === reconciles && synced === 3 ? s : undefined;
      },
      30_000,
      500,
    );
    console.log(`[metrics] scrape: ${s.families.size} families, ${[...s.families.values()].reduce((a, f) => a + f.samples.length, 0)} samples`);

    // Every family has HELP and TYPE.
    for (const f of s.families.values()) {
      expect(f.help, `HELP of ${f.name}`).toBeTruthy();
      expect(f.type, `TYPE of ${f.name}`).toBeTruthy();
    }

    // Reconciles by result; errors; duration by result.
    expect(s.type('usergroup_reconcile_total')).toBe('counter');
    const ok = s.sum('usergroup_reconcile_total', { result: 'success' }) + s.sum('usergroup_reconcile_total', { result: 'requeue' });
    expect(ok).toBeGreaterThanOrEqual(5); // 3 creates, 1 update, 1 rotation
    const errors = s.value('usergroup_reconcile_total', { result: 'error' }) ?? 0;
    expect(errors).toBeGreaterThanOrEqual(1);
    expect(s.type('usergroup_reconcile_errors_total')).toBe('counter');
    expect(s.value('usergroup_reconcile_errors_total')).toBe(errors);
    for (const sample of s.samples('usergroup_reconcile_total')) {
      expect(['success', 'requeue', 'error']).toContain(sample.labels['result']);
      const h = s.histogram('usergroup_reconcile_duration_seconds', { result: sample.labels['result'] ?? '' });
      expect(h.count).toBe(sample.value);
    }

    // Work queue.
    expect(s.type('workqueue_depth')).toBe('gauge');
    expect(s.value('workqueue_depth', { name: 'usergroup' })).toBe(0);
    expect(s.type('workqueue_adds_total')).toBe('counter');
    expect(s.value('workqueue_adds_total', { name: 'usergroup' })).toBeGreaterThanOrEqual(5);
    // Read at scrape time from the queue (client-go's ticker gauges): idle now, so no work in flight.
    expect(s.type('workqueue_unfinished_work_seconds')).toBe('gauge');
    expect(s.value('workqueue_unfinished_work_seconds', { name: 'usergroup' })).toBe(0);
    expect(s.type('workqueue_longest_running_processor_seconds')).toBe('gauge');
    expect(s.value('workqueue_longest_running_processor_seconds', { name: 'usergroup' })).toBe(0);
    expect(s.type('workqueue_retries_total')).toBe('counter');
    expect(s.value('workqueue_retries_total', { name: 'usergroup' })).toBeGreaterThanOrEqual(1);
    const waited = s.histogram('workqueue_queue_duration_seconds', { name: 'usergroup' });
    const worked = s.histogram('workqueue_work_duration_seconds', { name: 'usergroup' });
    expect(waited.count).toBeGreaterThanOrEqual(worked.count);
    expect(worked.count).toBe(s.sum('usergroup_reconcile_total'));
    expect(worked.sum).toBeGreaterThan(0);

    // Informers: one watch-list per cached resource so far (a healthy start), whose connection went on as the
    // watch; no paged list, so no list page read; nothing abandoned.
    for (const family of [
      'usergroup_informer_lists_total',
      'usergroup_informer_watch_lists_total',
      'usergroup_informer_watches_total',
      'usergroup_informer_watch_ends_total',
    ]) {
      expect(s.type(family), family).toBe('counter');
    }
    for (const resource of ['usergroups', 'secrets', 'usergroupservices', 'clusterusergroupservices', 'usergroupclaims', 'namespaces']) {
      expect(s.value('usergroup_informer_watch_lists_total', { resource }), resource).toBe(1);
      expect(s.value('usergroup_informer_lists_total', { resource }), resource).toBe(0);
      expect(s.value('usergroup_informer_watches_total', { resource }), resource).toBeGreaterThanOrEqual(1);
      expect(s.value('usergroup_informer_watch_ends_total', { resource, reason: 'gone' }), resource).toBe(0);
      expect(s.value('usergroup_informer_oversized_pages_total', { resource }), resource).toBe(0);
      expect(s.value('usergroup_informer_largest_page_bytes', { resource }), resource).toBe(0);
    }

    // Service requests by operation and code, matching what the simulator counted.
    const puts = env.calls().upsert.created + env.calls().upsert.updated;
    // 4 syncs and the PUT the rotation reads the current token with.
    expect(puts).toBe(5);
    expect(s.type('usergroup_service_requests_total')).toBe('counter');
    expect(s.value('usergroup_service_requests_total', { operation: 'upsert', code: '200' })).toBe(puts);
    expect(s.value('usergroup_service_requests_total', { operation: 'rotate', code: '200' })).toBe(1);
    expect(s.histogram('usergroup_service_request_duration_seconds', { operation: 'upsert' }).count).toBe(puts);
    expect(s.histogram('usergroup_service_request_duration_seconds', { operation: 'rotate' }).count).toBe(1);
    for (const sample of s.samples('usergroup_service_requests_total')) {
      expect(['upsert', 'rotate']).toContain(sample.labels['operation']);
      expect(sample.labels['code']).toMatch(/^(\d{3}|none)$/);
    }

    expect(s.type('usergroup_tokens_rotated_total')).toBe('counter');
    expect(s.value('usergroup_tokens_rotated_total', { trigger: 'requested' })).toBe(1);
    expect(s.sum('usergroup_tokens_rotated_total')).toBe(1);
    expect(s.type('usergroup_rotation_failures_total')).toBe('counter');
    expect(s.sum('usergroup_rotation_failures_total')).toBe(0);

    // Token schedules: one series each, only for the UserGroup with spec.rotation.maxTokenAge.
    const m3 = { namespace: env.namespace, name: 'm3' };
    const status = (await env.getUserGroup('m3')).status?.rotation;
    const issued = s.value('usergroup_token_issued_timestamp_seconds', m3) ?? NaN;
    expect(issued).toBe(Date.parse(status?.tokenIssuedTime ?? '') / 1000);
    expect(Math.abs(issued - Date.now() / 1000)).toBeLessThan(120);
    expect(s.value('usergroup_token_max_age_seconds', m3)).toBe(7_200);
    const next = s.value('usergroup_token_next_rotation_timestamp_seconds', m3) ?? NaN;
    expect(next).toBe(Date.parse(status?.nextRotationTime ?? '') / 1000);
    expect(next - issued).toBeGreaterThanOrEqual(0.9 * 7_200 - 1);
    expect(next - issued).toBeLessThanOrEqual(7_200);
    for (const family of ['usergroup_token_issued_timestamp_seconds', 'usergroup_token_max_age_seconds', 'usergroup_token_next_rotation_timestamp_seconds']) {
      expect(s.type(family), family).toBe('gauge');
      expect(
        s.samples(family).map((x) => x.labels['name']),
        family,
      ).toEqual(['m3']);
    }

    // UserGroups by Ready status and reason.
    expect(s.type('usergroup_usergroups')).toBe('gauge');
    expect(s.value('usergroup_usergroups', { ready: 'True', reason: 'Synced' })).toBe(3);
    expect(s.value('usergroup_usergroups', { ready: 'False', reason: 'ConnectionNotFound' })).toBe(1);
    expect(s.sum('usergroup_usergroups')).toBe(4);

    // Leader status and build info.
    expect(s.type('usergroup_leader')).toBe('gauge');
    expect(s.value('usergroup_leader')).toBe(1);
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(s.value('usergroup_build_info', { version: pkg.version, node_version: process.version })).toBe(1);

    // Events by type and reason.
    expect(s.value('usergroup_events_total', { type: 'Normal', reason: 'Synced' })).toBeGreaterThanOrEqual(3);
    expect(s.value('usergroup_events_total', { type: 'Normal', reason: 'TokenRotated' })).toBe(1);
    expect(s.value('usergroup_events_total', { type: 'Warning', reason: 'ConnectionNotFound' })).toBeGreaterThanOrEqual(1);

    // prom-client's process defaults.
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_cpu_system_seconds_total',
      'process_start_time_seconds',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
    ]) {
      expect(s.samples(name).length, name).toBeGreaterThan(0);
    }
    expect(s.value('process_start_time_seconds')).toBeGreaterThan(1_600_000_000);
    expect(s.value('process_resident_memory_bytes')).toBeGreaterThan(1_000_000);

    // No label value (nor anything else) carries a token or the API key.
    for (const token of [...tokens, ...(await Promise.all(['m1', 'm2', 'm3'].map((n) => env.secretToken(n))))]) if (token) tokens.add(token);
    expect(tokens.size).toBeGreaterThanOrEqual(4);
    const secrets = [...tokens, env.apiKey];
    for (const f of s.families.values()) {
      for (const sample of f.samples) {
        for (const value of Object.values(sample.labels)) {
          for (const secret of secrets) expect(value.includes(secret), `label of ${sample.name}`).toBe(false);
        }
      }
    }
    for (const secret of secrets) expect(s.text.includes(secret)).toBe(false);

    // Unknown paths are 404.
    expect((await httpGet(op.metricsPort ?? 0, '/nope')).status).toBe(404);
  });

  it('/healthz and /readyz answer 200 on a started controller', async () => {
    expect(op.healthPort).toBeGreaterThan(0);
    const healthz = await httpGet(op.healthPort ?? 0, '/healthz');
    expect(healthz.status).toBe(200);
    expect(healthz.body).toBe('ok\n');
    const readyz = await httpGet(op.healthPort ?? 0, '/readyz');
    expect(readyz.status).toBe(200);
    expect(readyz.body).toBe('ok\n');
  });

  it('/readyz is 503 until the caches are synced, while /healthz is 200', async () => {
    const proxy: TcpProxy = await startTcpProxy('127.0.0.1', apiserverPort(env.kubeconfigPath));
    proxy.refuseNew(true);
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigVia(env.kubeconfigPath, proxy.port));
    const [healthPort] = await freePorts(1);
    let started: OperatorHandle | undefined;
    let startError: Error | undefined;
    const starting = env.startOperator({ kc, args: ['--metrics-addr', '0', '--health-addr', `127.0.0.1:${healthPort}`] }).then(
      (s) => {
        started = s;
      },
      (err: unknown) => {
        startError = asError(err);
      },
    );
    try {
      const notReady = await eventually(
        'the health server to answer',
        async () => {
          if (startError) throw startError;
          return httpGet(healthPort ?? 0, '/readyz').catch(() => undefined);
        },
        20_000,
        100,
      );
      expect(notReady.status).toBe(503);
      expect(notReady.body).toMatch(/caches not synced/);
      expect((await httpGet(healthPort ?? 0, '/healthz')).status).toBe(200);
      await sleep(1_500);
      expect(started).toBeUndefined();
      expect((await httpGet(healthPort ?? 0, '/readyz')).status).toBe(503);
      expect(proxy.accepted).toBeGreaterThan(0); // it really tried (and was refused)

      const openedAt = Date.now();
      proxy.refuseNew(false);
      await eventually(
        '/readyz 200 once the apiserver is reachable',
        async () => ((await httpGet(healthPort ?? 0, '/readyz')).status === 200 ? true : undefined),
        60_000,
        100,
      );
      console.log(`[health] /readyz turned 200 ${Date.now() - openedAt} ms after the apiserver became reachable`);
      await starting;
      expect(started?.operator?.controller.synced).toBe(true);
      expect((await httpGet(healthPort ?? 0, '/healthz')).status).toBe(200);
    } finally {
      proxy.refuseNew(false); // so that a start still in progress can finish and be stopped
      await starting;
      await started?.stop();
      await proxy.close();
    }
  });

  it('a standby with synced caches is ready too, and reports usergroup_leader 0', async () => {
    const args = ['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0', '--metrics-auth=false', ...LEADER_ARGS(env, 'ug-ready')];
    const first = await env.startOperator({ args });
    await eventually('the first to lead', async () => (first.operator?.runner.working ? true : undefined), 20_000, 100);
    const second = await env.startOperator({ args });
    const p1 = first.operator;
    const p2 = second.operator;
    if (!p1 || !p2) throw new Error('in-process handles expected');
    await sleep(3 * RETRY_MS);
    expect(p2.runner.working).toBe(false);
    expect((await httpGet(p2.healthPort ?? 0, '/readyz')).status).toBe(200);
    expect((await httpGet(p2.healthPort ?? 0, '/healthz')).status).toBe(200);
    expect((await scrape(p2.metricsPort ?? 0)).value('usergroup_leader')).toBe(0);
    expect((await scrape(p1.metricsPort ?? 0)).value('usergroup_leader')).toBe(1);
    expect((await httpGet(p1.healthPort ?? 0, '/readyz')).status).toBe(200);
    await second.stop();
    await first.stop();
  });
});
