import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLAGS } from '../../src/cli/config.js';
import type { RunningOperator } from '../../src/cli/run.js';
import { repoRoot } from '../../src/devcluster/binaries.js';
import { freePorts } from '../../src/devcluster/controlplane.js';
import { killAllControllers, MAIN, msgIs, msgMatches, signalAndWait, waitLog } from '../support/controller-process.js';
import { apiserverPort, eventually, kubeconfigVia, kubectl } from '../support/kube.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

// Controller processes come from env.spawnController, which keeps each one's exit code and logs
// visible; whatever a test leaves running (SIGSTOPped ones too) is killed at the end.
afterAll(killAllControllers);

// ---------------------------------------------------------------------------------------------
// Kubernetes helpers
// ---------------------------------------------------------------------------------------------

interface LeaseView {
  holder: string;
  transitions: number;
}

async function readLease(env: TestEnv, name: string): Promise<LeaseView | undefined> {
  try {
    const lease = await env.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: env.namespace, name });
    return { holder: lease.spec?.holderIdentity ?? '', transitions: lease.spec?.leaseTransitions ?? 0 };
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

/** The Lease exactly as the apiserver stores it (kubectl), to check the MicroTime format. */
async function rawLease(env: TestEnv, name: string): Promise<Record<string, unknown>> {
  const res = await kubectl(['get', 'lease', '-n', env.namespace, name, '-o', 'json']);
  if (res.code !== 0) throw new Error(`kubectl get lease: ${res.stderr}`);
  return JSON.parse(res.stdout) as Record<string, unknown>;
}

/** Synced, observedGeneration current, and the Secret holds exactly the service's token for the group. */
async function waitInSync(env: TestEnv, name: string, userGroupId: string, timeoutMs = 60_000): Promise<{ ug: UserGroupObject; token: string }> {
  return eventually(`${env.namespace}/${name} synced with the service's token`, async () => {
    const ug = await env.getUserGroup(name);
    const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status !== 'True' || ready.reason !== 'Synced' || ug.status?.observedGeneration !== ug.metadata.generation) return undefined;
    const token = await env.secretToken(name);
    const sim = env.simGroup(userGroupId);
    return token && sim && sha256(token) === sim.tokenSha256 ? { ug, token } : undefined;
  }, timeoutMs, 250);
}

async function waitRotationHandled(env: TestEnv, name: string, userGroupId: string, value: string, timeoutMs = 60_000): Promise<string> {
  return eventually(`rotation "${value}" of ${name} handled`, async () => {
    const ug = await env.getUserGroup(name);
    const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
    if (ug.status?.rotation?.lastHandledRequest !== value || ready?.status !== 'True' || ready.reason !== 'Synced') return undefined;
    const token = await env.secretToken(name);
    const sim = env.simGroup(userGroupId);
    return token && sim && sha256(token) === sim.tokenSha256 ? token : undefined;
  }, timeoutMs, 250);
}

const rotationsOf = (env: TestEnv, userGroupId: string): number => env.sim.stats(env.apiKey).rotationsByUserGroupId[userGroupId] ?? 0;
const totalCalls = (env: TestEnv, operation: 'upsert' | 'rotate'): number => Object.values(env.calls()[operation]).reduce((a, b) => a + b, 0);

function httpGet(port: number, urlPath: string): Promise<{ status: number; body: string; contentType: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: 5_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), contentType: res.headers['content-type'] }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} timed out`)));
  });
}

// ---------------------------------------------------------------------------------------------
// A small parser of the Prometheus text exposition format (0.0.4).
// ---------------------------------------------------------------------------------------------

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

interface Family {
  readonly name: string;
  help: string | undefined;
  type: string | undefined;
  readonly samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function parseValue(text: string): number {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const n = Number(text);
  if (text === '' || Number.isNaN(n)) throw new Error(`bad sample value "${text}"`);
  return n;
}

/** Parses the text format strictly: every sample must belong to a family declared by HELP/TYPE. */
function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (!f) {
      f = { name, help: undefined, type: undefined, samples: [] };
      families.set(name, f);
    }
    return f;
  };
  const owner = (sampleName: string): Family => {
    const candidates = [sampleName];
    for (const suffix of ['_bucket', '_sum', '_count', '_total', '_created']) {
      if (sampleName.endsWith(suffix)) candidates.push(sampleName.slice(0, -suffix.length));
    }
    for (const c of candidates) {
      const f = families.get(c);
      if (f?.type !== undefined) return f;
    }
    throw new Error(`sample ${sampleName} has no # TYPE line`);
  };
  for (const [index, rawLine] of text.split('\n').entries()) {
    const line = rawLine.trimEnd();
    if (line === '') continue;
    const where = `line ${index + 1}: ${line}`;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s+(.*))?$/.exec(line);
      if (!m) continue; // a plain comment
      const f = family(m[2] ?? '');
      if (m[1] === 'HELP') f.help = (m[3] ?? '').replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      else {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(m[3] ?? '')) throw new Error(`bad TYPE, ${where}`);
        f.type = m[3];
      }
      continue;
    }
    const nameMatch = METRIC_NAME.exec(line);
    if (!nameMatch) throw new Error(`no metric name, ${where}`);
    const name = nameMatch[0];
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      rest = rest.slice(1);
      for (;;) {
        rest = rest.trimStart();
        if (rest.startsWith('}')) {
          rest = rest.slice(1);
          break;
        }
        const ln = LABEL_NAME.exec(rest);
        if (!ln) throw new Error(`bad label name, ${where}`);
        rest = rest.slice(ln[0].length);
        if (!rest.startsWith('="')) throw new Error(`bad label, ${where}`);
        rest = rest.slice(2);
        let value = '';
        for (;;) {
          const ch = rest[0];
          if (ch === undefined) throw new Error(`unterminated label value, ${where}`);
          rest = rest.slice(1);
          if (ch === '"') break;
          if (ch === '\\') {
            const next = rest[0];
            rest = rest.slice(1);
            value += next === 'n' ? '\n' : next === '\\' ? '\\' : next === '"' ? '"' : `\\${next ?? ''}`;
          } else value += ch;
        }
        if (ln[0] in labels) throw new Error(`duplicate label ${ln[0]}, ${where}`);
        labels[ln[0]] = value;
        rest = rest.trimStart();
        if (rest.startsWith(',')) rest = rest.slice(1);
        else if (!rest.startsWith('}')) throw new Error(`expected , or }, ${where}`);
      }
    }
    const parts = rest.trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || !/^\s/.test(rest)) throw new Error(`bad sample, ${where}`);
    owner(name).samples.push({ name, labels, value: parseValue(parts[0] ?? '') });
  }
  return families;
}

class Scrape {
  constructor(readonly text: string, readonly families: Map<string, Family>) {}

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

async function scrape(port: number): Promise<Scrape> {
  const res = await httpGet(port, '/metrics');
  expect(res.status).toBe(200);
  expect(res.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  return Scrape.parse(res.body);
}

const LEADER_ARGS = (env: TestEnv, id = 'ug-test'): string[] => [
  '--leader-elect', '--leader-election-namespace', env.namespace, '--leader-election-id', id,
  '--lease-duration', '6s', '--renew-deadline', '4s', '--retry-period', '1s',
];
const LEASE_MS = 6_000;
const RETRY_MS = 1_000;

const SERVICE_CALL_MSGS = new Set(['user group synced', 'token rotated', 'rotation refused; recovered the current token', 'service call failed', 'reconcile failed']);

// =============================================================================================

describe('leader election with two controller processes', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('lead');
  });
  afterAll(async () => {
    await killAllControllers();
    await env?.close();
  });

  it('one leader syncs; after SIGKILL the standby takes over within the lease, the rotation requested meanwhile happens once', async () => {
    // Both start together: exactly one may win.
    const a = env.spawnController(LEADER_ARGS(env));
    const b = env.spawnController(LEADER_ARGS(env));
    await Promise.all([a, b].map((c) => waitLog(c, 'caches synced', msgIs('caches synced'))));
    const firstLeader = await eventually('one controller to become leader', async () =>
      [a, b].find((c) => c.logs.some(msgIs('became leader'))), 30_000, 100);
    const standby = firstLeader === a ? b : a;
    // Give the loser several retry periods: it must stay a standby.
    await sleep(3 * RETRY_MS + 500);
    expect(standby.logs.some(msgIs('became leader'))).toBe(false);
    expect(firstLeader.logs.filter(msgIs('became leader'))).toHaveLength(1);
    const leaderId = firstLeader.identity();
    const standbyId = standby.identity();
    expect(leaderId).toBeTruthy();
    expect(standbyId).toBeTruthy();
    expect(leaderId).not.toBe(standbyId);
    const lease = await readLease(env, 'ug-test');
    expect(lease?.holder).toBe(leaderId);
    const raw = await rawLease(env, 'ug-test');
    const spec = raw['spec'] as Record<string, unknown>;
    expect(spec['leaseDurationSeconds']).toBe(6);
    // MicroTime: RFC 3339 with microseconds.
    expect(spec['renewTime']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(spec['acquireTime']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);

    const ids = ['le-1', 'le-2', 'le-3', 'le-4'];
    for (const [i, id] of ids.entries()) await env.createUserGroup(`g${i + 1}`, { userGroupId: id, name: `Group ${i + 1}` });
    for (const [i, id] of ids.entries()) await waitInSync(env, `g${i + 1}`, id);
    // Only the leader called the service: one PUT per group, and the standby logged no service work.
    expect(env.calls().upsert.created).toBe(4);
    expect(totalCalls(env, 'upsert')).toBe(4);
    expect(standby.logs.filter((l) => SERVICE_CALL_MSGS.has(String(l.json?.['msg'])))).toEqual([]);
    expect(standby.logs.some(msgIs('workers started'))).toBe(false);
    expect(firstLeader.logs.filter(msgIs('user group synced'))).toHaveLength(4);

    // SIGKILL the leader; while nobody leads, ask for a rotation.
    const transitionsBefore = lease?.transitions ?? 0;
    const killedAt = Date.now();
    await signalAndWait(firstLeader, 'SIGKILL');
    await env.requestRotation('g1', 'during-failover');

    const took = await waitLog(standby, 'became leader', msgIs('became leader'), LEASE_MS + 20_000);
    const failoverMs = took.at - killedAt;
    const leaseNow = await eventually('the Lease to name the standby', async () => {
      const l = await readLease(env, 'ug-test');
      return l?.holder === standbyId ? { l, at: Date.now() } : undefined;
    }, 10_000, 100);
    console.log(`[leader election] failover (SIGKILL -> standby "became leader"): ${failoverMs} ms; Lease holder changed seen after ${leaseNow.at - killedAt} ms (lease 6s, renew 4s, retry 1s)`);
    // Within the lease duration plus the standby's retry period (and slack for a loaded 2-core machine).
    expect(failoverMs).toBeLessThanOrEqual(LEASE_MS + 2 * RETRY_MS * 1.2 + 2_000);
    expect(leaseNow.l?.transitions).toBe(transitionsBefore + 1);

    // The standby did no service work before it led.
    const tookIndex = standby.logs.indexOf(took);
    expect(standby.logs.slice(0, tookIndex).filter((l) => SERVICE_CALL_MSGS.has(String(l.json?.['msg'])))).toEqual([]);

    // The rotation requested while nobody led happens exactly once.
    await waitRotationHandled(env, 'g1', 'le-1', 'during-failover');
    await sleep(3_000);
    expect(rotationsOf(env, 'le-1')).toBe(1);
    expect(totalCalls(env, 'rotate')).toBe(1);
    const token = await env.secretToken('g1');
    expect(sha256(token ?? '')).toBe(env.simGroup('le-1')?.tokenSha256);
    // The new leader found the other groups in sync: no PUT again.
    expect(totalCalls(env, 'upsert')).toBe(4);

    // Work continues: a group created after the failover is synced by the new leader.
    await env.createUserGroup('g5', { userGroupId: 'le-5', name: 'Group 5' });
    await waitInSync(env, 'g5', 'le-5');
    expect(standby.logs.some((l) => l.json?.['msg'] === 'user group synced' && l.json['usergroup'] === `${env.namespace}/g5`)).toBe(true);
    expect(env.calls().upsert.created).toBe(5);
  });
});

describe('a leader that cannot renew stops at once', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('stop');
  });
  afterAll(async () => {
    await killAllControllers();
    await env?.close();
  });

  it('SIGSTOPped leader: the standby takes over; after SIGCONT the old leader stops working and makes no call', async () => {
    const a = env.spawnController(LEADER_ARGS(env));
    await waitLog(a, 'became leader', msgIs('became leader'));
    const b = env.spawnController(LEADER_ARGS(env));
    await waitLog(b, 'caches synced', msgIs('caches synced'));
    await waitLog(b, 'waiting to become leader', msgIs('waiting to become leader'));
    for (const i of [1, 2, 3]) await env.createUserGroup(`s${i}`, { userGroupId: `st-${i}`, name: `Stop ${i}` });
    for (const i of [1, 2, 3]) await waitInSync(env, `s${i}`, `st-${i}`);
    expect(b.logs.some(msgIs('became leader'))).toBe(false);

    const stoppedAt = Date.now();
    process.kill(a.pid, 'SIGSTOP');
    const took = await waitLog(b, 'became leader', msgIs('became leader'), LEASE_MS + 20_000);
    console.log(`[leader election] takeover from a SIGSTOPped leader: ${took.at - stoppedAt} ms`);
    expect((await readLease(env, 'ug-test'))?.holder).toBe(b.identity());

    // A rotation while the old leader is still frozen: the new leader does it.
    await env.requestRotation('s1', 'r1');
    await waitRotationHandled(env, 's1', 'st-1', 'r1');
    expect(rotationsOf(env, 'st-1')).toBe(1);

    const aLinesBefore = a.logs.length;
    const contAt = Date.now();
    process.kill(a.pid, 'SIGCONT');
    const stopLine = await waitLog(a, 'stopping work', msgMatches(/stopping work/), 10_000, aLinesBefore);
    console.log(`[leader election] resumed old leader logged "${String(stopLine.json?.['msg'])}" ${stopLine.at - contAt} ms after SIGCONT`);
    expect(String(stopLine.json?.['msg'])).toMatch(/lease not renewed|could not renew/);
    await waitLog(a, 'workers stopped', msgIs('workers stopped'), 10_000, aLinesBefore);

    // More work for the new leader only.
    await env.requestRotation('s1', 'r2');
    await env.requestRotation('s2', 'r1');
    await env.patchUserGroup('s3', { spec: { name: 'Stop 3 renamed' } });
    await waitRotationHandled(env, 's1', 'st-1', 'r2');
    await waitRotationHandled(env, 's2', 'st-2', 'r1');
    await eventually('the rename to reach the service', async () => (env.simGroup('st-3')?.name === 'Stop 3 renamed' ? true : undefined));
    await waitInSync(env, 's3', 'st-3');
    await sleep(4_000);
    expect(rotationsOf(env, 'st-1')).toBe(2);
    expect(rotationsOf(env, 'st-2')).toBe(1);
    expect(totalCalls(env, 'rotate')).toBe(3);
    // 3 creates + 1 rename; nobody PUT anything twice.
    expect(env.calls().upsert.created).toBe(3);
    expect(env.calls().upsert.updated).toBe(1);
    expect(totalCalls(env, 'upsert')).toBe(4);

    // The old leader did nothing after it woke up, and it did not take the Lease back.
    const after = a.logs.slice(aLinesBefore);
    expect(after.filter((l) => SERVICE_CALL_MSGS.has(String(l.json?.['msg'])) || l.json?.['reconcileId'] !== undefined)).toEqual([]);
    expect(after.some(msgIs('became leader'))).toBe(false);
    expect((await readLease(env, 'ug-test'))?.holder).toBe(b.identity());
    expect(a.exited()).toBe(false);
  });
});

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
  afterAll(async () => env?.close());

  it('exposes the expected series, parsed as Prometheus text, with sensible values', async () => {
    expect(op.metricsPort).toBeGreaterThan(0);
    for (const i of [1, 2, 3]) await env.createUserGroup(`m${i}`, { userGroupId: `met-${i}`, name: `Metrics ${i}` });
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

    const s = await eventually('a quiet scrape (queue drained, counters consistent)', async () => {
      const s = await scrape(op.metricsPort ?? 0);
      const reconciles = s.sum('usergroup_reconcile_total');
      const worked = s.value('workqueue_work_duration_seconds_count', { name: 'usergroup' }) ?? -1;
      const synced = s.value('usergroup_usergroups', { ready: 'True', reason: 'Synced' });
      return s.value('workqueue_depth', { name: 'usergroup' }) === 0 && worked === reconciles && synced === 3 ? s : undefined;
    }, 30_000, 500);
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
    expect(s.type('workqueue_retries_total')).toBe('counter');
    expect(s.value('workqueue_retries_total', { name: 'usergroup' })).toBeGreaterThanOrEqual(1);
    const waited = s.histogram('workqueue_queue_duration_seconds', { name: 'usergroup' });
    const worked = s.histogram('workqueue_work_duration_seconds', { name: 'usergroup' });
    expect(waited.count).toBeGreaterThanOrEqual(worked.count);
    expect(worked.count).toBe(s.sum('usergroup_reconcile_total'));
    expect(worked.sum).toBeGreaterThan(0);

    // Service requests by operation and code, matching what the simulator counted.
    const puts = env.calls().upsert.created + env.calls().upsert.updated;
    expect(puts).toBe(4);
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
    expect(s.value('usergroup_tokens_rotated_total')).toBe(1);

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
    for (const name of ['process_cpu_user_seconds_total', 'process_cpu_system_seconds_total', 'process_start_time_seconds', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes']) {
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
    let startError: unknown;
    const starting = env.startOperator({ kc, args: ['--metrics-addr', '0', '--health-addr', `127.0.0.1:${healthPort}`] }).then(
      (s) => { started = s; },
      (err: unknown) => { startError = err; },
    );
    try {
      const notReady = await eventually('the health server to answer', async () => {
        if (startError) throw startError;
        return httpGet(healthPort ?? 0, '/readyz').catch(() => undefined);
      }, 20_000, 100);
      expect(notReady.status).toBe(503);
      expect(notReady.body).toMatch(/caches not synced/);
      expect((await httpGet(healthPort ?? 0, '/healthz')).status).toBe(200);
      await sleep(1_500);
      expect(started).toBeUndefined();
      expect((await httpGet(healthPort ?? 0, '/readyz')).status).toBe(503);
      expect(proxy.accepted).toBeGreaterThan(0); // it really tried (and was refused)

      const openedAt = Date.now();
      proxy.refuseNew(false);
      await eventually('/readyz 200 once the apiserver is reachable', async () => ((await httpGet(healthPort ?? 0, '/readyz')).status === 200 ? true : undefined), 60_000, 100);
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
    await eventually('the first to lead', async () => (first.operator?.elector?.isLeader ? true : undefined), 20_000, 100);
    const second = await env.startOperator({ args });
    const p1 = first.operator;
    const p2 = second.operator;
    if (!p1 || !p2) throw new Error('in-process handles expected');
    await sleep(3 * RETRY_MS);
    expect(p2.elector?.isLeader).toBe(false);
    expect((await httpGet(p2.healthPort ?? 0, '/readyz')).status).toBe(200);
    expect((await httpGet(p2.healthPort ?? 0, '/healthz')).status).toBe(200);
    expect((await scrape(p2.metricsPort ?? 0)).value('usergroup_leader')).toBe(0);
    expect((await scrape(p1.metricsPort ?? 0)).value('usergroup_leader')).toBe(1);
    expect((await httpGet(p1.healthPort ?? 0, '/readyz')).status).toBe(200);
    await second.stop();
    await first.stop();
  });
});

describe('graceful shutdown on SIGTERM under load', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('shutdown', { faults: { latencyMs: 150, latencyJitterMs: 150 } });
  });
  afterAll(async () => {
    await killAllControllers();
    await env?.close();
  });

  it('exits 0 within the grace period, releases the Lease, leaves no half-written Secret; a new controller converges', async () => {
    const N = 50;
    const graceMs = 15_000;
    const c = env.spawnController([...LEADER_ARGS(env, 'ug-shutdown'), '--shutdown-grace-period', '15s', '--concurrency', '4']);
    await waitLog(c, 'workers started', msgIs('workers started'));
    const names = Array.from({ length: N }, (_, i) => `load-${String(i).padStart(2, '0')}`);
    const idOf = (name: string): string => `sd-${name}`;
    // Create the load in the background, in small batches.
    const creating = (async () => {
      for (let i = 0; i < N; i += 5) {
        await Promise.all(names.slice(i, i + 5).map((n) => env.createUserGroup(n, { userGroupId: idOf(n), name: n })));
        await sleep(50);
      }
    })();
    await eventually('some groups synced (mid-way)', async () => (env.calls().upsert.created >= 10 ? true : undefined), 60_000, 50);
    const termAt = Date.now();
    const createdAtTerm = env.calls().upsert.created;
    c.child.kill('SIGTERM');
    const exit = await Promise.race([c.exit, sleep(graceMs + 15_000).then(() => undefined)]);
    await creating;
    if (!exit) {
      console.log(`[shutdown] the process had not exited ${graceMs + 15_000} ms after SIGTERM; last lines:\n${c.logs.slice(-15).map((l) => l.text).join('\n')}`);
    }
    expect(exit, 'the process exits after SIGTERM').toBeDefined();
    const exitMs = (exit?.at ?? 0) - termAt;
    console.log(`[shutdown] SIGTERM with ${createdAtTerm}/${N} groups created at the service -> exit code ${exit?.code} signal ${exit?.signal} after ${exitMs} ms (grace period ${graceMs} ms)`);
    expect(exit?.signal).toBeNull();
    expect(exit?.code).toBe(0);
    expect(exitMs).toBeLessThan(graceMs);
    expect(c.logs.some(msgIs('shutting down'))).toBe(true);
    expect(c.logs.some(msgIs('released the lease'))).toBe(true);
    expect(c.logs.some(msgIs('stopped'))).toBe(true);
    expect(c.logs.some(msgMatches(/still running after the grace period/))).toBe(false);

    // The Lease is released.
    expect((await readLease(env, 'ug-shutdown'))?.holder).toBe('');

    // Right after the exit: every Secret holds its group's current token, and every group the service
    // knows has its Secret and a Synced status (in-flight reconciles were finished, not cut).
    const atExit = env.sim.groups(env.apiKey);
    expect(atExit.length).toBeGreaterThanOrEqual(createdAtTerm);
    expect(atExit.length).toBeLessThan(N);
    const secrets = (await env.core.listNamespacedSecret({ namespace: env.namespace, labelSelector: 'app.kubernetes.io/managed-by=usergroup-operator' })).items;
    for (const secret of secrets) {
      const name = secret.metadata?.name ?? '';
      const token = Buffer.from(secret.data?.['token'] ?? '', 'base64').toString('utf8');
      expect(sha256(token), `Secret ${name}`).toBe(env.simGroup(idOf(name))?.tokenSha256);
    }
    for (const g of atExit) {
      const name = g.userGroupId.replace(/^sd-/, '');
      expect(secrets.some((s) => s.metadata?.name === name), `Secret of ${name} (created at the service before the exit)`).toBe(true);
      const ready = (await env.getUserGroup(name)).status?.conditions?.find((cond) => cond.type === 'Ready');
      expect(ready?.reason, `status of ${name}`).toBe('Synced');
    }

    // A new controller converges everything, without calling the service again for the finished ones.
    const upsertsBefore = totalCalls(env, 'upsert');
    const next = env.spawnController([...LEADER_ARGS(env, 'ug-shutdown')]);
    const tookOverAt = await waitLog(next, 'became leader', msgIs('became leader'));
    console.log(`[shutdown] the next controller led ${tookOverAt.at - (exit?.at ?? 0)} ms after the exit (released Lease: no wait for expiry)`);
    expect(tookOverAt.at - (exit?.at ?? 0)).toBeLessThan(LEASE_MS);
    for (const n of names) await waitInSync(env, n, idOf(n), 120_000);
    expect(env.calls().upsert.created).toBe(N);
    expect(totalCalls(env, 'upsert') - upsertsBefore).toBe(N - atExit.length);
    expect(env.calls().upsert.updated).toBe(0);
    await signalAndWait(next, 'SIGTERM');
  });
});

describe('logs', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('logs');
  });
  afterAll(async () => {
    await killAllControllers();
    await env?.close();
  });

  it('one JSON line per step with the UserGroup key and a reconcile id; nothing secret in them', async () => {
    const c = env.spawnController([]);
    await waitLog(c, 'workers started', msgIs('workers started'));
    await env.createUserGroup('log-a', { userGroupId: 'logs-a', name: 'Logs A' });
    const first = await waitInSync(env, 'log-a', 'logs-a');
    await env.patchUserGroup('log-a', { spec: { name: 'Logs A renamed' } });
    await eventually('rename at the service', async () => (env.simGroup('logs-a')?.name === 'Logs A renamed' ? true : undefined));
    await env.requestRotation('log-a', 'logs-1');
    const second = await waitRotationHandled(env, 'log-a', 'logs-a', 'logs-1');
    await env.createUserGroup('log-b', { userGroupId: 'logs-b', name: 'Logs B', serviceRef: { name: 'missing' } });
    await env.waitForReady('log-b', 'ConnectionNotFound', 'False');
    await sleep(500);

    expect(c.logs.length).toBeGreaterThan(5);
    for (const line of c.logs) {
      expect(line.json, `not JSON: ${line.text}`).toBeDefined();
      expect(typeof line.json?.['level']).toBe('string');
      expect(typeof line.json?.['msg']).toBe('string');
      expect(Number.isNaN(Date.parse(String(line.json?.['time'])))).toBe(false);
    }
    const key = `${env.namespace}/log-a`;
    const synced = c.logs.filter((l) => l.json?.['msg'] === 'user group synced' && l.json['usergroup'] === key);
    const rotated = c.logs.filter((l) => l.json?.['msg'] === 'token rotated' && l.json['usergroup'] === key);
    expect(synced).toHaveLength(2); // create, rename
    expect(rotated).toHaveLength(1);
    const ids = [...synced, ...rotated].map((l) => l.json?.['reconcileId']);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}$/);
    expect(new Set(ids).size).toBe(3); // one reconcile id per reconcile
    expect(synced[0]?.json?.['created']).toBe(true);
    expect(synced[1]?.json?.['created']).toBe(false);
    // Every line that has a reconcile id names the UserGroup, and an id never spans two UserGroups.
    const owners = new Map<string, string>();
    for (const l of c.logs.filter((x) => x.json?.['reconcileId'] !== undefined)) {
      const id = String(l.json?.['reconcileId']);
      const ug = String(l.json?.['usergroup']);
      expect(ug).toMatch(new RegExp(`^${env.namespace}/`));
      if (owners.has(id)) expect(owners.get(id)).toBe(ug);
      owners.set(id, ug);
    }
    const blocked = c.logs.find((l) => l.json?.['usergroup'] === `${env.namespace}/log-b` && l.json['reason'] === 'ConnectionNotFound');
    expect(blocked?.json?.['reconcileId']).toMatch(/^[0-9a-f]{8}$/);
    // Nothing secret in any line.
    const all = [...c.logs.map((l) => l.text), ...c.stderr].join('\n');
    for (const secret of [first.token, second, env.apiKey]) expect(all.includes(secret)).toBe(false);
  });

  it('--log-level warn prints warnings only', async () => {
    env.sim.setFaults({ errorRate: 1 });
    const c = env.spawnController(['--log-level', 'warn']);
    try {
      await env.createUserGroup('log-warn', { userGroupId: 'logs-warn', name: 'Warn' });
      await env.waitForReady('log-warn', 'ServiceUnavailable', 'False');
      await waitLog(c, 'service call failed', msgIs('service call failed'));
      env.sim.setFaults({});
      await waitInSync(env, 'log-warn', 'logs-warn');
      await sleep(500);
    } finally {
      env.sim.setFaults({});
    }
    expect(c.logs.length).toBeGreaterThan(0);
    for (const line of c.logs) expect(['warn', 'error', 'fatal'], line.text).toContain(line.json?.['level']);
    expect(c.logs.some(msgIs('user group synced'))).toBe(false);
    expect(c.logs.some(msgIs('caches synced'))).toBe(false);
    await signalAndWait(c, 'SIGTERM');
  });
});

describe('configuration errors and --help', () => {
  const cli = (args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [MAIN, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => { stdout += c.toString('utf8'); });
      child.stderr.on('data', (c: Buffer) => { stderr += c.toString('utf8'); });
      child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });

  it('rejects bad values and unknown flags with a clear message and a non-zero exit', async () => {
    const cases: { args: string[]; env?: Record<string, string>; message: RegExp }[] = [
      { args: ['run', '--concurrency', '0'], message: /--concurrency: must be at least 1, got 0/ },
      { args: ['run', '--lease-duration', '15 seconds'], message: /--lease-duration: "15 seconds" is not a duration/ },
      { args: ['run', '--resync-period', '10x'], message: /--resync-period: "10x" is not a duration/ },
      { args: ['run', '--no-such-flag'], message: /unknown flag --no-such-flag/ },
      { args: ['run'], env: { USERGROUP_CONCURRENCY: 'many' }, message: /USERGROUP_CONCURRENCY: "many" is not a whole number/ },
      { args: ['run', '--lease-duration', '5s', '--renew-deadline', '10s'], message: /--renew-deadline must be shorter than --lease-duration/ },
      { args: ['run', '--log-level', 'loud'], message: /--log-level: "loud" is not one of/ },
      { args: ['run', '--metrics-addr', 'localhost'], message: /--metrics-addr: "localhost" is not an address/ },
      { args: ['run', '--api-key', 'x'], message: /--api-key is not accepted/ },
    ];
    for (const c of cases) {
      const res = await cli(c.args, c.env);
      expect(res.code, `${c.args.join(' ')}: ${res.stderr}`).not.toBe(0);
      expect(res.stderr, c.args.join(' ')).toMatch(/invalid configuration/);
      expect(res.stderr, c.args.join(' ')).toMatch(c.message);
      expect(res.stdout, c.args.join(' ')).toBe('');
    }
    // Several problems are reported together.
    const both = await cli(['run', '--concurrency', '0', '--retry-period', 'soon']);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/--concurrency/);
    expect(both.stderr).toMatch(/--retry-period/);
  });

  it('run --help lists every flag with its env var and default, and exits 0', async () => {
    const res = await cli(['run', '--help']);
    expect(res.code).toBe(0);
    expect(res.stderr).toBe('');
    const text = res.stdout;
    for (const spec of Object.values(FLAGS)) {
      const start = text.indexOf(`\n  --${spec.flag} `, text.indexOf('\nflags:\n'));
      expect(start, `--${spec.flag} listed`).toBeGreaterThanOrEqual(0);
      // The entry runs to the next flag; it names the env var and the default.
      const next = text.indexOf('\n  --', start + 1);
      const entry = text.slice(start, next < 0 ? undefined : next);
      expect(entry, `--${spec.flag}`).toContain(`env ${spec.env}`);
      if (spec.def !== undefined && spec.def !== '') expect(entry, `--${spec.flag}`).toContain(`(default ${spec.def})`);
    }
    // Spot checks that do not come from the flag table.
    for (const [flag, env, def] of [
      ['concurrency', 'USERGROUP_CONCURRENCY', '4'],
      ['lease-duration', 'USERGROUP_LEASE_DURATION', '15s'],
      ['renew-deadline', 'USERGROUP_RENEW_DEADLINE', '10s'],
      ['retry-period', 'USERGROUP_RETRY_PERIOD', '2s'],
      ['metrics-addr', 'USERGROUP_METRICS_ADDR', ':8080'],
      ['health-addr', 'USERGROUP_HEALTH_ADDR', ':8081'],
      ['log-level', 'USERGROUP_LOG_LEVEL', 'info'],
      ['resync-period', 'USERGROUP_RESYNC_PERIOD', '10h'],
    ] as const) {
      expect(text).toMatch(new RegExp(`--${flag} [^\\n]*\\(default ${def.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)\\n\\s+env ${env}`));
    }
    for (const flag of ['--leader-elect', '--leader-election-namespace', '--leader-election-id', '--namespaces', '--default-service', '--watch-inactivity-timeout', '--shutdown-grace-period', '--service-qps', '--service-burst', '--kubeconfig']) {
      expect(text).toContain(flag);
    }
    expect((await cli(['run', '-h'])).code).toBe(0);
  });
});

