/*
 * The `scale` phase's results (one replica over --scale-n UserGroups, 100,000 for issue 18's target), the targets
 * judged from them and scale.md: pure functions of the results (unit-tested in test/unit/bench-scale.test.ts).
 */
import type { BenchOptions } from './options.js';
import type { ColdResult, PhaseOutcome, RestartResult, RotationResult, SteadyResult, TargetStatus, TargetVerdict } from './report.js';

/** The size issue 18's scale targets are stated for. */
export const SCALE_TARGET_N = 100_000;
/** Controller peak RSS allowed over the whole run at SCALE_TARGET_N. */
export const SCALE_RSS_TARGET_MIB = 400;
export const SCALE_ROTATION_P99_TARGET_MS = 2000;

export interface ProcessMemory {
  /** "controller, cold convergence", "kube-apiserver", "bench (simulator + drivers)"… */
  readonly process: string;
  /** VmHWM when last read (for the control plane: since it started). */
  readonly peakRssBytes: number | undefined;
  readonly rssBytes: number | undefined;
  /** utime + stime of the process so far: whether the bench (which serves the simulator) or the control plane was busy. */
  readonly cpuSeconds?: number | undefined;
}

export interface ScaleRestart {
  readonly result: RestartResult;
  /**
   * apiserver_request_total on the operator's resources over the window, by "VERB resource": from after the old
   * controller stopped to the end of the window. The apiserver counts a watch when it ends, so the new controller's
   * watches are not in it but in `openedWatches`.
   */
  readonly apiserverRequests: Readonly<Record<string, number>>;
  /** apiserver_longrunning_requests at the end minus at the start, by "VERB resource": the watches opened and still open. */
  readonly openedWatches: Readonly<Record<string, number>>;
}

export interface ScaleSteady {
  readonly result: SteadyResult;
  /** apiserver_request_total on the operator's resources over the window (whoever asked), by "VERB resource". */
  readonly apiserverRequests: Readonly<Record<string, number>>;
  /** Open watches at the end minus at the start. */
  readonly openedWatches: Readonly<Record<string, number>>;
  /** The controller's RSS over the window: [seconds since the start, bytes], every few seconds. */
  readonly rssSamples: readonly (readonly [number, number])[];
}

export interface ScaleResult extends PhaseOutcome {
  readonly n: number;
  readonly steadyMinutes: number;
  /** Each step's timeout (scaleTimeoutMs). */
  readonly timeoutMs: number;
  /** etcd's --quota-backend-bytes; undefined: etcd's default. */
  readonly etcdQuotaBytes: number | undefined;
  readonly cold?: ColdResult;
  readonly restart?: ScaleRestart;
  readonly steady?: ScaleSteady;
  readonly rotation?: RotationResult;
  /** The two controller processes (cold; restarted, which runs restart, steady and rotation), VmHWM at their end. */
  readonly controllers: readonly ProcessMemory[];
  /** The control plane's processes and the bench's own (the simulator lives in it), at the end. */
  readonly processes: readonly ProcessMemory[];
  readonly etcdDb?: { readonly dbSizeBytes: number; readonly inUseBytes: number };
  /** Objects stored at the end, by resource (apiserver_resource_objects). */
  readonly storedObjects?: Readonly<Record<string, number>>;
  /** How often the cold phase's convergence watches fell behind (410) and were replaced by a paged list. */
  readonly convergenceRelists?: number;
}

export interface ScaleReport {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly environment: {
    readonly node: string;
    readonly cpus: number;
    readonly memoryBytes: number;
    readonly kubernetes: string;
    readonly etcd: string;
    readonly loadAverageStart: readonly number[];
    readonly loadAverageEnd: readonly number[];
  };
  readonly options: Pick<BenchOptions, 'latencyMs' | 'concurrency' | 'serviceQps' | 'applyParallelism' | 'rotations'>;
  readonly controllerFlags: readonly string[];
  readonly controllerNodeFlags: readonly string[];
  readonly controllerEnv: Readonly<Record<string, string>>;
  /** How to run it again. */
  readonly command: string;
  readonly scale: ScaleResult;
  /** A failure outside the phase (the control plane's start), if the run stopped early. */
  readonly error?: string;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const count = (n: number): string => n.toLocaleString('en-US');
const s = (ms: number | undefined): string => (ms === undefined ? '–' : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`);
const mib = (bytes: number | undefined): string => (bytes === undefined || !Number.isFinite(bytes) ? '–' : `${(bytes / MiB).toFixed(0)} MiB`);
const gib = (bytes: number | undefined): string => (bytes === undefined || !Number.isFinite(bytes) ? '–' : `${(bytes / GiB).toFixed(2)} GiB`);
const num = (v: number | undefined, digits = 2): string => (v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits));
const ms = (v: number | undefined): string => (v === undefined || !Number.isFinite(v) ? '–' : `${v.toFixed(0)} ms`);
const cell = (text: string | undefined): string => {
  const line = (text ?? '').replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
};
const total = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, b) => a + b, 0);
const verbs = (requests: Readonly<Record<string, number>>): string =>
  Object.entries(requests)
    .filter(([, v]) => v !== 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k} ${count(v)}`)
    .join(', ') || '0';
const table = (header: readonly string[], rows: readonly (readonly string[])[]): string =>
  [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');

/** Requests other than watches, of a by-verb count ("GET 3", "LIST secrets 2"…): what polling would show as. */
export function nonWatch(requests: Readonly<Record<string, number>>): number {
  return Object.entries(requests)
    .filter(([key]) => key.split(' ')[0] !== 'WATCH')
    .reduce((a, [, v]) => a + v, 0);
}

/** The highest VmHWM of the controller processes; undefined when none was read. */
export function controllerPeak(r: ScaleResult): number | undefined {
  const peaks = r.controllers.map((c) => c.peakRssBytes).filter((v): v is number => v !== undefined && Number.isFinite(v));
  return peaks.length > 0 ? Math.max(...peaks) : undefined;
}

/** Issue 18's scale targets, judged from the run (noted when it ran at another N than 100,000). */
export function evaluateScaleTargets(r: ScaleResult, latencyMs: number): TargetVerdict[] {
  const at = r.n === SCALE_TARGET_N ? '' : ` (at N=${count(r.n)}; the target is for ${count(SCALE_TARGET_N)})`;
  const verdicts: TargetVerdict[] = [];
  const push = (target: string, figure: string, status: TargetStatus): void => {
    verdicts.push({ target, figure: figure === '–' ? figure : `${figure}${at}`, status });
  };

  const cold = r.cold;
  {
    const target = `${count(SCALE_TARGET_N)} UserGroups converge on one replica`;
    if (!cold) push(target, '–', r.ok ? 'not run' : 'failed');
    else if (!cold.ok)
      push(target, `failed after ${s(cold.convergeMs)}: ${cell(cold.error)} (${count(cold.ready)} Ready, ${count(cold.secrets)} Secrets)`, 'failed');
    else
      push(
        target,
        `all ${count(cold.n)} Ready with their Secrets in ${s(cold.convergeMs)} (${num(cold.n / (cold.convergeMs / 1000), 0)} groups/s); ${count(cold.verified)} Secrets hold the service's token`,
        'met',
      );
  }
  {
    const target = 'restart over the synced groups: 0 service calls';
    const x = r.restart?.result;
    if (!x) push(target, '–', 'not run');
    else if (!x.ok) push(target, `failed: ${cell(x.error)}; ${count(x.serviceCalls)} service calls`, 'failed');
    else
      push(
        target,
        `${count(x.serviceCalls)} service calls; caches synced in ${s(x.cachesSyncedMs)}, all re-observed in ${s(x.reobservedMs)}`,
        x.serviceCalls === 0 ? 'met' : 'missed',
      );
  }
  const steady = r.steady;
  {
    const target = 'steady state: 0 service calls';
    const x = steady?.result;
    if (!x) push(target, '–', 'not run');
    else if (!x.ok) push(target, `failed: ${cell(x.error)}; ${count(x.serviceCalls)} service calls`, 'failed');
    else push(target, `${count(x.serviceCalls)} service calls in ${num(x.minutes, 1)} min`, x.serviceCalls === 0 ? 'met' : 'missed');
  }
  {
    const target = 'steady state: no polling (only watches; no LIST or GET repeated)';
    const x = steady?.result;
    if (!steady || !x) push(target, '–', 'not run');
    else {
      const controller = nonWatch(x.controller.kubeRequests);
      const apiserver = nonWatch(steady.apiserverRequests);
      const figure =
        `controller: ${count(controller)} requests besides ${count(x.controller.kubeRequests['WATCH'] ?? 0)} watch opens; ` +
        `apiserver, on UserGroups, Secrets, Events and the usergroup.dev kinds: ${verbs(steady.apiserverRequests)} in ${num(x.minutes, 1)} min`;
      if (!x.ok) push(target, `failed: ${cell(x.error)}; ${figure}`, 'failed');
      else push(target, figure, controller === 0 && apiserver === 0 ? 'met' : 'missed');
    }
  }
  {
    const target = `controller peak RSS ≤ ${SCALE_RSS_TARGET_MIB} MiB over the whole run`;
    const peak = controllerPeak(r);
    if (peak === undefined) push(target, '–', cold ? 'failed' : 'not run');
    else
      push(
        target,
        `${mib(peak)} (${r.controllers.map((c) => `${c.process} ${mib(c.peakRssBytes)}`).join(', ')})`,
        peak <= SCALE_RSS_TARGET_MIB * MiB ? 'met' : 'missed',
      );
  }
  {
    const target = `rotation p99 ≤ ${SCALE_ROTATION_P99_TARGET_MS / 1000} s during steady state`;
    const x = r.rotation;
    const latency = latencyMs === 20 ? '' : `, at ${latencyMs} ms service latency (the target's is 20 ms)`;
    if (!x) push(target, '–', 'not run');
    else if (!x.ok || x.p99Ms === undefined) push(target, `failed: ${cell(x.error)}; ${x.completed}/${x.requested} completed`, 'failed');
    else
      push(
        target,
        `p99 ${s(x.p99Ms)}, p50 ${s(x.p50Ms)}, max ${s(x.maxMs)} over ${x.requested} rotations requested at once${latency}`,
        x.p99Ms <= SCALE_ROTATION_P99_TARGET_MS ? 'met' : 'missed',
      );
  }
  return verdicts;
}

/** The reproduce command of a scale run with these options. */
export function scaleCommand(o: BenchOptions, defaults: BenchOptions): string {
  const parts = [
    'npm run bench --',
    `--phases ${o.phases.join(',')}`,
    `--scale-n ${o.scaleN}`,
    `--scale-steady-minutes ${o.scaleSteadyMinutes}`,
    `--rotations ${o.rotations}`,
    `--latency-ms ${o.latencyMs}`,
    `--concurrency ${o.concurrency}`,
    `--apply-parallelism ${o.applyParallelism}`,
  ];
  if (o.serviceQps !== defaults.serviceQps) parts.push(`--service-qps ${o.serviceQps}`);
  if (o.phaseTimeoutS !== defaults.phaseTimeoutS) parts.push(`--phase-timeout-s ${o.phaseTimeoutS}`);
  if (o.etcdQuotaGiB !== undefined) parts.push(`--etcd-quota-gib ${o.etcdQuotaGiB}`);
  if (o.controllerLogLevel !== defaults.controllerLogLevel) parts.push(`--controller-log-level ${o.controllerLogLevel}`);
  if (o.controllerNodeFlags) parts.push(`--controller-node-flags "${o.controllerNodeFlags.join(' ')}"`);
  if (o.outDir !== defaults.outDir) parts.push(`--out ${o.outDir}`);
  return parts.join(' ');
}

/** min / max of the RSS samples, with the first and last. */
function rssRange(samples: ScaleSteady['rssSamples']): string {
  if (samples.length === 0) return '–';
  const values = samples.map((x) => x[1]);
  return `${mib(values[0])} / ${mib(Math.min(...values))} / ${mib(Math.max(...values))} / ${mib(values[values.length - 1])}`;
}

/** scale.md: the machine, the targets (met or missed), then the raw figures of each step. */
export function renderScaleMarkdown(report: ScaleReport): string {
  const r = report.scale;
  const e = report.environment;
  const o = report.options;
  const out: string[] = [`# Scale: ${count(r.n)} UserGroups on one replica`, ''];
  out.push(
    `${report.startedAt} → ${report.finishedAt}. Machine: ${e.cpus} CPUs, ${gib(e.memoryBytes)} RAM; Node ${e.node}; Kubernetes ${e.kubernetes} ` +
      `(etcd ${e.etcd}, quota ${r.etcdQuotaBytes !== undefined ? gib(r.etcdQuotaBytes) : "etcd's default"}); load average at start ` +
      `${e.loadAverageStart.map((l) => l.toFixed(2)).join(' ')}, at end ${e.loadAverageEnd.map((l) => l.toFixed(2)).join(' ')}.`,
    '',
    `Service latency ${o.latencyMs} ms; one controller replica, leader election off: \`${Object.entries(report.controllerEnv)
      .map(([k, v]) => `${k}=${v} `)
      .join('')}node ${[...report.controllerNodeFlags, 'dist/cli/main.js', 'run', ...report.controllerFlags].join(' ')}\`; ` +
      `UserGroups applied ${o.applyParallelism} at a time; each step's timeout ${s(r.timeoutMs)}.`,
    '',
  );
  if (report.error) out.push(`**The run stopped early:** ${cell(report.error)}`, '');
  if (r.error) out.push(`**The phase stopped early:** ${cell(r.error)}`, '');

  out.push('## Targets', '');
  out.push(
    table(
      ['target', 'figure', 'status'],
      evaluateScaleTargets(r, o.latencyMs).map((v) => [v.target, v.figure, v.status === 'met' ? 'met' : `**${v.status}**`]),
    ),
    '',
  );

  out.push('## Figures', '');
  const c = r.cold;
  if (c) {
    out.push(
      'Cold convergence: a fresh namespace and an idle controller, then the UserGroups applied concurrently; until every one is Ready with its Secret.',
      '',
    );
    out.push(
      table(
        [
          'N',
          'converged',
          'groups/s',
          'applies done',
          'Secrets verified',
          'service calls',
          'controller CPU',
          'peak RSS',
          'RSS / V8 heap used at end',
          'controller apiserver requests',
          'means: reconcile / service call / queue wait',
        ],
        [
          [
            count(c.n),
            c.ok ? s(c.convergeMs) : `failed: ${cell(c.error)} (${count(c.ready)} Ready, ${count(c.secrets)} Secrets)`,
            c.ok ? num(c.n / (c.convergeMs / 1000), 0) : '–',
            s(c.applyMs),
            count(c.verified),
            count(c.serviceCalls),
            c.controller.cpuSeconds !== undefined ? `${num(c.controller.cpuSeconds, 1)} s` : '–',
            mib(c.controller.peakRssBytes),
            `${mib(c.controller.rssBytes)} / ${mib(c.controller.heap?.usedBytes)}`,
            verbs(c.controller.kubeRequests),
            c.controller.means
              ? `${ms(c.controller.means.reconcileMs)} / ${ms(c.controller.means.serviceCallMs)} / ${ms(c.controller.means.queueWaitMs)}`
              : '–',
          ],
        ],
      ),
      '',
    );
    if (r.convergenceRelists) out.push(`The convergence watches fell behind ${r.convergenceRelists} times (410) and were replaced by paged lists.`, '');
  }
  const rs = r.restart;
  if (rs) {
    const x = rs.result;
    out.push(
      'Restart: the controller stopped (SIGTERM) and a new one started over the synced groups; the window runs to every group reconciled once with an empty queue, plus 2 s.',
      '',
    );
    out.push(
      table(
        [
          'caches synced',
          're-observed',
          'service calls',
          'reconciles',
          'controller requests',
          'apiserver requests in the window',
          'watches opened',
          'CPU',
          'peak RSS',
          'status',
        ],
        [
          [
            s(x.cachesSyncedMs),
            s(x.reobservedMs),
            count(x.serviceCalls),
            verbs(x.controller.reconciles),
            verbs(x.controller.kubeRequests),
            `${verbs(rs.apiserverRequests)} (${count(total(rs.apiserverRequests))})`,
            verbs(rs.openedWatches),
            x.controller.cpuSeconds !== undefined ? `${num(x.controller.cpuSeconds, 1)} s` : '–',
            mib(x.controller.peakRssBytes),
            x.ok ? 'ok' : `failed: ${cell(x.error)}`,
          ],
        ],
      ),
      '',
    );
  }
  const st = r.steady;
  if (st) {
    const x = st.result;
    out.push('Steady state: nothing changes; the restarted controller over the synced groups.', '');
    out.push(
      table(
        [
          'minutes',
          'service calls',
          'controller requests',
          'apiserver requests in the window',
          'watches opened',
          'controller CPU',
          'RSS first / min / max / last',
          'status',
        ],
        [
          [
            num(x.minutes, 1),
            count(x.serviceCalls),
            verbs(x.controller.kubeRequests),
            verbs(st.apiserverRequests),
            verbs(st.openedWatches),
            x.controller.cpuSeconds !== undefined ? `${num(x.controller.cpuSeconds)} s` : '–',
            rssRange(st.rssSamples),
            x.ok ? 'ok' : `failed: ${cell(x.error)}`,
          ],
        ],
      ),
      '',
    );
  }
  const rot = r.rotation;
  if (rot) {
    out.push(
      'Rotation: rotations requested at once (annotation patches) after the steady window; each from its patch to the watch event of its Secret with the new token.',
      '',
    );
    out.push(
      table(
        ['requested at once', 'completed', 'p50', 'p99', 'max', 'rotations at the service', 'status'],
        [
          [
            String(rot.requested),
            String(rot.completed),
            s(rot.p50Ms),
            s(rot.p99Ms),
            s(rot.maxMs),
            String(rot.serviceRotations),
            rot.ok ? 'ok' : `failed: ${cell(rot.error)}`,
          ],
        ],
      ),
      '',
    );
  }
  if (r.controllers.length > 0 || r.processes.length > 0) {
    out.push("Memory and CPU (VmHWM; utime + stime; the control plane's and the bench's since they started):", '');
    out.push(
      table(
        ['process', 'peak RSS', 'RSS at end', 'CPU'],
        [...r.controllers, ...r.processes].map((p) => [
          p.process,
          mib(p.peakRssBytes),
          mib(p.rssBytes),
          p.cpuSeconds !== undefined ? `${num(p.cpuSeconds, 1)} s` : '–',
        ]),
      ),
      '',
    );
  }
  const context: string[] = [];
  if (r.etcdDb) context.push(`etcd database ${gib(r.etcdDb.dbSizeBytes)} (${gib(r.etcdDb.inUseBytes)} in use)`);
  if (r.storedObjects && Object.keys(r.storedObjects).length > 0)
    context.push(
      `objects stored: ${Object.entries(r.storedObjects)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${k} ${count(v)}`)
        .join(', ')}`,
    );
  if (context.length > 0) out.push(`At the end: ${context.join('; ')}.`, '');
  out.push(`Reproduce: \`${report.command}\``, '');
  return out.join('\n');
}
