import { describe, expect, it } from 'vitest';
import { scheduledRotation } from '../../src/controller/policies/rotation.js';
import { parseBenchOptions } from '../../devtools/bench/options.js';
import { renderMarkdown, type BenchResults, type ScheduledResult } from '../../devtools/bench/report.js';
import { capSlotMs, defaultLeadMs, maxAgeForDue, summarizeDueToDone } from '../../devtools/bench/scheduled-plan.js';

describe('bench: scheduled rotation arithmetic', () => {
  it('finds the maxTokenAge that makes each token fall due at the same millisecond, by the controller’s own formula', () => {
    const dueAt = Date.parse('2026-01-01T00:10:00Z');
    const issued = ['2026-01-01T00:00:00Z', '2026-01-01T00:07:13Z', '2026-01-01T00:09:59Z'];
    const uids = ['0b5c6f1e-aaaa-4bbb-8ccc-000000000001', '0b5c6f1e-aaaa-4bbb-8ccc-000000000002', 'ffffffff-ffff-4fff-8fff-ffffffffffff'];
    for (const issuedAt of issued)
      for (const uid of uids) {
        const maxAgeMs = maxAgeForDue(issuedAt, uid, dueAt);
        expect(maxAgeMs).toBeDefined();
        expect(scheduledRotation(issuedAt, maxAgeMs ?? 0, uid)?.dueAt).toBe(dueAt);
        // Never less than the time left (the jitter only brings the due time forward), at most that over 0.9.
        expect(maxAgeMs).toBeGreaterThanOrEqual(dueAt - Date.parse(issuedAt));
        expect(maxAgeMs).toBeLessThanOrEqual(Math.ceil((dueAt - Date.parse(issuedAt)) / 0.9));
      }
    expect(maxAgeForDue('2026-01-01T00:10:00Z', uids[0] ?? '', dueAt)).toBeUndefined();
    expect(maxAgeForDue('not a time', uids[0] ?? '', dueAt)).toBeUndefined();
  });

  it('spaces the cap’s slots evenly and leads by enough for the spec changes and no second rotation in the wave', () => {
    expect(capSlotMs(1, 6000)).toBe(0);
    expect(capSlotMs(10_000, 6000)).toBeCloseTo(99_990);
    // 10,000 at 6,000/min: a 100 s wave; the newest token's maxAge (the lead) × 0.9 must outlast it.
    const lead = defaultLeadMs(10_000, 6000);
    expect(lead * 0.9).toBeGreaterThanOrEqual(capSlotMs(10_000, 6000) * 2);
    expect(lead % 1000).toBe(0);
    expect(defaultLeadMs(600, 6000)).toBe(30_000);
  });

  it('summarizes due→done against what the cap implies', () => {
    const dueAt = 1_000_000;
    // 100 groups, one every 10 ms from the due time plus 50 ms of work: exactly the cap of 6,000/min.
    const done = Array.from({ length: 100 }, (_, i) => dueAt + i * 10 + 50);
    const s = summarizeDueToDone(dueAt, done, 100, 6000);
    expect(s).toMatchObject({ completed: 100, wallMs: 1040, p50Ms: 540, p99Ms: 1030, maxMs: 1040, capP99Ms: 980, capMaxMs: 990 });
    expect(s.ratePerMinute).toBeCloseTo(100 / (1040 / 60_000));
    // A group done before the due time (a clock step) counts as 0, not negative.
    expect(summarizeDueToDone(dueAt, [dueAt - 5], 1, 60).p50Ms).toBe(0);
    expect(summarizeDueToDone(dueAt, [], 10, 60)).toMatchObject({ completed: 0, wallMs: undefined, ratePerMinute: undefined, p99Ms: undefined });
  });

  it('takes the phase, its cap and lead as options', () => {
    const parsed = parseBenchOptions(['--phases', 'scheduled', '--scheduled-cap', '1200', '--scheduled-lead-s', '45']);
    expect(parsed.ok === true && parsed.options).toMatchObject({ phases: ['scheduled'], scheduledCap: 1200, scheduledLeadS: 45 });
    expect(parseBenchOptions(['--scheduled-cap', '0'])).toMatchObject({ ok: false });
  });

  it('renders the scheduled table with the cap’s figures next to the measured ones', () => {
    const scheduled: ScheduledResult = {
      n: 10_000,
      ok: true,
      capPerMinute: 6000,
      leadMs: 139_000,
      dueAt: '2026-01-01T00:10:00.000Z',
      specSettledMs: 60_000,
      specServiceCalls: 0,
      ...summarizeDueToDone(
        0,
        Array.from({ length: 10_000 }, (_, i) => i * 12),
        10_000,
        6000,
      ),
      servicePosts: 10_000,
      servicePuts: 0,
      rotatedOnce: 10_000,
      rotatedTooOften: 0,
      dueAgain: 0,
      secretTokenChanges: 10_000,
      controller: { peakRssBytes: undefined, cpuSeconds: 80, kubeRequests: {}, reconciles: { requeue: 30_000 } },
    };
    const base = {
      startedAt: '',
      finishedAt: '',
      options: {
        sizes: [10_000],
        worldSize: 10_000,
        phases: ['scheduled'],
        latencyMs: 20,
        concurrency: 16,
        serviceQps: 10000,
        applyParallelism: 16,
        steadyMinutes: 10,
        rotations: 100,
        scheduledCap: 6000,
      },
      environment: { node: 'v26', cpus: 2, kubernetes: 'v1.36', loadAverageStart: [0], loadAverageEnd: [0] },
      controllerFlags: [],
      leaderElection: false,
      limit: [],
      cold: [],
      restart: undefined,
      steady: undefined,
      rotation: undefined,
      memory: [],
    } satisfies BenchResults;
    const md = renderMarkdown({ ...base, scheduled });
    expect(md).toContain('## Scheduled rotation, all due at once');
    expect(md).toContain(
      '| 10,000 | 6,000/min | 10,000 | 120.0 s (100.0 s) | 5,001/min (83 % of the cap) | 60.0 s | 118.8 s (99.0 s) | 120.0 s | 10,000 / 0 | 10,000 |',
    );
    expect(md).toContain('--phases scheduled --latency-ms 20 --concurrency 16 --steady-minutes 10 --scheduled-cap 6000`');
    const doubled = renderMarkdown({ ...base, scheduled: { ...scheduled, ok: false, error: 'a repeated rotation', rotatedTooOften: 3, dueAgain: 40 } });
    expect(doubled).toContain('**3 more often than due**; 40 due again before the end');
    expect(renderMarkdown(base)).not.toContain('Scheduled rotation');
  });
});
