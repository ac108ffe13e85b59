/*
 * The bench's results, the targets judged from them, and their Markdown rendering: pure functions of the
 * results object (unit-tested in test/unit/bench-report.test.ts).
 */

import type { BenchOptions } from './options.js';
import { renderPeerSection, type PeerResult } from './peer-report.js';
import type { DueToDoneSummary } from './scheduled-plan.js';

export interface PhaseOutcome {
  readonly ok: boolean;
  /** Why the phase failed (timeout, refused request, wrong end state). */
  readonly error?: string;
}

export interface ControllerFigures {
  readonly peakRssBytes: number | undefined;
  /** RSS at the end of the phase. */
  readonly rssBytes?: number;
  /** utime + stime of the controller process over the phase. */
  readonly cpuSeconds: number | undefined;
  /** usergroup_kube_requests_total over the phase, by verb (WATCH = watch opens). */
  readonly kubeRequests: Readonly<Record<string, number>>;
  /** usergroup_reconcile_total over the phase, by result. */
  readonly reconciles: Readonly<Record<string, number>>;
  /** Means over the phase from the controller's histograms: a reconcile, a service call, a key's wait in the queue. */
  readonly means?: { readonly reconcileMs: number | undefined; readonly serviceCallMs: number | undefined; readonly queueWaitMs: number | undefined };
  /** The V8 heap at the end of the phase (prom-client's nodejs_heap_* gauges), to split the RSS. */
  readonly heap?: { readonly usedBytes: number; readonly totalBytes: number; readonly externalBytes: number };
}

/**
 * minimal: PUT + Secret create + status patch on pre-created UserGroups; controller-pattern: plus the controller's
 * Secret GET and Event POST; concurrent-creation: minimal, while the UserGroups are being applied as in the cold phase.
 */
export const LIMIT_MODES = ['minimal', 'controller-pattern', 'concurrent-creation'] as const;
export type LimitMode = (typeof LIMIT_MODES)[number];

export interface LimitResult extends PhaseOutcome {
  readonly n: number;
  /** Absent in results written before the modes existed: minimal. */
  readonly mode?: LimitMode;
  readonly namespace: string;
  readonly wallMs: number;
  readonly concurrency: number;
  /** Mean latency of each step as the limit script saw it. */
  readonly stepMeansMs?: { readonly put: number; readonly secretCreate: number; readonly statusPatch: number };
}

export interface ColdResult extends PhaseOutcome {
  readonly n: number;
  readonly namespace: string;
  /** From the first apply to the last UserGroup Ready for its generation with its Secret. */
  readonly convergeMs: number;
  /** From the first apply to the last apply answered. */
  readonly applyMs: number;
  readonly ready: number;
  readonly secrets: number;
  /** Secrets whose token is the service's current one (checked once at the end). */
  readonly verified: number;
  /** Service calls the controller made during the phase (simulator count). */
  readonly serviceCalls: number;
  readonly controller: ControllerFigures;
}

export interface RestartResult extends PhaseOutcome {
  readonly n: number;
  /** From spawning the new controller to /readyz 200 (caches synced). */
  readonly cachesSyncedMs: number | undefined;
  /** From spawning to every UserGroup reconciled once and the queue empty. */
  readonly reobservedMs: number | undefined;
  /** Service calls from the spawn until 2 s after re-observation. */
  readonly serviceCalls: number;
  readonly controller: ControllerFigures;
}

export interface SteadyResult extends PhaseOutcome {
  readonly n: number;
  readonly minutes: number;
  readonly serviceCalls: number;
  readonly serviceCallsPerMin: number;
  /** All controller requests to the apiserver, watch opens included. */
  readonly kubeRequestsPerMin: number;
  /** Requests other than watch opens (what polling would show as). */
  readonly kubeNonWatchPerMin: number;
  readonly controller: ControllerFigures;
}

export interface RotationResult extends PhaseOutcome {
  readonly n: number;
  readonly requested: number;
  readonly completed: number;
  readonly p50Ms: number | undefined;
  readonly p99Ms: number | undefined;
  readonly maxMs: number | undefined;
  /** Rotations the simulator performed during the phase. */
  readonly serviceRotations: number;
}

/** Scheduled rotation of N groups falling due at the same second, paced by the controller's global cap. */
export interface ScheduledResult extends PhaseOutcome, DueToDoneSummary {
  readonly n: number;
  /** The controller's --scheduled-rotations-per-minute. */
  readonly capPerMinute: number;
  /** From the maxTokenAge patches to the common due time. */
  readonly leadMs: number;
  /** The common due time (ISO). */
  readonly dueAt: string;
  /** From the first patch until every UserGroup's status showed the new due time; undefined if not before it. */
  readonly specSettledMs: number | undefined;
  /** Service calls from the first patch to the due time (a maxTokenAge change needs none). */
  readonly specServiceCalls: number;
  /** Rotation POSTs and upsert PUTs at the service from the due time to the end (any outcome). */
  readonly servicePosts: number;
  readonly servicePuts: number;
  /** Groups the service rotated exactly once. */
  readonly rotatedOnce: number;
  /** Groups rotated more often than due: more than once, or more than twice where the new token fell due again. */
  readonly rotatedTooOften: number;
  /** Groups whose new token fell due again before the end (their maxTokenAge is shorter than the wave). */
  readonly dueAgain: number;
  /** New tokens the Secrets' watch saw, over all groups. */
  readonly secretTokenChanges: number;
  /** usergroup_tokens_rotated_total{trigger="scheduled"} over the wave. */
  readonly metricScheduledRotations?: number;
  /** The controller from the due time to the end. */
  readonly controller: ControllerFigures;
}

export interface MemoryFigure {
  readonly n: number;
  /** Which controller process: "cold", or "restart→rotation" for the restarted one. */
  readonly process: string;
  readonly peakRssBytes: number;
  /** RSS and V8 heap when that process was last measured (end of its phase). */
  readonly endRssBytes?: number;
  readonly heap?: ControllerFigures['heap'];
}

export interface BenchResults {
  readonly startedAt: string;
  readonly finishedAt: string;
  // As run; phases and limit modes as plain strings so results from older runs still read.
  readonly options: Pick<
    BenchOptions,
    'sizes' | 'worldSize' | 'latencyMs' | 'concurrency' | 'serviceQps' | 'applyParallelism' | 'steadyMinutes' | 'rotations'
  > &
    Partial<Pick<BenchOptions, 'scheduledCap' | 'scheduledLeadS' | 'peerDir' | 'peerRestartS' | 'peerQps' | 'peerBurst'>> & {
      readonly phases: readonly string[];
      readonly limitModes?: readonly string[];
    };
  readonly environment: {
    readonly node: string;
    readonly cpus: number;
    readonly kubernetes: string;
    readonly loadAverageStart: readonly number[];
    readonly loadAverageEnd: readonly number[];
  };
  readonly controllerFlags: readonly string[];
  /** Node flags the controller ran with (the image's by default). */
  readonly controllerNodeFlags?: readonly string[];
  /** Environment from the image's ENV the controller ran with. */
  readonly controllerEnv?: Readonly<Record<string, string>>;
  readonly leaderElection: false;
  readonly limit: readonly LimitResult[];
  readonly cold: readonly ColdResult[];
  readonly restart: RestartResult | undefined;
  readonly steady: SteadyResult | undefined;
  readonly rotation: RotationResult | undefined;
  /** Absent in results written before the phase existed. */
  readonly scheduled?: ScheduledResult | undefined;
  /** The comparison with the Go peer; absent when the phase was not selected (results before it existed too). */
  readonly peer?: PeerResult | undefined;
  readonly memory: readonly MemoryFigure[];
  /** A failure outside any phase (start-up), if the run stopped early. */
  readonly error?: string;
}

export type TargetStatus = 'met' | 'missed' | 'failed' | 'not run';

export interface TargetVerdict {
  readonly target: string;
  readonly figure: string;
  readonly status: TargetStatus;
}

const TARGET_N = 10_000;
const MiB = 1024 * 1024;

const s = (ms: number | undefined): string => (ms === undefined ? '–' : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`);
const mib = (bytes: number | undefined): string => (bytes === undefined ? '–' : `${(bytes / MiB).toFixed(0)} MiB`);
const ms = (v: number | undefined): string => (v === undefined || !Number.isFinite(v) ? '–' : `${v.toFixed(0)} ms`);
const num = (v: number | undefined, digits = 2): string => (v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits));
const count = (n: number): string => n.toLocaleString('en-US');
/** An error as one short table cell (the JSON keeps it whole). */
const cell = (text: string | undefined): string => {
  const line = (text ?? '').replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
};
/** "at N=600" when a figure comes from another size than the target's. */
const atOther = (n: number): string => (n === TARGET_N ? '' : ` (at N=${count(n)}; the target is for ${count(TARGET_N)})`);

const MODE_TITLES: Record<LimitMode, string> = {
  minimal: 'limit',
  'controller-pattern': "limit with the controller's requests",
  'concurrent-creation': 'limit during the creation',
};

const minimalLimits = (r: BenchResults): readonly LimitResult[] => r.limit.filter((l) => (l.mode ?? 'minimal') === 'minimal');

/**
 * limit_time / operator_time at one N, when both ran and succeeded; against the minimal limit (the target's), or
 * against a diagnostic mode's (e.g. the limit measured while the same UserGroups are being applied).
 */
export function coldRatio(results: BenchResults, n: number, mode: LimitMode = 'minimal'): number | undefined {
  const limit = results.limit.find((l) => (l.mode ?? 'minimal') === mode && l.n === n && l.ok);
  const cold = results.cold.find((c) => c.n === n && c.ok);
  return limit && cold ? limit.wallMs / cold.convergeMs : undefined;
}

/** The size a target is judged at: TARGET_N when measured, else the largest measured. */
function sizeFor(sizes: readonly number[]): number | undefined {
  return sizes.includes(TARGET_N) ? TARGET_N : sizes.length > 0 ? Math.max(...sizes) : undefined;
}

export function evaluateTargets(r: BenchResults): TargetVerdict[] {
  const verdicts: TargetVerdict[] = [];

  // 1. Cold convergence ratio.
  {
    const target = `cold convergence ratio limit/operator ≥ 0.8 at N=${count(TARGET_N)}`;
    const n = sizeFor(r.cold.filter((c) => minimalLimits(r).some((l) => l.n === c.n)).map((c) => c.n));
    if (n === undefined) verdicts.push({ target, figure: '–', status: 'not run' });
    else {
      const cold = r.cold.find((c) => c.n === n);
      const limit = minimalLimits(r).find((l) => l.n === n);
      const ratio = coldRatio(r, n);
      if (ratio === undefined)
        verdicts.push({ target, figure: `failed: ${cell([cold?.error, limit?.error].filter(Boolean).join('; '))}${atOther(n)}`, status: 'failed' });
      else {
        // Context, not the verdict: the operator's clock includes creating the UserGroups; the limit's does not.
        const during = r.limit.find((l) => l.mode === 'concurrent-creation' && l.n === n && l.ok);
        const context = during ? `; against the limit during the creation (${s(during.wallMs)}): ${num(coldRatio(r, n, 'concurrent-creation'))}` : '';
        verdicts.push({
          target,
          figure: `${num(ratio)} (limit ${s(limit?.wallMs)} / operator ${s(cold?.convergeMs)})${context}${atOther(n)}`,
          status: ratio >= 0.8 ? 'met' : 'missed',
        });
      }
    }
  }

  // 2. Restart: no service call.
  {
    const target = `restart over ${count(TARGET_N)} synced groups: 0 service calls`;
    const x = r.restart;
    if (!x) verdicts.push({ target, figure: '–', status: 'not run' });
    else if (!x.ok) verdicts.push({ target, figure: `failed: ${cell(x.error)}; ${x.serviceCalls} service calls${atOther(x.n)}`, status: 'failed' });
    else
      verdicts.push({
        target,
        figure: `${x.serviceCalls} service calls; re-observed in ${s(x.reobservedMs)}${atOther(x.n)}`,
        status: x.serviceCalls === 0 ? 'met' : 'missed',
      });
  }

  // 3. Steady state: no service call, no polling.
  {
    const target = 'steady state: 0 service calls/min outside resync; no apiserver polling';
    const x = r.steady;
    if (!x) verdicts.push({ target, figure: '–', status: 'not run' });
    else {
      const watches = x.controller.kubeRequests['WATCH'] ?? 0;
      const figure = `${num(x.serviceCallsPerMin)} service calls/min; ${num(x.kubeNonWatchPerMin)} apiserver requests/min besides watches (+${watches} watch re-opens in ${num(x.minutes, 1)} min); leader election off${atOther(x.n)}`;
      if (!x.ok) verdicts.push({ target, figure: `failed: ${cell(x.error)}; ${figure}`, status: 'failed' });
      else verdicts.push({ target, figure, status: x.serviceCalls === 0 && x.kubeNonWatchPerMin === 0 ? 'met' : 'missed' });
    }
  }

  // 4. Rotation latency.
  {
    const target = 'rotation p99 ≤ 2 s at 20 ms service latency';
    const x = r.rotation;
    const latency = r.options.latencyMs === 20 ? '' : ` (measured at ${r.options.latencyMs} ms latency)`;
    if (!x) verdicts.push({ target, figure: '–', status: 'not run' });
    else if (!x.ok || x.p99Ms === undefined)
      verdicts.push({ target, figure: `failed: ${cell(x.error)}; ${x.completed}/${x.requested} completed`, status: 'failed' });
    else
      verdicts.push({
        target,
        figure: `p99 ${s(x.p99Ms)}, p50 ${s(x.p50Ms)} over ${x.requested} rotations at N=${count(x.n)}${latency}`,
        status: x.p99Ms <= 2000 ? 'met' : 'missed',
      });
  }

  // 5. Memory.
  {
    const target = `controller peak RSS ≤ 150 MiB at N=${count(TARGET_N)}`;
    const n = sizeFor([...new Set(r.memory.map((m) => m.n))]);
    if (n === undefined) verdicts.push({ target, figure: '–', status: 'not run' });
    else {
      const peak = Math.max(...r.memory.filter((m) => m.n === n).map((m) => m.peakRssBytes));
      verdicts.push({
        target,
        figure: `${mib(peak)} (max over the controller processes at this N)${atOther(n)}`,
        status: peak <= 150 * MiB ? 'met' : 'missed',
      });
    }
  }
  return verdicts;
}

const verbs = (requests: Readonly<Record<string, number>>): string =>
  Object.entries(requests)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([verb, n]) => `${verb} ${n}`)
    .join(', ') || '0';

const table = (header: readonly string[], rows: readonly (readonly string[])[]): string =>
  [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');

/** The Markdown report: the targets, then one short table per phase. */
export function renderMarkdown(r: BenchResults): string {
  const o = r.options;
  const out: string[] = [];
  out.push('# Benchmark results', '');
  out.push(
    `${r.startedAt} → ${r.finishedAt}; Node ${r.environment.node}, ${r.environment.cpus} CPUs, Kubernetes ${r.environment.kubernetes}; ` +
      `service latency ${o.latencyMs} ms; controller \`${Object.entries(r.controllerEnv ?? {})
        .map(([k, v]) => `${k}=${v} `)
        .join('')}node ${[...(r.controllerNodeFlags ?? []), 'dist/cli/main.js', 'run', ...r.controllerFlags].join(' ')}\` (leader election off); ` +
      `UserGroups applied ${o.applyParallelism} at a time; load average at start ${r.environment.loadAverageStart.map((l) => l.toFixed(2)).join(' ')}.`,
    '',
  );
  if (r.error) out.push(`**The run stopped early:** ${cell(r.error)}`, '');

  out.push('## Targets', '');
  out.push(
    table(
      ['target', 'figure', 'status'],
      evaluateTargets(r).map((v) => [v.target, v.figure, v.status === 'met' ? 'met' : `**${v.status}**`]),
    ),
    '',
  );

  const sizes = [...new Set([...r.limit.map((l) => l.n), ...r.cold.map((c) => c.n)])].sort((a, b) => a - b);
  if (sizes.length > 0) {
    out.push('## Limit, cold convergence, scaling, memory', '');
    const perGroup = (n: number): number | undefined => {
      const c = r.cold.find((x) => x.n === n && x.ok);
      return c ? c.convergeMs / n : undefined;
    };
    const base = sizes.map(perGroup).find((v) => v !== undefined);
    const diagnosticModes = LIMIT_MODES.filter((m) => m !== 'minimal' && r.limit.some((l) => l.mode === m));
    out.push(
      table(
        [
          'N',
          'limit',
          ...diagnosticModes.map((m) => MODE_TITLES[m]),
          'operator (cold)',
          'ratio',
          ...diagnosticModes.map((m) => `ratio to the ${MODE_TITLES[m]}`),
          'ms/group',
          'vs smallest N',
          'apply done',
          'controller CPU',
          'peak RSS',
          'controller apiserver requests',
          'limit step means: PUT / Secret / status',
          'controller means: reconcile / service call / queue wait',
        ],
        sizes.map((n) => {
          const l = minimalLimits(r).find((x) => x.n === n);
          const extra = diagnosticModes.map((mode) => r.limit.find((x) => x.n === n && x.mode === mode));
          const c = r.cold.find((x) => x.n === n);
          const pg = perGroup(n);
          return [
            count(n),
            l ? (l.ok ? s(l.wallMs) : `failed: ${cell(l.error)}`) : '–',
            ...extra.map((lc) => (lc ? (lc.ok ? s(lc.wallMs) : `failed: ${cell(lc.error)}`) : '–')),
            c ? (c.ok ? s(c.convergeMs) : `failed: ${cell(c.error)} (${count(c.ready)}/${count(n)} Ready, ${count(c.secrets)} Secrets)`) : '–',
            num(coldRatio(r, n)),
            ...diagnosticModes.map((mode) => num(coldRatio(r, n, mode))),
            num(pg),
            pg !== undefined && base !== undefined ? `${num(pg / base)}×` : '–',
            c ? s(c.applyMs) : '–',
            c?.controller.cpuSeconds !== undefined ? `${num(c.controller.cpuSeconds, 1)} s` : '–',
            c ? mib(c.controller.peakRssBytes) : '–',
            c ? verbs(c.controller.kubeRequests) : '–',
            l?.stepMeansMs ? `${ms(l.stepMeansMs.put)} / ${ms(l.stepMeansMs.secretCreate)} / ${ms(l.stepMeansMs.statusPatch)}` : '–',
            c?.controller.means
              ? `${ms(c.controller.means.reconcileMs)} / ${ms(c.controller.means.serviceCallMs)} / ${ms(c.controller.means.queueWaitMs)}`
              : '–',
          ];
        }),
      ),
      '',
    );
  }

  if (r.restart) {
    const x = r.restart;
    out.push('## Restart', '');
    out.push(
      table(
        ['N', 'caches synced', 're-observed', 'service calls', 'reconciles', 'apiserver requests', 'CPU', 'status'],
        [
          [
            count(x.n),
            s(x.cachesSyncedMs),
            s(x.reobservedMs),
            String(x.serviceCalls),
            verbs(x.controller.reconciles),
            verbs(x.controller.kubeRequests),
            x.controller.cpuSeconds !== undefined ? `${num(x.controller.cpuSeconds, 1)} s` : '–',
            x.ok ? 'ok' : `failed: ${cell(x.error)}`,
          ],
        ],
      ),
      '',
    );
  }
  if (r.steady) {
    const x = r.steady;
    out.push('## Steady state', '');
    out.push(
      table(
        ['N', 'minutes', 'service calls/min', 'apiserver requests/min (all)', 'besides watches', 'requests', 'controller CPU', 'status'],
        [
          [
            count(x.n),
            num(x.minutes, 1),
            num(x.serviceCallsPerMin),
            num(x.kubeRequestsPerMin),
            num(x.kubeNonWatchPerMin),
            verbs(x.controller.kubeRequests),
            x.controller.cpuSeconds !== undefined ? `${num(x.controller.cpuSeconds)} s` : '–',
            x.ok ? 'ok' : `failed: ${cell(x.error)}`,
          ],
        ],
      ),
      '',
    );
  }
  if (r.rotation) {
    const x = r.rotation;
    out.push('## Rotation latency', '');
    out.push(
      table(
        ['N', 'requested at once', 'completed', 'p50', 'p99', 'max', 'rotations at the service', 'status'],
        [
          [
            count(x.n),
            String(x.requested),
            String(x.completed),
            s(x.p50Ms),
            s(x.p99Ms),
            s(x.maxMs),
            String(x.serviceRotations),
            x.ok ? 'ok' : `failed: ${cell(x.error)}`,
          ],
        ],
      ),
      '',
    );
  }
  if (r.scheduled) out.push(...scheduledSection(r.scheduled));
  if (r.memory.length > 0) {
    out.push('## Controller peak RSS (VmHWM)', '');
    out.push(
      table(
        ['N', 'process', 'peak RSS', 'RSS at end', 'V8 heap used / total at end', 'external'],
        r.memory.map((m) => [
          count(m.n),
          m.process,
          mib(m.peakRssBytes),
          mib(m.endRssBytes),
          m.heap ? `${mib(m.heap.usedBytes)} / ${mib(m.heap.totalBytes)}` : '–',
          mib(m.heap?.externalBytes),
        ]),
      ),
      '',
    );
  }
  if (r.peer) out.push(...renderPeerSection(r.peer));
  out.push(
    `Reproduce: \`npm run bench -- --n ${o.sizes.join(',')} --world-n ${o.worldSize} --phases ${o.phases.join(',')} --latency-ms ${o.latencyMs} --concurrency ${o.concurrency} --steady-minutes ${o.steadyMinutes}` +
      (o.limitModes && o.limitModes.join(',') !== 'minimal' ? ` --limit-modes ${o.limitModes.join(',')}` : '') +
      (o.scheduledCap !== undefined && o.phases.includes('scheduled') ? ` --scheduled-cap ${o.scheduledCap}` : '') +
      (o.scheduledLeadS ? ` --scheduled-lead-s ${o.scheduledLeadS}` : '') +
      (o.phases.includes('peer') && o.peerRestartS !== undefined ? ` --peer-restart-s ${o.peerRestartS}` : '') +
      '`',
    '',
  );
  return out.join('\n');
}

/** The scheduled-rotation table: each measured figure next to what the cap alone implies. */
function scheduledSection(x: ScheduledResult): string[] {
  const percent = x.ratePerMinute !== undefined ? ` (${((100 * x.ratePerMinute) / x.capPerMinute).toFixed(0)} % of the cap)` : '';
  const once =
    count(x.rotatedOnce) +
    (x.rotatedTooOften > 0 ? `; **${count(x.rotatedTooOften)} more often than due**` : '') +
    (x.dueAgain > 0 ? `; ${count(x.dueAgain)} due again before the end (their second rotations share the cap)` : '');
  return [
    '## Scheduled rotation, all due at once',
    '',
    table(
      [
        'N',
        'cap',
        'rotated',
        'wall (cap implies)',
        'rate',
        'due→done p50',
        'p99 (cap implies)',
        'max',
        'POST / PUT',
        'rotated once',
        'spec change reconciled',
        'reconciles',
        'controller CPU',
        'peak RSS',
        'status',
      ],
      [
        [
          count(x.n),
          `${count(x.capPerMinute)}/min`,
          count(x.completed),
          `${s(x.wallMs)} (${s(x.capMaxMs)})`,
          x.ratePerMinute !== undefined ? `${count(Math.round(x.ratePerMinute))}/min${percent}` : '–',
          s(x.p50Ms),
          `${s(x.p99Ms)} (${s(x.capP99Ms)})`,
          s(x.maxMs),
          `${count(x.servicePosts)} / ${count(x.servicePuts)}`,
          once,
          x.specSettledMs !== undefined
            ? `in ${s(x.specSettledMs)}, ${s(x.leadMs - x.specSettledMs)} before due; ${count(x.specServiceCalls)} service calls`
            : `**not all before due** (lead ${s(x.leadMs)})`,
          verbs(x.controller.reconciles),
          x.controller.cpuSeconds !== undefined ? `${num(x.controller.cpuSeconds, 1)} s` : '–',
          mib(x.controller.peakRssBytes),
          x.ok ? 'ok' : `failed: ${cell(x.error)}`,
        ],
      ],
    ),
    '',
  ];
}
