import { describe, expect, it } from 'vitest';
import { operatorRequests } from '../../devtools/bench/apiserver-requests.js';
import { parsePrometheus } from '../../devtools/bench/controller.js';
import { parseBenchOptions } from '../../devtools/bench/options.js';
import {
  PEER_CHART_FILES,
  peerCharts,
  peerRatios,
  renderPeerSection,
  type PeerLimitRun,
  type PeerOperatorName,
  type PeerOrder,
  type PeerResult,
  type PeerRun,
} from '../../devtools/bench/peer-report.js';

const MiB = 1024 * 1024;

/** A run with round figures (10 s, 100 MiB, 20 s CPU; restart 80 MiB, 20 requests). */
const run = (operator: PeerOperatorName, order: PeerOrder, over: Partial<PeerRun> = {}): PeerRun => ({
  operator,
  order,
  position: 1,
  namespace: `bench-peer-${operator}`,
  ok: true,
  convergeMs: 10_000,
  ready: 10_000,
  secrets: 10_000,
  peakRssBytes: 100 * MiB,
  cpuSeconds: 20,
  serviceCalls: 10_000,
  apiserverRequests: { 'POST secrets': 10_000 },
  restart: { ok: true, windowMs: 60_000, serviceCalls: 0, peakRssBytes: 80 * MiB, cpuSeconds: 3, apiserverRequests: { 'LIST usergroups': 20 } },
  ...over,
});
const limit = (order: PeerOrder, wallMs: number): PeerLimitRun => ({ order, position: 3, ok: true, wallMs });

function result(runs: PeerRun[], limits: PeerLimitRun[] = [limit('ts-first', 9000), limit('go-first', 11_000)]): PeerResult {
  return { n: 10_000, ok: true, peerDir: '/work/shared/peer', restartWindowS: 60, runs, limits, charts: [] };
}

describe('peer ratios', () => {
  const r = result([
    // ts-first: TypeScript 8 s against the peer's 10 s; go-first: 10 s against 10 s.
    run('ts', 'ts-first', { convergeMs: 8000, peakRssBytes: 70 * MiB, cpuSeconds: 18 }),
    run('go', 'ts-first'),
    run('go', 'go-first'),
    run('ts', 'go-first', {
      peakRssBytes: 90 * MiB,
      cpuSeconds: 22,
      restart: { ok: true, windowMs: 60_000, serviceCalls: 0, peakRssBytes: 60 * MiB, cpuSeconds: 2, apiserverRequests: { 'LIST usergroups': 8 } },
    }),
  ]);
  const byTarget = (needle: string) => peerRatios(r).find((x) => x.target.includes(needle));

  it('each ratio per order and the mean of both', () => {
    const throughput = byTarget('TypeScript / Go peer ≥ 1.0');
    expect(throughput?.perOrder['ts-first']).toBeCloseTo(1.25);
    expect(throughput?.perOrder['go-first']).toBeCloseTo(1.0);
    expect(throughput?.mean).toBeCloseTo(1.125);
    expect(throughput?.status).toBe('met');
  });

  it('against the minimal-work loop: limit time / TypeScript time', () => {
    const loop = byTarget('minimal-work loop');
    expect(loop?.perOrder['ts-first']).toBeCloseTo(9000 / 8000);
    expect(loop?.perOrder['go-first']).toBeCloseTo(1.1);
    expect(loop?.status).toBe('met');
  });

  it('memory and CPU: TypeScript over the peer, lower is better', () => {
    expect(byTarget('peak RSS, cold')?.mean).toBeCloseTo((0.7 + 0.9) / 2);
    expect(byTarget('peak RSS, cold')?.status).toBe('met');
    expect(byTarget('peak RSS, after restart')?.mean).toBeCloseTo((1 + 0.75) / 2);
    expect(byTarget('peak RSS, after restart')?.status).toBe('met');
    expect(byTarget('CPU per converged group')?.mean).toBeCloseTo((0.9 + 1.1) / 2);
    expect(byTarget('CPU per converged group')?.target).toContain('≤ 1.5');
    expect(byTarget('CPU per converged group')?.status).toBe('met');
  });

  it('misses: RSS above 1.1x the peer, CPU above 1.5x, throughput below the peer', () => {
    const worse = peerRatios(
      result([
        run('ts', 'ts-first', { convergeMs: 12_000, peakRssBytes: 115 * MiB, cpuSeconds: 32 }),
        run('go', 'ts-first'),
        run('go', 'go-first'),
        run('ts', 'go-first', { convergeMs: 10_500, peakRssBytes: 110 * MiB, cpuSeconds: 30 }),
      ]),
    );
    const status = (needle: string) => worse.find((x) => x.target.includes(needle))?.status;
    expect(status('TypeScript / Go peer ≥ 1.0')).toBe('missed');
    expect(status('peak RSS, cold')).toBe('missed');
    expect(status('CPU per converged group')).toBe('missed');
  });

  it('the distance to the floor, in MiB, judged at 300 groups or fewer', () => {
    const floored = (n: number, distanceMiB: number) =>
      peerRatios({
        ...result([
          run('ts', 'ts-first', { peakRssBytes: 100 * MiB, floorRssBytes: (100 - distanceMiB) * MiB }),
          run('go', 'ts-first'),
          run('go', 'go-first'),
          run('ts', 'go-first', { peakRssBytes: 90 * MiB, floorRssBytes: (90 - distanceMiB) * MiB }),
        ]),
        n,
      }).find((x) => x.target.includes('above the floor'));
    expect(floored(300, 8)?.mean).toBeCloseTo(8);
    expect(floored(300, 8)?.status).toBe('met');
    expect(floored(300, 12)?.status).toBe('missed');
    expect(floored(300, 12)?.note).toContain('floor 88 MiB / 78 MiB');
    // At 10,000 the distance is reported, not judged (the ratio to the peer is).
    expect(floored(10_000, 40)?.status).toBe('met');
    // No floor measured: nothing to judge.
    expect(byTarget('above the floor')?.status).toBe('not run');
  });

  it('restart: no service call at all, and apiserver requests against the peer', () => {
    expect(byTarget('0 service calls')?.status).toBe('met');
    const requests = byTarget('apiserver requests');
    expect(requests?.perOrder['ts-first']).toBeCloseTo(1);
    expect(requests?.perOrder['go-first']).toBeCloseTo(0.4);
    // Issue 31's goal: no more than the peer's.
    expect(requests?.status).toBe('met');
    expect(requests?.target).toContain('≤ 1.0');
  });

  it('one service call in either order misses the restart target', () => {
    const calls = result([
      run('ts', 'ts-first'),
      run('go', 'ts-first'),
      run('go', 'go-first'),
      run('ts', 'go-first', { restart: { ok: true, windowMs: 60_000, serviceCalls: 1, peakRssBytes: 1, cpuSeconds: 1, apiserverRequests: {} } }),
    ]);
    expect(peerRatios(calls).find((x) => x.target.includes('0 service calls'))?.status).toBe('missed');
  });

  it('a failed run fails the ratios that need it; no mean from one order', () => {
    const failed = result([run('ts', 'ts-first'), run('go', 'ts-first'), run('go', 'go-first', { ok: false, error: 'timed out' }), run('ts', 'go-first')]);
    const throughput = peerRatios(failed)[0];
    expect(throughput?.perOrder['ts-first']).toBeCloseTo(1);
    expect(throughput?.perOrder['go-first']).toBeUndefined();
    expect(throughput?.mean).toBeUndefined();
    expect(throughput?.status).toBe('failed');
  });

  it("at a typical cluster's size (300 groups) CPU may be 2.0x the peer and RSS is judged by the floor", () => {
    const small = peerRatios({ ...r, n: 300 });
    expect(small.find((x) => x.target.includes('CPU per converged group'))?.target).toContain('≤ 2 (at N=300)');
    const restartRss = small.find((x) => x.target.includes('peak RSS, after restart'));
    expect(restartRss?.note).toContain('by the distance to the floor');
    expect(restartRss?.status).toBe('met');
    expect(peerRatios({ ...r, n: 301 }).find((x) => x.target.includes('CPU per converged group'))?.target).toContain('≤ 1.5');
  });

  it('says the size when it is not the target size', () => {
    expect(peerRatios({ ...r, n: 500 })[0]?.target).toContain('(at N=500)');
    expect(peerRatios(r)[0]?.target).not.toContain('(at N=');
  });
});

describe('renderPeerSection', () => {
  it('a skipped phase is one note', () => {
    const text = renderPeerSection({ ...result([], []), skipped: 'no reference peer at /x (build.sh not found)' }).join('\n');
    expect(text).toContain('Skipped: no reference peer at /x');
    expect(text).not.toContain('| target |');
  });

  it('targets, each run in its order and place, the charts', () => {
    const r = {
      ...result([run('ts', 'ts-first', { position: 1 }), run('go', 'ts-first', { position: 2 })], [limit('ts-first', 9000)]),
      charts: [PEER_CHART_FILES.ready, PEER_CHART_FILES.rss],
    };
    const text = renderPeerSection(r).join('\n');
    expect(text).toContain('## Against the Go peer');
    expect(text).toMatch(/\| ts-first \| 1 \| TypeScript \| 10\.00 s \| 1000 \|/);
    expect(text).toMatch(/\| ts-first \| 2 \| Go peer \|/);
    expect(text).toMatch(/\| ts-first \| 3 \| minimal-work loop \| 9\.00 s \|/);
    expect(text).toContain('![peer-ready.svg](peer-ready.svg)');
    expect(text).toContain('**not run**');
  });
});

describe('peerCharts', () => {
  it('two charts, one line per operator × order, TypeScript first in the legend', () => {
    const charts = peerCharts(10_000, [
      { operator: 'go', order: 'ts-first', samples: [[250, 10, 40 * MiB]] },
      { operator: 'ts', order: 'go-first', samples: [[250, 5, 90 * MiB]] },
      { operator: 'ts', order: 'ts-first', samples: [[250, 7, 95 * MiB]] },
    ]);
    expect(charts.map((c) => c.file)).toEqual([PEER_CHART_FILES.ready, PEER_CHART_FILES.rss]);
    for (const c of charts) expect(c.svg.match(/<polyline /g)).toHaveLength(3);
    const ready = charts[0]?.svg ?? '';
    expect(ready.indexOf('>TypeScript, ts-first<')).toBeLessThan(ready.indexOf('>TypeScript, go-first<'));
    expect(ready.indexOf('>TypeScript, go-first<')).toBeLessThan(ready.indexOf('>Go peer, ts-first<'));
    expect(ready).toContain('10,000 UserGroups');
  });
});

describe('operatorRequests', () => {
  it("counts the operators' resources by verb and resource, leaving the rest out", () => {
    const m = parsePrometheus(
      [
        'apiserver_request_total{code="201",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 5',
        'apiserver_request_total{code="409",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 1',
        'apiserver_request_total{code="200",group="usergroup.dev",resource="usergroups",scope="resource",subresource="status",verb="PATCH",version="v1"} 7',
        'apiserver_request_total{code="200",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 2',
        'apiserver_request_total{code="200",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 90',
        'apiserver_request_duration_seconds_count{group="",resource="secrets",verb="POST"} 6',
        // The operator's namespaces informer counts; the bench's own namespace writes do not.
        'apiserver_request_total{code="200",group="",resource="namespaces",scope="cluster",subresource="",verb="WATCH",version="v1"} 1',
        'apiserver_request_total{code="201",group="",resource="namespaces",scope="resource",subresource="",verb="POST",version="v1"} 3',
        'apiserver_request_total{code="200",group="",resource="namespaces",scope="resource",subresource="",verb="DELETE",version="v1"} 3',
      ].join('\n'),
    );
    expect(operatorRequests(m)).toEqual({ 'POST secrets': 6, 'PATCH usergroups/status': 7, 'POST events': 2, 'WATCH namespaces': 1 });
  });
});

describe('peer options', () => {
  it('defaults, and the flags of the phase', () => {
    const d = parseBenchOptions([]);
    expect(d.ok === true && d.options.phases.includes('peer')).toBe(true);
    expect(d.ok === true && d.options.peerDir).toBe('../shared/peer');
    const p = parseBenchOptions(['--phases', 'peer', '--peer-dir', '/opt/peer', '--peer-restart-s', '20', '--peer-qps', '500', '--peer-burst', '900']);
    expect(p.ok === true && [p.options.phases, p.options.peerDir, p.options.peerRestartS, p.options.peerQps, p.options.peerBurst]).toEqual([
      ['peer'],
      '/opt/peer',
      20,
      500,
      900,
    ]);
    expect(parseBenchOptions(['--peer-qps', '0']).ok).toBe(false);
  });
});
