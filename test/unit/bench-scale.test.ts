import { describe, expect, it } from 'vitest';
import { openRequests, operatorRequests, storedObjects } from '../bench/apiserver-requests.js';
import { parsePrometheus } from '../bench/controller.js';
import { DEFAULTS, etcdQuotaBytes, parseBenchOptions, SCALE_ETCD_QUOTA_GIB, scaleTimeoutMs, type BenchOptions } from '../bench/options.js';
import type { ColdResult, ControllerFigures } from '../bench/report.js';
import {
  controllerPeak,
  evaluateScaleTargets,
  nonWatch,
  renderScaleMarkdown,
  scaleCommand,
  type ScaleReport,
  type ScaleResult,
} from '../bench/scale-report.js';

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
      'apiserver_request_total{code="200",component="apiserver",group="usergroup.dev",resource="usergroups",scope="namespace",subresource="",verb="LIST",version="v1alpha1"} 4',
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
