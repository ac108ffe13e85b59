import { describe, expect, it } from 'vitest';
import { openRequests, operatorRequests, storedObjects } from '../../devtools/bench/apiserver-requests.js';
import { controllerFlags, parsePrometheus } from '../../devtools/bench/controller.js';
import {
  DEFAULTS,
  etcdQuotaBytes,
  parseBenchOptions,
  SCALE_ETCD_QUOTA_GIB,
  SCALE_SHARDED_NAMESPACES,
  scaleNamespaceCount,
  scaleTimeoutMs,
  type BenchOptions,
} from '../../devtools/bench/options.js';
import { combined, kubeByVerbAndResource } from '../../devtools/bench/phases/scale-sharded.js';
import type { ColdResult, ControllerFigures } from '../../devtools/bench/report.js';
import {
  controllerPeak,
  evaluateScaleTargets,
  leaseRequests,
  nonWatch,
  pollingRequests,
  renderScaleMarkdown,
  scaleCommand,
  shardPeaks,
  type ScaleReport,
  type ScaleResult,
  type ShardedScale,
  type ShardFigures,
} from '../../devtools/bench/scale-report.js';
import { groupsIn, placeOf, rotationTargets } from '../../devtools/bench/spread.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

const figures = (over: Partial<ControllerFigures> = {}): ControllerFigures => ({
  peakRssBytes: 300 * MiB,
  cpuSeconds: 600,
  kubeRequests: { PATCH: 100_000, POST: 200_000 },
  reconciles: { requeue: 100_000 },
  ...over,
});

const cold = (over: Partial<ColdResult> = {}): ColdResult => ({
  n: 100_000,
  namespace: 'bench-cold-100000-abc',
  ok: true,
  convergeMs: 800_000,
  applyMs: 500_000,
  ready: 100_000,
  secrets: 100_000,
  verified: 100_000,
  serviceCalls: 100_000,
  controller: figures(),
  ...over,
});

/** A 100,000 run that meets every target: 800 s cold, 0 calls on restart and in steady, peak 350 MiB, p99 1.5 s. */
function scale(over: Partial<ScaleResult> = {}): ScaleResult {
  return {
    n: 100_000,
    ok: true,
    steadyMinutes: 3,
    timeoutMs: 6_000_000,
    etcdQuotaBytes: 8 * GiB,
    cold: cold(),
    restart: {
      result: {
        n: 100_000,
        ok: true,
        cachesSyncedMs: 20_000,
        reobservedMs: 45_000,
        serviceCalls: 0,
        controller: figures({ kubeRequests: { LIST: 400, WATCH: 4 } }),
      },
      apiserverRequests: { 'LIST usergroups': 200, 'LIST secrets': 200 },
      openedWatches: { 'WATCH usergroups': 1, 'WATCH secrets': 1 },
    },
    steady: {
      result: {
        n: 100_000,
        ok: true,
        minutes: 3,
        serviceCalls: 0,
        serviceCallsPerMin: 0,
        kubeRequestsPerMin: 0,
        kubeNonWatchPerMin: 0,
        controller: figures({ kubeRequests: {}, cpuSeconds: 1.5 }),
      },
      apiserverRequests: { 'WATCH secrets': 1 },
      openedWatches: {},
      rssSamples: [
        [5, 320 * MiB],
        [10, 310 * MiB],
        [15, 330 * MiB],
      ],
    },
    rotation: { n: 100_000, ok: true, requested: 100, completed: 100, p50Ms: 900, p99Ms: 1500, maxMs: 1600, serviceRotations: 100 },
    controllers: [
      { process: 'controller, cold convergence', peakRssBytes: 350 * MiB, rssBytes: 300 * MiB },
      { process: 'controller, restarted (restart, steady, rotation)', peakRssBytes: 340 * MiB, rssBytes: 320 * MiB },
    ],
    processes: [
      { process: 'kube-apiserver', peakRssBytes: 3 * GiB, rssBytes: 2.5 * GiB, cpuSeconds: 1234.5 },
      { process: 'etcd', peakRssBytes: 2 * GiB, rssBytes: 1.8 * GiB },
    ],
    etcdDb: { dbSizeBytes: 2.5 * GiB, inUseBytes: 1.5 * GiB },
    storedObjects: { usergroups: 100_000, secrets: 100_001, usergroupclaims: 100_000 },
    ...over,
  };
}

/** A result that ended after the cold step: no restart, steady or rotation figures. */
function coldOnly(r: ScaleResult): ScaleResult {
  const copy = { ...r };
  delete copy.restart;
  delete copy.steady;
  delete copy.rotation;
  return copy;
}

function report(r: ScaleResult = scale(), over: Partial<ScaleReport> = {}): ScaleReport {
  return {
    startedAt: '2026-12-01T00:00:00.000Z',
    finishedAt: '2026-12-01T01:00:00.000Z',
    environment: {
      node: 'v26.1.0',
      cpus: 2,
      memoryBytes: 24 * GiB,
      kubernetes: 'v1.37.2',
      etcd: 'v3.7.3',
      loadAverageStart: [0.1, 0.2, 0.3],
      loadAverageEnd: [2, 2, 2],
    },
    options: { latencyMs: 20, concurrency: 16, serviceQps: 10000, applyParallelism: 16, rotations: 100 },
    controllerFlags: ['--concurrency', '16'],
    controllerNodeFlags: ['--max-semi-space-size=1'],
    controllerEnv: { NODE_ENV: 'production' },
    command: 'npm run bench -- --phases scale --scale-n 100000',
    scale: r,
    ...over,
  };
}

const options = (argv: string[]): BenchOptions => {
  const parsed = parseBenchOptions(argv);
  if (parsed.ok !== true) throw new Error(`not parsed: ${JSON.stringify(parsed)}`);
  return parsed.options;
};

describe('scale phase options', () => {
  it('is not among the default phases, and runs when asked for', () => {
    expect(options([]).phases).not.toContain('scale');
    expect(options([]).phases).toContain('peer');
    expect(options(['--quick']).phases).not.toContain('scale');
    const o = options(['--phases', 'scale', '--scale-n', '2000', '--scale-steady-minutes', '0.5', '--etcd-quota-gib', '4']);
    expect([o.phases, o.scaleN, o.scaleSteadyMinutes, o.etcdQuotaGiB]).toEqual([['scale'], 2000, 0.5, 4]);
    expect([DEFAULTS.scaleN, DEFAULTS.scaleSteadyMinutes, DEFAULTS.etcdQuotaGiB]).toEqual([100_000, 3, undefined]);
  });

  it('refuses bad values', () => {
    for (const argv of [
      ['--scale-n', '0'],
      ['--scale-n', '1.5'],
      ['--scale-steady-minutes', '-1'],
      ['--etcd-quota-gib', '0'],
      ['--etcd-quota-gib', 'x'],
    ])
      expect(parseBenchOptions(argv), argv.join(' ')).toMatchObject({ ok: false });
  });

  it('raises etcd quota with the scale phase only, unless given', () => {
    expect(etcdQuotaBytes(options([]))).toBeUndefined();
    expect(etcdQuotaBytes(options(['--phases', 'scale']))).toBe(SCALE_ETCD_QUOTA_GIB * GiB);
    expect(etcdQuotaBytes(options(['--phases', 'cold,scale', '--etcd-quota-gib', '12']))).toBe(12 * GiB);
    expect(etcdQuotaBytes(options(['--phases', 'cold', '--etcd-quota-gib', '0.5']))).toBe(0.5 * GiB);
  });

  it('gives each scale step a timeout that grows with N, never below --phase-timeout-s', () => {
    expect(scaleTimeoutMs(options(['--phases', 'scale']))).toBe(6_000_000);
    expect(scaleTimeoutMs(options(['--phases', 'scale', '--scale-n', '2000']))).toBe(1_800_000);
    expect(scaleTimeoutMs(options(['--phases', 'scale', '--phase-timeout-s', '9000']))).toBe(9_000_000);
  });

  it('writes the command that runs it again, with what differs from the defaults', () => {
    expect(scaleCommand(options(['--phases', 'scale']), DEFAULTS)).toBe(
      'npm run bench -- --phases scale --scale-n 100000 --scale-steady-minutes 3 --rotations 100 --latency-ms 20 --concurrency 16 --apply-parallelism 16',
    );
    expect(scaleCommand(options(['--phases', 'scale', '--scale-n', '2000', '--etcd-quota-gib', '4', '--out', '/tmp/x']), DEFAULTS)).toBe(
      'npm run bench -- --phases scale --scale-n 2000 --scale-steady-minutes 3 --rotations 100 --latency-ms 20 --concurrency 16 --apply-parallelism 16 --etcd-quota-gib 4 --out /tmp/x',
    );
  });
});

describe('scale targets', () => {
  const statuses = (r: ScaleResult, latencyMs = 20): string[] => evaluateScaleTargets(r, latencyMs).map((v) => v.status);

  it('meets every target with the figures of a good run', () => {
    const verdicts = evaluateScaleTargets(scale(), 20);
    expect(verdicts.map((v) => v.status)).toEqual(['met', 'met', 'met', 'met', 'met', 'met']);
    expect(verdicts[0]?.figure).toBe("all 100,000 Ready with their Secrets in 800.0 s (125 groups/s); 100,000 Secrets hold the service's token");
    expect(verdicts[1]?.figure).toBe('0 service calls; caches synced in 20.0 s, all re-observed in 45.0 s');
    expect(verdicts[3]?.figure).toContain('controller: 0 requests besides 0 watch opens; apiserver');
    expect(verdicts[3]?.figure).toContain('WATCH secrets 1 in 3.0 min');
    expect(verdicts[4]?.figure).toContain('350 MiB (controller, cold convergence 350 MiB, controller, restarted');
    expect(verdicts[5]?.figure).toBe('p99 1.50 s, p50 0.90 s, max 1.60 s over 100 rotations requested at once');
  });

  it('misses each target on its own figure', () => {
    const base = scale();
    const restart = base.restart;
    const steady = base.steady;
    if (!restart || !steady) throw new Error('fixture');
    expect(statuses(scale({ restart: { ...restart, result: { ...restart.result, serviceCalls: 3 } } }))[1]).toBe('missed');
    expect(statuses(scale({ steady: { ...steady, result: { ...steady.result, serviceCalls: 1 } } }))[2]).toBe('missed');
    // Polling seen by the apiserver only (e.g. a LIST every minute), or by the controller only.
    expect(statuses(scale({ steady: { ...steady, apiserverRequests: { 'LIST secrets': 3, 'WATCH secrets': 1 } } }))[3]).toBe('missed');
    expect(statuses(scale({ steady: { ...steady, result: { ...steady.result, controller: figures({ kubeRequests: { GET: 2, WATCH: 1 } }) } } }))[3]).toBe(
      'missed',
    );
    expect(statuses(scale({ controllers: [{ process: 'controller, cold convergence', peakRssBytes: 401 * MiB, rssBytes: 300 * MiB }] }))[4]).toBe('missed');
    const rotation = base.rotation;
    if (!rotation) throw new Error('fixture');
    expect(statuses(scale({ rotation: { ...rotation, p99Ms: 2001 } }))[5]).toBe('missed');
  });

  it('fails what failed and leaves the steps after a failed convergence not run', () => {
    const r = scale({
      ok: false,
      error: 'cold convergence failed: timed out',
      cold: cold({ ok: false, error: 'timed out', ready: 42_000, secrets: 41_000 }),
      controllers: [{ process: 'controller, cold convergence', peakRssBytes: 380 * MiB, rssBytes: 370 * MiB }],
    });
    const withoutSteps = coldOnly(r);
    const verdicts = evaluateScaleTargets(withoutSteps, 20);
    expect(verdicts.map((v) => v.status)).toEqual(['failed', 'not run', 'not run', 'not run', 'met', 'not run']);
    expect(verdicts[0]?.figure).toContain('(42,000 Ready, 41,000 Secrets)');
    expect(evaluateScaleTargets({ ...withoutSteps, cold: undefined, controllers: [] }, 20)[0]?.status).toBe('failed');
  });

  it('notes a run at another N than the target and another service latency', () => {
    const small = scale({ n: 2000, cold: cold({ n: 2000, convergeMs: 20_000, verified: 2000 }) });
    const verdicts = evaluateScaleTargets(small, 5);
    expect(verdicts[0]?.figure).toBe(
      "all 2,000 Ready with their Secrets in 20.0 s (100 groups/s); 2,000 Secrets hold the service's token (at N=2,000; the target is for 100,000)",
    );
    expect(verdicts[5]?.figure).toContain("at 5 ms service latency (the target's is 20 ms) (at N=2,000");
  });

  it('counts requests besides watches, and the peak of the controllers', () => {
    expect(nonWatch({ WATCH: 3, GET: 2, LIST: 1 })).toBe(3);
    expect(nonWatch({ 'WATCH secrets': 3, 'LIST usergroups': 2, 'GET secrets': 1 })).toBe(3);
    expect(nonWatch({})).toBe(0);
    expect(controllerPeak(scale())).toBe(350 * MiB);
    expect(controllerPeak(scale({ controllers: [] }))).toBeUndefined();
  });
});

describe('scale.md', () => {
  it('has the machine, the targets with their status, the figures and the command', () => {
    const md = renderScaleMarkdown(report());
    expect(md).toContain('# Scale: 100,000 UserGroups on one replica');
    expect(md).toContain('Machine: 2 CPUs, 24.00 GiB RAM; Node v26.1.0; Kubernetes v1.37.2 (etcd v3.7.3, quota 8.00 GiB)');
    expect(md).toContain('`NODE_ENV=production node --max-semi-space-size=1 dist/cli/main.js run --concurrency 16`');
    expect(md).toMatch(/\| 100,000 UserGroups converge on one replica \| all 100,000 Ready .* \| met \|/);
    expect(md).toMatch(/\| controller peak RSS ≤ 400 MiB over the whole run \| 350 MiB .* \| met \|/);
    expect(md).toContain('| 100,000 | 800.0 s | 125 | 500.0 s | 100,000 | 100,000 | 600.0 s | 300 MiB | – / – | PATCH 100,000, POST 200,000 | – |');
    expect(md).toContain(
      '| 20.0 s | 45.0 s | 0 | requeue 100,000 | LIST 400, WATCH 4 | LIST secrets 200, LIST usergroups 200 (400) | WATCH secrets 1, WATCH usergroups 1 |',
    );
    expect(md).toContain('| 3.0 | 0 | 0 | WATCH secrets 1 | 0 | 1.50 s | 320 MiB / 310 MiB / 330 MiB / 330 MiB | ok |');
    expect(md).toContain('| 100 | 100 | 0.90 s | 1.50 s | 1.60 s | 100 | ok |');
    expect(md).toContain('| kube-apiserver | 3072 MiB | 2560 MiB | 1234.5 s |');
    expect(md).toContain('| etcd | 2048 MiB | 1843 MiB | – |');
    expect(md).toContain('At the end: etcd database 2.50 GiB (1.50 GiB in use); objects stored: secrets 100,001, usergroupclaims 100,000, usergroups 100,000.');
    expect(md).toContain('Reproduce: `npm run bench -- --phases scale --scale-n 100000`');
  });

  it('shows a failed run as such', () => {
    const failed = coldOnly(scale({ ok: false, error: 'cold convergence failed: timed out', cold: cold({ ok: false, error: 'timed out' }) }));
    const md = renderScaleMarkdown(report(failed));
    expect(md).toContain('**The phase stopped early:** cold convergence failed: timed out');
    expect(md).toMatch(/\| 100,000 UserGroups converge on one replica \| failed after .* \| \*\*failed\*\* \|/);
    expect(md).toMatch(/\| steady state: 0 service calls \| – \| \*\*not run\*\* \|/);
    expect(md).not.toContain('Restart: the controller stopped');
  });
});

describe('apiserver counts for the scale phase', () => {
  const metrics = parsePrometheus(
    [
      'apiserver_request_total{code="200",component="apiserver",group="usergroup.dev",resource="usergroups",scope="namespace",subresource="",verb="LIST",version="v1"} 4',
      'apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 9',
      'apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="cluster",subresource="",verb="WATCH",version="v1"} 2',
      'apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 5',
      'apiserver_resource_objects{group="",resource="secrets"} 100001',
      'apiserver_resource_objects{group="",resource="configmaps"} 3',
      'apiserver_resource_objects{group="usergroup.dev",resource="usergroups"} 100000',
      'apiserver_resource_objects{group="usergroup.dev",resource="usergroupservices"} 0',
    ].join('\n'),
  );

  it('reads requests, open watches and stored objects of the operator resources only', () => {
    expect(operatorRequests(metrics)).toEqual({ 'LIST usergroups': 4 });
    expect(openRequests(metrics)).toEqual({ 'WATCH secrets': 2 });
    expect(storedObjects(metrics)).toEqual({ secrets: 100_001, usergroups: 100_000 });
  });

  it('reads the older apiserver_storage_objects when apiserver_resource_objects is not there', () => {
    const older = parsePrometheus(
      [
        'apiserver_storage_objects{resource="usergroups.usergroup.dev"} 7',
        'apiserver_storage_objects{resource="secrets"} 8',
        'apiserver_storage_objects{resource="pods"} 9',
      ].join('\n'),
    );
    expect(storedObjects(older)).toEqual({ usergroups: 7, secrets: 8 });
  });
});

describe('sharded scale options', () => {
  it('runs one replica in one namespace unless asked, and 100 namespaces with several replicas', () => {
    const plain = options(['--phases', 'scale']);
    expect([plain.scaleShards, plain.scaleNamespaces, scaleNamespaceCount(plain)]).toEqual([1, undefined, 1]);
    const sharded = options(['--phases', 'scale', '--scale-shards', '3']);
    expect([sharded.scaleShards, scaleNamespaceCount(sharded)]).toEqual([3, SCALE_SHARDED_NAMESPACES]);
    const given = options(['--phases', 'scale', '--scale-n', '2000', '--scale-shards', '2', '--scale-namespaces', '20']);
    expect([given.scaleShards, scaleNamespaceCount(given)]).toEqual([2, 20]);
    // One replica over several namespaces (a cluster-wide watch, no sharding).
    expect(scaleNamespaceCount(options(['--scale-namespaces', '7']))).toBe(7);
  });

  it('refuses bad values, and more namespaces than UserGroups', () => {
    for (const argv of [
      ['--scale-shards', '0'],
      ['--scale-shards', '1.5'],
      ['--scale-namespaces', '0'],
      ['--scale-namespaces', 'x'],
      ['--scale-n', '50', '--scale-namespaces', '51'],
      ['--scale-n', '50', '--scale-shards', '2'],
    ])
      expect(parseBenchOptions(argv), argv.join(' ')).toMatchObject({ ok: false });
    expect(parseBenchOptions(['--scale-n', '50', '--scale-namespaces', '50'])).toMatchObject({ ok: true });
  });

  it('puts replicas and namespaces in the command only when they are not one and one', () => {
    expect(scaleCommand(options(['--phases', 'scale', '--scale-n', '2000', '--scale-shards', '2', '--scale-namespaces', '20']), DEFAULTS)).toBe(
      'npm run bench -- --phases scale --scale-n 2000 --scale-steady-minutes 3 --rotations 100 --latency-ms 20 --concurrency 16 --apply-parallelism 16 --scale-shards 2 --scale-namespaces 20',
    );
    expect(scaleCommand(options(['--phases', 'scale', '--scale-shards', '4']), DEFAULTS)).toContain('--scale-shards 4 --scale-namespaces 100');
    expect(scaleCommand(options(['--phases', 'scale', '--scale-shards', '1']), DEFAULTS)).not.toContain('--scale-shards');
  });

  it('gives sharded replicas their Lease flags instead of --leader-elect=false', () => {
    const base = { concurrency: 16, serviceQps: 10000, logLevel: 'info', scheduledRotationsPerMinute: 6000 };
    expect(controllerFlags(base)).toContain('--leader-elect=false');
    const flags = controllerFlags({ ...base, shard: { leaseNamespace: 'bench-scale-control-abc', group: 'usergroup-bench-scale' } });
    expect(flags).not.toContain('--leader-elect=false');
    expect(flags.join(' ')).toContain('--shard-by-namespace --leader-election-namespace bench-scale-control-abc --leader-election-id usergroup-bench-scale');
  });
});

describe('the spread over namespaces', () => {
  const ns = ['a', 'b', 'c'];

  it('places group g in namespace g mod M, evenly', () => {
    expect([0, 1, 2, 3, 4].map((g) => placeOf(g, ns))).toEqual([
      { namespace: 'a', index: 0 },
      { namespace: 'b', index: 0 },
      { namespace: 'c', index: 0 },
      { namespace: 'a', index: 1 },
      { namespace: 'b', index: 1 },
    ]);
    expect([0, 1, 2].map((j) => groupsIn(10, 3, j))).toEqual([4, 3, 3]);
    // Every group of N lands on a distinct (namespace, index) within its namespace's count.
    const n = 2000;
    const m = 20;
    const names = Array.from({ length: m }, (_, j) => `ns${j}`);
    const seen = new Set(Array.from({ length: n }, (_, g) => placeOf(g, names)).map((p) => `${p.namespace}/${p.index}`));
    expect(seen.size).toBe(n);
    for (let g = 0; g < n; g++) {
      const p = placeOf(g, names);
      expect(p.index).toBeLessThan(groupsIn(n, m, names.indexOf(p.namespace)));
    }
  });

  it('picks rotation targets as the one-namespace world does, and spread over several', () => {
    // One namespace: every ⌊N / count⌋-th group, as before namespaces.
    expect(rotationTargets(100_000, ['x'], 100).map((t) => t.index)).toEqual(Array.from({ length: 100 }, (_, i) => i * 1000));
    const names = Array.from({ length: 20 }, (_, j) => `ns${j}`);
    const targets = rotationTargets(2000, names, 100);
    expect(targets).toHaveLength(100);
    expect(new Set(targets.map((t) => `${t.namespace}/${t.index}`)).size).toBe(100);
    for (const name of names) expect(targets.filter((t) => t.namespace === name)).toHaveLength(5);
    expect(targets.filter((t) => t.namespace === 'ns0').map((t) => t.index)).toEqual([0, 20, 40, 60, 80]);
    // Uneven: every target exists, none twice, never more than N.
    for (const [n, m, k] of [
      [7, 3, 7],
      [10, 4, 9],
      [5, 5, 100],
      [101, 10, 33],
    ] as const) {
      const ns2 = Array.from({ length: m }, (_, j) => `n${j}`);
      const t = rotationTargets(n, ns2, k);
      expect(t).toHaveLength(Math.min(n, k));
      expect(new Set(t.map((x) => `${x.namespace}/${x.index}`)).size).toBe(t.length);
      for (const x of t) expect(x.index).toBeLessThan(groupsIn(n, m, ns2.indexOf(x.namespace)));
    }
  });
});

const shard = (i: number, over: Partial<ShardFigures> = {}): ShardFigures => ({
  shard: i,
  peakRssBytes: 300 * MiB,
  rssBytes: 280 * MiB,
  heapUsedBytes: 210 * MiB,
  cpuSeconds: 1,
  userGroups: 50_000,
  ownedNamespaces: 52,
  members: 2,
  rebalances: 0,
  serviceCalls: 0,
  reconciles: {},
  kubeRequests: {},
  ...over,
});

/** A 100,000 run on two replicas over 100 namespaces that meets every target, Lease heartbeats in the steady window. */
function sharded(over: Partial<ScaleResult> = {}, shardingOver: Partial<ShardedScale> = {}): ScaleResult {
  return scale({
    controllers: [
      { process: 'controller, shard 1, cold convergence', peakRssBytes: 310 * MiB, rssBytes: 300 * MiB, shard: 1 },
      { process: 'controller, shard 2, cold convergence', peakRssBytes: 320 * MiB, rssBytes: 300 * MiB, shard: 2 },
      { process: 'controller, shard 1, restarted (restart, steady, rotation)', peakRssBytes: 330 * MiB, rssBytes: 300 * MiB, shard: 1 },
      { process: 'controller, shard 2, restarted (restart, steady, rotation)', peakRssBytes: 300 * MiB, rssBytes: 290 * MiB, shard: 2 },
    ],
    sharding: {
      shards: 2,
      namespaces: 100,
      leaseNamespace: 'bench-scale-control-abc',
      settledMs: 4200,
      cold: [shard(1, { userGroups: 50_400, serviceCalls: 50_400 }), shard(2, { userGroups: 49_600, serviceCalls: 49_600 })],
      restart: [shard(1), shard(2)],
      steady: [
        shard(1, { kubeRequests: { 'PUT leases': 90, 'GET leases': 0, 'WATCH usergroups': 1 } }),
        shard(2, { kubeRequests: { 'PUT leases': 90, 'LIST leases': 3 } }),
      ],
      rotation: [shard(1, { serviceCalls: 102 }), shard(2, { serviceCalls: 98 })],
      ...shardingOver,
    },
    ...over,
  });
}

describe('sharded scale targets', () => {
  it('judges the targets per shard, Lease heartbeats apart from polling', () => {
    const verdicts = evaluateScaleTargets(sharded(), 20);
    expect(verdicts.map((v) => v.target)).toEqual([
      '100,000 UserGroups converge on 2 replicas sharing 100 namespaces',
      'restart of every replica over the synced groups: 0 service calls',
      'steady state: 0 service calls',
      "steady state, shard 1: no polling (only watches; its Lease's heartbeats counted apart)",
      "steady state, shard 2: no polling (only watches; its Lease's heartbeats counted apart)",
      'steady state: no polling at the apiserver (all replicas; UserGroups, Secrets, Events, the usergroup.dev kinds)',
      'shard 1: controller peak RSS ≤ 400 MiB over the whole run',
      'shard 2: controller peak RSS ≤ 400 MiB over the whole run',
      'rotation p99 ≤ 2 s during steady state',
    ]);
    expect(verdicts.map((v) => v.status)).toEqual(['met', 'met', 'met', 'met', 'met', 'met', 'met', 'met', 'met']);
    expect(verdicts[0]?.figure).toContain("100,000 Secrets hold the service's token (held per shard: 50,400 / 49,600)");
    expect(verdicts[1]?.figure).toBe('0 service calls (per shard: 0 / 0); caches synced in 20.0 s, all re-observed in 45.0 s');
    expect(verdicts[3]?.figure).toBe('0 requests besides 1 watch opens; Lease heartbeats: PUT leases 90 (30.0/min) in 3.0 min');
    expect(verdicts[4]?.figure).toBe('0 requests besides 0 watch opens; Lease heartbeats: LIST leases 3, PUT leases 90 (31.0/min) in 3.0 min');
    expect(verdicts[6]?.figure).toBe(
      '330 MiB (controller, shard 1, cold convergence 310 MiB, controller, shard 1, restarted (restart, steady, rotation) 330 MiB)',
    );
    expect(verdicts[8]?.figure).toBe(
      'p99 1.50 s, p50 0.90 s, max 1.60 s over 100 rotations requested at once in 100 namespaces (service calls per shard: 102 / 98)',
    );
  });

  it('misses no polling on the shard that polls, and the RSS target on the shard over it', () => {
    const statuses = (r: ScaleResult): string[] => evaluateScaleTargets(r, 20).map((v) => v.status);
    const polling = sharded(
      {},
      { steady: [shard(1, { kubeRequests: { 'PUT leases': 90 } }), shard(2, { kubeRequests: { 'LIST usergroups': 1, 'PUT leases': 90 } })] },
    );
    expect(statuses(polling).slice(3, 5)).toEqual(['met', 'missed']);
    const base = sharded();
    const steady = base.steady;
    if (!steady) throw new Error('fixture');
    expect(statuses(sharded({ steady: { ...steady, apiserverRequests: { 'GET secrets': 2 } } }))[5]).toBe('missed');
    const heavy = sharded({
      controllers: [
        { process: 'controller, shard 1, cold convergence', peakRssBytes: 390 * MiB, rssBytes: 300 * MiB, shard: 1 },
        { process: 'controller, shard 2, cold convergence', peakRssBytes: 420 * MiB, rssBytes: 300 * MiB, shard: 2 },
      ],
    });
    expect(statuses(heavy).slice(6, 8)).toEqual(['met', 'missed']);
    expect(shardPeaks(heavy)).toEqual(
      new Map([
        [1, 390 * MiB],
        [2, 420 * MiB],
      ]),
    );
    const restart = base.restart;
    if (!restart) throw new Error('fixture');
    const called = sharded({ restart: { ...restart, result: { ...restart.result, serviceCalls: 4 } } }, { restart: [shard(1, { serviceCalls: 4 }), shard(2)] });
    expect(evaluateScaleTargets(called, 20)[1]).toMatchObject({
      status: 'missed',
      figure: expect.stringContaining('4 service calls (per shard: 4 / 0)') as unknown,
    });
  });

  it('leaves the steps after a failed cold start not run, for every shard', () => {
    const failed = coldOnly(
      sharded({ ok: false, cold: cold({ ok: false, error: 'a replica exited' }) }, { restart: undefined, steady: undefined, rotation: undefined }),
    );
    expect(evaluateScaleTargets(failed, 20).map((v) => v.status)).toEqual([
      'failed',
      'not run',
      'not run',
      'not run',
      'not run',
      'not run',
      'met',
      'met',
      'not run',
    ]);
  });

  it('keeps the one-replica targets for one replica over several namespaces', () => {
    const one = scale({ sharding: { shards: 1, namespaces: 20 } });
    expect(evaluateScaleTargets(one, 20).map((v) => v.target)).toEqual(evaluateScaleTargets(scale(), 20).map((v) => v.target));
  });

  it('counts Lease requests apart from polling', () => {
    expect(pollingRequests({ 'PUT leases': 90, 'GET leases': 2, 'WATCH secrets': 1 })).toBe(0);
    expect(pollingRequests({ 'PUT leases': 90, 'GET secrets': 2, LIST: 1 })).toBe(3);
    expect(leaseRequests({ 'PUT leases': 90, 'GET secrets': 2 })).toEqual({ 'PUT leases': 90 });
  });

  it('reads requests by verb and resource from the controller, and by verb alone from one without the label', () => {
    const m = parsePrometheus(
      [
        'usergroup_kube_requests_total{verb="PUT",code="200",resource="leases"} 30',
        'usergroup_kube_requests_total{verb="PUT",code="409",resource="leases"} 1',
        'usergroup_kube_requests_total{verb="WATCH",code="200",resource="usergroups"} 2',
        'usergroup_kube_requests_total{verb="GET",code="200"} 5',
      ].join('\n'),
    );
    expect(kubeByVerbAndResource(m)).toEqual({ 'PUT leases': 31, 'WATCH usergroups': 2, GET: 5 });
    // The one-replica figures still sum by verb.
    expect(m.by('usergroup_kube_requests_total', 'verb')).toEqual({ PUT: 31, WATCH: 2, GET: 5 });
  });

  it('combines the replicas as one controller: sums (RSS at the end too), and the highest peak', () => {
    const c = combined([
      shard(1, { cpuSeconds: 2, peakRssBytes: 100 * MiB, kubeRequests: { 'PUT leases': 3, 'GET secrets': 1 }, reconciles: { success: 4 } }),
      shard(2, { cpuSeconds: 3, peakRssBytes: 200 * MiB, kubeRequests: { 'PUT leases': 2 }, reconciles: { success: 1 } }),
    ]);
    expect(c).toEqual({ peakRssBytes: 200 * MiB, rssBytes: 560 * MiB, cpuSeconds: 5, kubeRequests: { PUT: 5, GET: 1 }, reconciles: { success: 5 } });
  });
});

describe('sharded scale.md', () => {
  it('names the replicas and namespaces, and has a row per shard and step', () => {
    const md = renderScaleMarkdown(report(sharded()));
    expect(md).toContain('# Scale: 100,000 UserGroups on 2 replicas sharded by namespace (100 namespaces)');
    expect(md).toContain('2 controller replicas, each with its own Lease in bench-scale-control-abc, sharing 100 namespaces (rendezvous hashing)');
    expect(md).toContain('settled (each seeing all 2) in 4.20 s before the first UserGroup');
    expect(md).toContain(
      'Cold convergence: 100 fresh namespaces and 2 idle replicas, settled, then the UserGroups applied concurrently, spread over the namespaces;',
    );
    expect(md).toMatch(/\| shard 1: controller peak RSS ≤ 400 MiB over the whole run \| 330 MiB .* \| met \|/);
    expect(md).toContain(
      '| step | shard | UserGroups held | namespaces owned | members | rebalances | service calls | CPU | peak RSS | RSS at end | V8 heap used at end | reconciles | apiserver requests | of them Lease |',
    );
    expect(md).toContain('| cold | 1 | 50,400 | 52 | 2 | 0 | 50,400 | 1.0 s | 300 MiB | 280 MiB | 210 MiB | 0 | 0 | 0 |');
    expect(md).toContain(
      '| steady | 2 | 50,000 | 52 | 2 | 0 | 0 | 1.0 s | 300 MiB | 280 MiB | 210 MiB | 0 | LIST leases 3, PUT leases 90 | LIST leases 3, PUT leases 90 |',
    );
    expect(md).toContain('| controller, shard 2, restarted (restart, steady, rotation) | 300 MiB | 290 MiB | – |');
  });

  it('says one replica over several namespaces when not sharded', () => {
    const md = renderScaleMarkdown(report(scale({ sharding: { shards: 1, namespaces: 20 } })));
    expect(md).toContain('# Scale: 100,000 UserGroups on one replica (20 namespaces)');
    expect(md).toContain('one controller replica watching the whole cluster, leader election off, the groups spread over 20 namespaces');
  });
});
