/*
 * The `peer` phase's results, its ratios against the Go (controller-runtime) peer and the minimal-work loop, the
 * targets judged from them, its Markdown section and its charts: pure functions of the results (unit-tested in
 * test/unit/bench-peer-report.test.ts).
 */
import { renderLineChart, type ChartSeries } from './svg-chart.js';

export const PEER_OPERATORS = ['ts', 'go'] as const;
export type PeerOperatorName = (typeof PEER_OPERATORS)[number];
/** The second order is the first reversed: each operator runs once before and once after the other. */
export const PEER_ORDERS = ['ts-first', 'go-first'] as const;
export type PeerOrder = (typeof PEER_ORDERS)[number];

interface Outcome {
  readonly ok: boolean;
  readonly error?: string;
}

/** One operator over N synced groups after a restart, watched for a fixed window. */
export interface PeerRestart extends Outcome {
  readonly windowMs: number;
  readonly serviceCalls: number;
  /** VmHWM of the restarted process at the end of the window. */
  readonly peakRssBytes: number | undefined;
  readonly cpuSeconds: number | undefined;
  /** apiserver_request_total over the window, by "VERB resource" (see apiserver-requests.ts). */
  readonly apiserverRequests: Readonly<Record<string, number>>;
}

/** One operator's cold convergence over N pre-created UserGroups, then its restart. */
export interface PeerRun extends Outcome {
  readonly operator: PeerOperatorName;
  readonly order: PeerOrder;
  /** 1-based place in its order's sequence (the limit loop takes one place too). */
  readonly position: number;
  readonly namespace: string;
  /** From the spawn to every UserGroup Ready for its generation with its token Secret. */
  readonly convergeMs: number;
  readonly ready: number;
  readonly secrets: number;
  /** VmHWM at the end of the cold window (convergence + a 2 s settle). */
  readonly peakRssBytes: number | undefined;
  /**
   * TypeScript only, the floor: VmHWM of the same controller started before the run's UserGroups existed, with one
   * UserGroup (in a namespace of its own) synced and 2 s settled: everything a sync needs loaded.
   */
  readonly floorRssBytes?: number;
  /** The same process before that one UserGroup: caches synced, 2 s settled. */
  readonly idleFloorRssBytes?: number;
  /** utime + stime at convergence. */
  readonly cpuSeconds: number | undefined;
  /** V8 heap bytes allocated from spawn to convergence (TypeScript only: nodejs_heap_allocated_bytes_total). */
  readonly allocatedBytes?: number;
  readonly serviceCalls: number;
  readonly apiserverRequests: Readonly<Record<string, number>>;
  readonly restart?: PeerRestart;
}

/** The minimal-work loop (the `limit` phase's, mode minimal) at the same N, once per order. */
export interface PeerLimitRun extends Outcome {
  readonly order: PeerOrder;
  readonly position: number;
  readonly wallMs: number;
}

export interface PeerResult extends Outcome {
  readonly n: number;
  /** Why the phase did not run (no peer checkout): it is a measuring tool outside the product. */
  readonly skipped?: string;
  readonly peerDir: string;
  readonly peerBin?: string;
  /** The peer's command line, as run (namespace and key file of the last run). */
  readonly peerCommand?: string;
  readonly restartWindowS: number;
  readonly runs: readonly PeerRun[];
  readonly limits: readonly PeerLimitRun[];
  /** Chart files written next to latest.md. */
  readonly charts: readonly string[];
}

/** [ms since the spawn, UserGroups Ready, RSS bytes]: compact, as there are a few hundred per run. */
export type PeerSample = readonly [number, number, number];

export interface PeerSeries {
  readonly operator: PeerOperatorName;
  readonly order: PeerOrder;
  readonly samples: readonly PeerSample[];
}

export type PeerStatus = 'met' | 'missed' | 'failed' | 'not run';

export interface PeerRatio {
  readonly target: string;
  readonly perOrder: Readonly<Record<PeerOrder, number | undefined>>;
  /** Mean of both orders; undefined unless both were measured. */
  readonly mean: number | undefined;
  readonly status: PeerStatus;
  /** What the ratio is made of, for the table. */
  readonly note?: string;
}

const TARGET_N = 10_000;
/** At a typical cluster's size (300 groups) the goals are CPU ≤ 2.0× the peer and peak RSS ≤ 10 MiB above the floor. */
const TYPICAL_N = 300;
const FLOOR_DISTANCE_MIB = 10;
const MiB = 1024 * 1024;
const count = (n: number): string => n.toLocaleString('en-US');
const num = (v: number | undefined, digits = 2): string => (v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits));
const sec = (ms: number | undefined): string => (ms === undefined ? '–' : `${(ms / 1000).toFixed(2)} s`);
const mib = (bytes: number | undefined): string => (bytes === undefined ? '–' : `${(bytes / MiB).toFixed(0)} MiB`);
const cell = (text: string | undefined): string => {
  const line = (text ?? '').replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
};
export const totalOf = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, b) => a + b, 0);

export const runOf = (r: PeerResult, operator: PeerOperatorName, order: PeerOrder): PeerRun | undefined =>
  r.runs.find((x) => x.operator === operator && x.order === order);

/** A ratio of TypeScript to something, per order, when both sides of that order succeeded. */
function perOrder(figure: (order: PeerOrder) => number | undefined): Record<PeerOrder, number | undefined> {
  const out = {} as Record<PeerOrder, number | undefined>;
  for (const order of PEER_ORDERS) {
    const v = figure(order);
    out[order] = v !== undefined && Number.isFinite(v) ? v : undefined;
  }
  return out;
}

const divide = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined || b === undefined || b === 0 ? undefined : a / b);

function judged(target: string, values: Record<PeerOrder, number | undefined>, meets: (mean: number) => boolean, anyFailed: boolean, note?: string): PeerRatio {
  const measured = PEER_ORDERS.map((o) => values[o]).filter((v): v is number => v !== undefined);
  const mean = measured.length === PEER_ORDERS.length ? measured.reduce((a, v) => a + v, 0) / measured.length : undefined;
  const status: PeerStatus = mean !== undefined ? (meets(mean) ? 'met' : 'missed') : anyFailed ? 'failed' : 'not run';
  return { target, perOrder: values, mean, status, ...(note ? { note } : {}) };
}

/** The issue's ratios, each the mean of both orders of one run; judged at 10,000 (noted when run at another N). */
export function peerRatios(r: PeerResult): PeerRatio[] {
  const ok = (op: PeerOperatorName, order: PeerOrder): PeerRun | undefined => {
    const run = runOf(r, op, order);
    return run?.ok ? run : undefined;
  };
  const restarted = (op: PeerOperatorName, order: PeerOrder): PeerRestart | undefined => {
    const x = ok(op, order)?.restart;
    return x?.ok ? x : undefined;
  };
  const failed = r.runs.some((x) => !x.ok || (x.restart !== undefined && !x.restart.ok)) || r.limits.some((l) => !l.ok) || !r.ok;
  const at = r.n === TARGET_N ? '' : ` (at N=${count(r.n)})`;
  const ts = (order: PeerOrder): PeerRun | undefined => ok('ts', order);
  const go = (order: PeerOrder): PeerRun | undefined => ok('go', order);
  const limit = (order: PeerOrder): PeerLimitRun | undefined => r.limits.find((l) => l.order === order && l.ok);
  const tsCalls = PEER_ORDERS.map((o) => restarted('ts', o)?.serviceCalls);
  // At a typical cluster's size the runtime's own floor weighs more, so memory there is judged against the
  // operator's own floor, and CPU against 2.0× the peer instead of 1.5×.
  const typical = r.n <= TYPICAL_N;
  const cpuGoal = typical ? 2.0 : 1.5;
  const rssRatio = (name: string, peak: (op: PeerOperatorName, o: PeerOrder) => number | undefined): PeerRatio =>
    judged(
      `peak RSS, ${name}: TypeScript / Go peer ≤ 1.1${at}`,
      perOrder((o) => divide(peak('ts', o), peak('go', o))),
      (m) => typical || m <= 1.1,
      failed,
      typical ? `judged at more than ${TYPICAL_N} groups; at ${TYPICAL_N} or fewer, by the distance to the floor` : undefined,
    );
  return [
    judged(
      `convergence throughput: TypeScript / Go peer ≥ 1.0${at}`,
      perOrder((o) => divide(go(o)?.convergeMs, ts(o)?.convergeMs)),
      (m) => m >= 1.0,
      failed,
    ),
    judged(
      `convergence throughput: TypeScript / minimal-work loop ≥ 0.95${at}`,
      perOrder((o) => divide(limit(o)?.wallMs, ts(o)?.convergeMs)),
      (m) => m >= 0.95,
      failed,
    ),
    rssRatio('cold', (op, o) => ok(op, o)?.peakRssBytes),
    rssRatio('after restart', (op, o) => restarted(op, o)?.peakRssBytes),
    judged(
      `peak RSS, cold, above the floor (the same controller with one UserGroup synced): ≤ ${FLOOR_DISTANCE_MIB} MiB at ${TYPICAL_N} groups${at}`,
      perOrder((o) => {
        const run = ts(o);
        return run?.peakRssBytes !== undefined && run.floorRssBytes !== undefined ? (run.peakRssBytes - run.floorRssBytes) / MiB : undefined;
      }),
      (m) => !typical || m <= FLOOR_DISTANCE_MIB,
      failed,
      `MiB, not a ratio; floor ${PEER_ORDERS.map((o) => mib(ts(o)?.floorRssBytes)).join(' / ')} with one UserGroup synced, ${PEER_ORDERS.map((o) => mib(ts(o)?.idleFloorRssBytes)).join(' / ')} before it${typical ? '' : `; judged at ${TYPICAL_N} groups or fewer`}`,
    ),
    judged(
      `controller CPU per converged group: TypeScript / Go peer ≤ ${cpuGoal}${at}`,
      perOrder((o) => divide(ts(o)?.cpuSeconds, go(o)?.cpuSeconds)),
      (m) => m <= cpuGoal,
      failed,
    ),
    // Not a ratio: TypeScript's own calls, both orders; "mean" is their sum, and the target is none at all.
    judged(
      `restart over ${count(r.n)} synced groups: TypeScript makes 0 service calls${at}`,
      perOrder((o) => restarted('ts', o)?.serviceCalls),
      () => tsCalls.every((c) => c === 0),
      failed,
      `calls, not a ratio; the Go peer made ${PEER_ORDERS.map((o) => restarted('go', o)?.serviceCalls ?? '–').join(' / ')}`,
    ),
    judged(
      `restart over ${count(r.n)} synced groups: apiserver requests, TypeScript / Go peer ≤ 1.0${at}`,
      perOrder((o) => {
        const t = restarted('ts', o);
        const g = restarted('go', o);
        return divide(t ? totalOf(t.apiserverRequests) : undefined, g ? totalOf(g.apiserverRequests) : undefined);
      }),
      (m) => m <= 1.0,
      failed,
    ),
  ];
}

const NAMES: Record<PeerOperatorName, string> = { ts: 'TypeScript', go: 'Go peer' };
const COLORS: Record<PeerOperatorName, string> = { ts: '#1f6feb', go: '#d9480f' };

export const PEER_CHART_FILES = { ready: 'peer-ready.svg', rss: 'peer-rss.svg' } as const;

/** The phase's two charts, Ready UserGroups and RSS over time since each spawn: one line per operator × order. */
export function peerCharts(n: number, series: readonly PeerSeries[]): { readonly file: string; readonly svg: string }[] {
  // Legend by operator, then order: the two curves of one operator sit together.
  const sorted = [...series].sort(
    (a, b) => PEER_OPERATORS.indexOf(a.operator) - PEER_OPERATORS.indexOf(b.operator) || PEER_ORDERS.indexOf(a.order) - PEER_ORDERS.indexOf(b.order),
  );
  const lines = (y: (s: PeerSample) => number): ChartSeries[] =>
    sorted.map((s) => ({
      label: `${NAMES[s.operator]}, ${s.order}`,
      color: COLORS[s.operator],
      dashed: s.order === 'go-first',
      points: s.samples.map((p) => [p[0] / 1000, y(p)] as const),
    }));
  const seconds = (v: number): string => `${v} s`;
  return [
    {
      file: PEER_CHART_FILES.ready,
      svg: renderLineChart({
        title: `Cold convergence of ${count(n)} UserGroups: Ready over time`,
        xLabel: 'seconds since the operator started',
        yLabel: 'UserGroups Ready',
        series: lines((p) => p[1]),
        formatX: seconds,
        formatY: (v) => count(v),
      }),
    },
    {
      file: PEER_CHART_FILES.rss,
      svg: renderLineChart({
        title: `Cold convergence of ${count(n)} UserGroups: operator RSS over time`,
        xLabel: 'seconds since the operator started',
        yLabel: 'RSS (MiB)',
        series: lines((p) => p[2] / MiB),
        formatX: seconds,
      }),
    },
  ];
}

const table = (header: readonly string[], rows: readonly (readonly string[])[]): string =>
  [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');

/** The Markdown section of the phase: its targets, each run, and the charts. */
export function renderPeerSection(r: PeerResult): string[] {
  const out: string[] = ['## Against the Go peer (controller-runtime)', ''];
  if (r.skipped) {
    out.push(`Skipped: ${cell(r.skipped)}. The peer is a measuring tool outside the product; see the \`peer\` phase in docs/benchmark.md.`, '');
    return out;
  }
  out.push(
    `N=${count(r.n)} fresh UserGroups per operator and order, created before each operator starts; each order in fresh namespaces, ` +
      `each namespace deleted (etcd compacted and defragmented) before the next run; restart window ${r.restartWindowS} s. ` +
      `Peer: \`${r.peerCommand ?? r.peerBin ?? r.peerDir}\`.`,
    '',
  );
  if (r.error) out.push(`**The phase stopped early:** ${cell(r.error)}`, '');
  out.push(
    table(
      ['target', ...PEER_ORDERS, 'mean', 'status'],
      peerRatios(r).map((x) => [
        x.target + (x.note ? ` (${x.note})` : ''),
        ...PEER_ORDERS.map((o) => num(x.perOrder[o])),
        num(x.mean),
        x.status === 'met' ? 'met' : `**${x.status}**`,
      ]),
    ),
    '',
  );
  const rows = PEER_ORDERS.flatMap((order) => {
    const entries: { position: number; row: string[] }[] = [];
    for (const x of r.runs.filter((run) => run.order === order)) {
      const rs = x.restart;
      entries.push({
        position: x.position,
        row: [
          order,
          String(x.position),
          NAMES[x.operator],
          x.ok ? sec(x.convergeMs) : `failed: ${cell(x.error)} (${count(x.ready)} Ready, ${count(x.secrets)} Secrets)`,
          x.ok ? num(r.n / (x.convergeMs / 1000), 0) : '–',
          mib(x.peakRssBytes),
          x.floorRssBytes === undefined && x.idleFloorRssBytes === undefined ? '–' : `${mib(x.idleFloorRssBytes)} / ${mib(x.floorRssBytes)}`,
          x.cpuSeconds !== undefined ? `${num(x.cpuSeconds, 1)} s` : '–',
          x.cpuSeconds !== undefined ? num((1000 * x.cpuSeconds) / r.n) : '–',
          x.allocatedBytes !== undefined ? num(x.allocatedBytes / 1024 / r.n, 0) : '–',
          count(x.serviceCalls),
          count(totalOf(x.apiserverRequests)),
          rs ? (rs.ok ? count(rs.serviceCalls) : `failed: ${cell(rs.error)}`) : '–',
          rs ? mib(rs.peakRssBytes) : '–',
          rs ? count(totalOf(rs.apiserverRequests)) : '–',
        ],
      });
    }
    for (const l of r.limits.filter((x) => x.order === order))
      entries.push({
        position: l.position,
        row: [
          order,
          String(l.position),
          'minimal-work loop',
          l.ok ? sec(l.wallMs) : `failed: ${cell(l.error)}`,
          l.ok ? num(r.n / (l.wallMs / 1000), 0) : '–',
          ...Array<string>(10).fill(''),
        ],
      });
    return entries.sort((a, b) => a.position - b.position).map((e) => e.row);
  });
  out.push(
    table(
      [
        'order',
        '#',
        'operator',
        'convergence',
        'groups/s',
        'peak RSS',
        'floor RSS: idle / one group',
        'CPU',
        'CPU ms/group',
        'heap allocated KiB/group',
        'service calls',
        'apiserver requests',
        'restart: service calls',
        'restart: peak RSS',
        'restart: apiserver requests',
      ],
      rows,
    ),
    '',
  );
  const requests = r.runs
    .filter((x) => x.restart)
    .map((x) => [x.order, NAMES[x.operator], verbs(x.apiserverRequests), verbs(x.restart?.apiserverRequests ?? {})]);
  if (requests.length > 0) {
    out.push('apiserver requests by verb and resource (apiserver_request_total):', '', table(['order', 'operator', 'cold', 'restart window'], requests), '');
  }
  if (r.charts.length > 0) out.push(r.charts.map((f) => `![${f}](${f})`).join(' '), '');
  return out;
}

const verbs = (requests: Readonly<Record<string, number>>): string =>
  Object.entries(requests)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || '0';

/** A short line per ratio for the console. */
export function peerSummary(r: PeerResult): string {
  if (r.skipped) return `[peer] skipped: ${r.skipped}`;
  return peerRatios(r)
    .map((x) => `[peer] ${x.target}: ${PEER_ORDERS.map((o) => `${o} ${num(x.perOrder[o])}`).join(', ')}, mean ${num(x.mean)}: ${x.status}`)
    .join('\n');
}
