import { describe, expect, it } from 'vitest';
import { deltaBy, parsePrometheus } from '../../devtools/bench/controller.js';
import { DEFAULTS, parseBenchOptions, QUICK } from '../../devtools/bench/options.js';
import { parseStatTicks, parseStatusMemory } from '../../devtools/bench/proc.js';
import { coldRatio, evaluateTargets, renderMarkdown, type BenchResults, type ColdResult, type ControllerFigures } from '../../devtools/bench/report.js';
import { forEachBounded, percentile } from '../../devtools/bench/stats.js';

const MiB = 1024 * 1024;
const figures = (over: Partial<ControllerFigures> = {}): ControllerFigures => ({
  peakRssBytes: 100 * MiB,
  cpuSeconds: 12.5,
  kubeRequests: { GET: 3, PATCH: 10 },
  reconciles: { requeue: 10 },
  ...over,
});
const cold = (n: number, convergeMs: number, over: Partial<ColdResult> = {}): ColdResult => ({
  n,
  namespace: `bench-cold-${n}`,
  ok: true,
  convergeMs,
  applyMs: convergeMs / 2,
  ready: n,
  secrets: n,
  verified: n,
  serviceCalls: n,
  controller: figures(),
  ...over,
});

function results(over: Partial<BenchResults> = {}): BenchResults {
  return {
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:30:00.000Z',
    options: {
      sizes: [1000, 10000],
      worldSize: 10000,
      phases: ['limit', 'cold', 'restart', 'steady', 'rotation'],
      latencyMs: 20,
      concurrency: 16,
      serviceQps: 10000,
      applyParallelism: 16,
      steadyMinutes: 10,
      rotations: 100,
    },
    environment: { node: 'v24.0.0', cpus: 2, kubernetes: 'v1.36.3', loadAverageStart: [1, 1, 1], loadAverageEnd: [2, 2, 2] },
    controllerFlags: ['--concurrency', '16'],
    leaderElection: false,
    limit: [
      { n: 1000, namespace: 'l1', ok: true, wallMs: 9_000, concurrency: 16 },
      { n: 10000, namespace: 'l2', ok: true, wallMs: 90_000, concurrency: 16 },
    ],
    cold: [cold(1000, 10_000), cold(10000, 100_000)],
    restart: { n: 10000, ok: true, cachesSyncedMs: 3000, reobservedMs: 9000, serviceCalls: 0, controller: figures() },
    steady: {
      n: 10000,
      ok: true,
      minutes: 10,
      serviceCalls: 0,
      serviceCallsPerMin: 0,
      kubeRequestsPerMin: 0.3,
      kubeNonWatchPerMin: 0,
      controller: figures({ kubeRequests: { WATCH: 3 } }),
    },
    rotation: { n: 10000, ok: true, requested: 100, completed: 100, p50Ms: 400, p99Ms: 900, maxMs: 950, serviceRotations: 100 },
    memory: [
      { n: 1000, process: 'cold convergence', peakRssBytes: 90 * MiB },
      { n: 10000, process: 'cold convergence', peakRssBytes: 140 * MiB },
    ],
    ...over,
  };
}

describe('bench report', () => {
  it('judges every target from the figures, at N=10,000', () => {
    const verdicts = evaluateTargets(results());
    expect(verdicts.map((v) => v.status)).toEqual(['met', 'met', 'met', 'met', 'met']);
    expect(verdicts[0]?.figure).toBe('0.90 (limit 90.0 s / operator 100.0 s)');
    expect(verdicts[4]?.figure).toContain('140 MiB');
    expect(coldRatio(results(), 1000)).toBeCloseTo(0.9);
  });

  it('judges the ratio against the minimal limit, and gives the one against the limit during the creation as context', () => {
    const r = results({
      limit: [
        { n: 10000, namespace: 'l2', ok: true, wallMs: 30_000, concurrency: 16, mode: 'minimal' },
        { n: 10000, namespace: 'l3', ok: true, wallMs: 45_000, concurrency: 16, mode: 'concurrent-creation' },
      ],
      cold: [cold(10000, 50_000)],
    });
    const [ratio] = evaluateTargets(r);
    expect(ratio?.status).toBe('missed');
    expect(ratio?.figure).toBe('0.60 (limit 30.0 s / operator 50.0 s); against the limit during the creation (45.0 s): 0.90');
    expect(coldRatio(r, 10000, 'concurrent-creation')).toBeCloseTo(0.9);
    expect(renderMarkdown(r)).toContain('| ratio to the limit during the creation |');
  });

  it('reports misses with their figure', () => {
    const verdicts = evaluateTargets(
      results({
        cold: [cold(1000, 10_000), cold(10000, 200_000)],
        restart: { n: 10000, ok: true, cachesSyncedMs: 3000, reobservedMs: 9000, serviceCalls: 7, controller: figures() },
        steady: {
          n: 10000,
          ok: true,
          minutes: 10,
          serviceCalls: 0,
          serviceCallsPerMin: 0,
          kubeRequestsPerMin: 6.3,
          kubeNonWatchPerMin: 6,
          controller: figures({ kubeRequests: { WATCH: 3, GET: 60 } }),
        },
        rotation: { n: 10000, ok: true, requested: 100, completed: 100, p50Ms: 1500, p99Ms: 2500, maxMs: 2600, serviceRotations: 100 },
        memory: [
          { n: 10000, process: 'cold convergence', peakRssBytes: 140 * MiB },
          { n: 10000, process: 'restarted', peakRssBytes: 151 * MiB },
        ],
      }),
    );
    expect(verdicts.map((v) => v.status)).toEqual(['missed', 'missed', 'missed', 'missed', 'missed']);
    expect(verdicts[0]?.figure).toMatch(/^0\.45 /);
    expect(verdicts[1]?.figure).toMatch(/^7 service calls/);
    expect(verdicts[2]?.figure).toContain('6.00 apiserver requests/min besides watches');
    expect(verdicts[3]?.figure).toMatch(/^p99 2\.50 s/);
    expect(verdicts[4]?.figure).toMatch(/^151 MiB/);
  });

  it('says when a phase failed or did not run, and which N a smaller run was judged at', () => {
    const verdicts = evaluateTargets(
      results({
        limit: [{ n: 600, namespace: 'l', ok: true, wallMs: 5_000, concurrency: 16 }],
        cold: [cold(600, 10_000, { ok: false, error: 'timed out', ready: 500 })],
        restart: undefined,
        steady: undefined,
        rotation: { n: 600, ok: false, error: 'timed out', requested: 100, completed: 40, p50Ms: 300, p99Ms: 500, maxMs: 500, serviceRotations: 40 },
        memory: [{ n: 600, process: 'cold convergence', peakRssBytes: 80 * MiB }],
      }),
    );
    expect(verdicts.map((v) => v.status)).toEqual(['failed', 'not run', 'not run', 'failed', 'met']);
    expect(verdicts[0]?.figure).toContain('timed out');
    expect(verdicts[0]?.figure).toContain('at N=600; the target is for 10,000');
    expect(verdicts[3]?.figure).toContain('40/100 completed');
    expect(verdicts[4]?.figure).toContain('at N=600');
  });

  it('renders a short Markdown report: targets, then the per-phase tables', () => {
    const md = renderMarkdown(results());
    expect(md).toContain('| cold convergence ratio limit/operator ≥ 0.8 at N=10,000 | 0.90 (limit 90.0 s / operator 100.0 s) | met |');
    expect(md).toContain('| 1,000 | 9.00 s | 10.0 s | 0.90 | 10.00 | 1.00× |');
    expect(md).toContain('| 10,000 | 90.0 s | 100.0 s | 0.90 | 10.00 | 1.00× |');
    expect(md).toContain('| 10,000 | 3.00 s | 9.00 s | 0 | requeue 10 |');
    expect(md).toContain('| 10,000 | 100 | 100 | 0.40 s | 0.90 s | 0.95 s | 100 | ok |');
    expect(md).toContain('GET 3, PATCH 10');
    expect(md.split('\n').length).toBeLessThan(60);
    const failed = renderMarkdown(results({ cold: [cold(1000, 10_000), cold(10000, 5_000, { ok: false, error: 'timed out', ready: 42 })] }));
    expect(failed).toContain('failed: timed out (42/10,000 Ready');
    expect(failed).toContain('| 10,000 | 90.0 s | failed: timed out');
    expect(failed).toMatch(/\| cold convergence ratio .* \| \*\*failed\*\* \|/);
  });
});

describe('bench helpers', () => {
  it('parses options, with --quick and overrides', () => {
    expect(parseBenchOptions([])).toEqual({ ok: true, options: DEFAULTS });
    const quick = parseBenchOptions(['--quick', '--latency-ms', '5']);
    expect(quick.ok === true && quick.options).toMatchObject({ ...QUICK, latencyMs: 5, quick: true });
    const some = parseBenchOptions(['--n', '3000,1000', '--phases', 'cold,limit', '--steady-minutes=0.2']);
    expect(some.ok === true && some.options).toMatchObject({ sizes: [1000, 3000], worldSize: 3000, phases: ['limit', 'cold'], steadyMinutes: 0.2 });
    expect(parseBenchOptions(['--phases', 'cold,bogus'])).toMatchObject({ ok: false });
    expect(parseBenchOptions(['--n', '10,x'])).toMatchObject({ ok: false });
    expect(parseBenchOptions(['--nope', '1'])).toMatchObject({ ok: false });
    expect(parseBenchOptions(['--help'])).toEqual({ ok: 'help' });
  });

  it('reads /proc status and stat', () => {
    expect(parseStatusMemory('Name:\tnode\nVmHWM:\t  150000 kB\nVmRSS:\t  120000 kB\n')).toEqual({ rssBytes: 120000 * 1024, peakRssBytes: 150000 * 1024 });
    const stat = '1234 (node (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 11 0 100 1000000 30000';
    expect(parseStatTicks(stat)).toBe(300);
  });

  it('takes nearest-rank percentiles', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile([], 50)).toBeUndefined();
    expect(percentile([7], 99)).toBe(7);
  });

  it('bounds parallelism', async () => {
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    await forEachBounded(20, 3, async (i) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 1));
      seen.push(i);
      running--;
    });
    expect(most).toBe(3);
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('parses Prometheus text and takes deltas by label', () => {
    const text = [
      '# HELP usergroup_kube_requests_total x',
      '# TYPE usergroup_kube_requests_total counter',
      'usergroup_kube_requests_total{verb="GET",code="200"} 5',
      'usergroup_kube_requests_total{verb="GET",code="404"} 2',
      'usergroup_kube_requests_total{verb="WATCH",code="200"} 3',
      'workqueue_depth{name="usergroup"} 0',
      'process_cpu_seconds_total 1.5',
    ].join('\n');
    const m = parsePrometheus(text);
    expect(m.by('usergroup_kube_requests_total', 'verb')).toEqual({ GET: 7, WATCH: 3 });
    expect(m.sum('usergroup_kube_requests_total', { code: '200' })).toBe(8);
    expect(m.sum('process_cpu_seconds_total')).toBe(1.5);
    expect(deltaBy({ GET: 7, WATCH: 3 }, { GET: 9, WATCH: 3, PATCH: 1 })).toEqual({ GET: 2, PATCH: 1 });
  });
});
