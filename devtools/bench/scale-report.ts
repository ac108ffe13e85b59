/*
 * The `scale` phase's results (one replica over --scale-n UserGroups, 100,000 for the scale targets), the targets
 * judged from them and scale.md: pure functions of the results (unit-tested in test/unit/bench-scale.test.ts).
 */
import { scaleNamespaceCount, type BenchOptions } from './options.js';
import type { ColdResult, PhaseOutcome, RestartResult, RotationResult, SteadyResult, TargetStatus, TargetVerdict } from './report.js';

/** The size the scale targets are stated for. */
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
  /** Which replica of a sharded run (1…S); absent with one replica and for the other processes. */
  readonly shard?: number;
}

/** One replica's figures over one step of a sharded run, from its /proc and its own /metrics. */
export interface ShardFigures {
  /** 1…S, in spawn order (the restarted replica i replaces replica i). */
  readonly shard: number;
  /** VmHWM at the end of the step (since the process started). */
  readonly peakRssBytes: number | undefined;
  readonly rssBytes: number | undefined;
  /** nodejs_heap_size_used_bytes at the end of the step: how much of the RSS is V8's live heap. */
  readonly heapUsedBytes?: number | undefined;
  /** utime + stime over the step. */
  readonly cpuSeconds: number | undefined;
  /** usergroup_usergroups summed at the end of the step: the UserGroups it holds. */
  readonly userGroups: number | undefined;
  /** usergroup_shard_owned_namespaces at the end of the step. */
  readonly ownedNamespaces: number | undefined;
  /** usergroup_shard_members at the end of the step: the live replicas it sees. */
  readonly members: number | undefined;
  /** usergroup_shard_rebalances_total over the step. */
  readonly rebalances: number | undefined;
  /** usergroup_service_requests_total over the step: its own calls (the simulator counts all replicas as one API key). */
  readonly serviceCalls: number | undefined;
  /** usergroup_reconcile_total over the step, by result. */
  readonly reconciles: Readonly<Record<string, number>>;
  /** usergroup_kube_requests_total over the step, by "VERB resource" (Lease heartbeats are "PUT leases"). */
  readonly kubeRequests: Readonly<Record<string, number>>;
}

/**
 * A scale run over several namespaces, and with several replicas sharing them (--shard-by-namespace, a Lease each).
 * The step results of ScaleResult are then over all replicas (CPU, calls and requests summed, peak RSS the highest);
 * these are each replica's.
 */
export interface ShardedScale {
  readonly shards: number;
  readonly namespaces: number;
  /** Where the replicas keep their Leases (also the API-key Secret's namespace); absent with one replica. */
  readonly leaseNamespace?: string;
  /** From spawning the first replicas until each saw all S (usergroup_shard_members), before any UserGroup existed. */
  readonly settledMs?: number;
  readonly cold?: readonly ShardFigures[];
  readonly restart?: readonly ShardFigures[];
  readonly steady?: readonly ShardFigures[];
  readonly rotation?: readonly ShardFigures[];
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
  /** Several namespaces or replicas (--scale-namespaces, --scale-shards): each replica's figures. */
  readonly sharding?: ShardedScale;
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
  readonly options: Pick<BenchOptions, 'latencyMs' | 'concurrency' | 'serviceQps' | 'applyParallelism' | 'rotations'> &
    Partial<Pick<BenchOptions, 'scaleShards' | 'scaleNamespaces'>>;
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

/** A "VERB resource" key of Lease requests: a replica's heartbeats (PUT every --retry-period) and their reads. */
const isLease = (key: string): boolean => key.split(' ')[1] === 'leases';

/** The Lease requests of a by-"VERB resource" count: heartbeats, not polling. */
export function leaseRequests(requests: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(Object.entries(requests).filter(([key]) => isLease(key)));
}

/** Requests other than watches and Lease heartbeats: what polling would show as in a sharded replica. */
export function pollingRequests(requests: Readonly<Record<string, number>>): number {
  return nonWatch(Object.fromEntries(Object.entries(requests).filter(([key]) => !isLease(key))));
}

/** Each replica's highest VmHWM over the run (its cold and its restarted process), by shard 1…S. */
export function shardPeaks(r: ScaleResult): Map<number, number> {
  const peaks = new Map<number, number>();
  for (const c of r.controllers)
    if (c.shard !== undefined && c.peakRssBytes !== undefined && Number.isFinite(c.peakRssBytes))
      peaks.set(c.shard, Math.max(peaks.get(c.shard) ?? 0, c.peakRssBytes));
  return peaks;
}

/** The scale targets, judged from the run (noted when it ran at another N than 100,000); per shard with several replicas. */
export function evaluateScaleTargets(r: ScaleResult, latencyMs: number): TargetVerdict[] {
  if (r.sharding && r.sharding.shards > 1) return evaluateShardedTargets(r, r.sharding, latencyMs);
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

/**
 * The targets with several replicas (the issue's fallback: "shard, and show the same figures per shard"): the
 * groups converge over all of them; restart and steady calls are counted at the simulator for all (one API key)
 * and shown per replica from its own metrics; no polling and peak RSS are judged for each replica. A replica's
 * Lease renewals are heartbeats, not polling: counted apart and shown.
 */
function evaluateShardedTargets(r: ScaleResult, sh: ShardedScale, latencyMs: number): TargetVerdict[] {
  const at = r.n === SCALE_TARGET_N ? '' : ` (at N=${count(r.n)}; the target is for ${count(SCALE_TARGET_N)})`;
  const verdicts: TargetVerdict[] = [];
  const push = (target: string, figure: string, status: TargetStatus): void => {
    verdicts.push({ target, figure: figure === '–' ? figure : `${figure}${at}`, status });
  };
  const shards = Array.from({ length: sh.shards }, (_, i) => i + 1);
  const perShard = (figures: readonly ShardFigures[] | undefined, value: (f: ShardFigures) => string): string =>
    figures && figures.length > 0 ? ` (per shard: ${figures.map(value).join(' / ')})` : '';
  const maybe = (v: number | undefined): string => (v === undefined ? '?' : count(v));

  const cold = r.cold;
  {
    const target = `${count(SCALE_TARGET_N)} UserGroups converge on ${sh.shards} replicas sharing ${count(sh.namespaces)} namespaces`;
    const held = perShard(sh.cold, (f) => maybe(f.userGroups)).replace('per shard', 'held per shard');
    if (!cold) push(target, '–', r.ok ? 'not run' : 'failed');
    else if (!cold.ok)
      push(target, `failed after ${s(cold.convergeMs)}: ${cell(cold.error)} (${count(cold.ready)} Ready, ${count(cold.secrets)} Secrets)${held}`, 'failed');
    else
      push(
        target,
        `all ${count(cold.n)} Ready with their Secrets in ${s(cold.convergeMs)} (${num(cold.n / (cold.convergeMs / 1000), 0)} groups/s); ${count(cold.verified)} Secrets hold the service's token${held}`,
        'met',
      );
  }
  {
    const target = 'restart of every replica over the synced groups: 0 service calls';
    const x = r.restart?.result;
    const calls = perShard(sh.restart, (f) => maybe(f.serviceCalls));
    if (!x) push(target, '–', 'not run');
    else if (!x.ok) push(target, `failed: ${cell(x.error)}; ${count(x.serviceCalls)} service calls${calls}`, 'failed');
    else
      push(
        target,
        `${count(x.serviceCalls)} service calls${calls}; caches synced in ${s(x.cachesSyncedMs)}, all re-observed in ${s(x.reobservedMs)}`,
        x.serviceCalls === 0 ? 'met' : 'missed',
      );
  }
  const steady = r.steady;
  {
    const target = 'steady state: 0 service calls';
    const x = steady?.result;
    const calls = perShard(sh.steady, (f) => maybe(f.serviceCalls));
    if (!x) push(target, '–', 'not run');
    else if (!x.ok) push(target, `failed: ${cell(x.error)}; ${count(x.serviceCalls)} service calls${calls}`, 'failed');
    else push(target, `${count(x.serviceCalls)} service calls${calls} in ${num(x.minutes, 1)} min`, x.serviceCalls === 0 ? 'met' : 'missed');
  }
  for (const i of shards) {
    const target = `steady state, shard ${i}: no polling (only watches; its Lease's heartbeats counted apart)`;
    const x = steady?.result;
    const f = sh.steady?.find((g) => g.shard === i);
    if (!x || !f) push(target, '–', steady ? 'failed' : 'not run');
    else {
      const polling = pollingRequests(f.kubeRequests);
      const leases = leaseRequests(f.kubeRequests);
      const figure =
        `${count(polling)} requests besides ${count(sumWhere(f.kubeRequests, 'WATCH'))} watch opens; ` +
        `Lease heartbeats: ${verbs(leases)} (${num(total(leases) / Math.max(x.minutes, 1e-6), 1)}/min) in ${num(x.minutes, 1)} min`;
      if (!x.ok) push(target, `failed: ${cell(x.error)}; ${figure}`, 'failed');
      else push(target, figure, polling === 0 ? 'met' : 'missed');
    }
  }
  {
    const target = 'steady state: no polling at the apiserver (all replicas; UserGroups, Secrets, Events, the usergroup.dev kinds)';
    const x = steady?.result;
    if (!steady || !x) push(target, '–', 'not run');
    else {
      const figure = `${verbs(steady.apiserverRequests)} in ${num(x.minutes, 1)} min`;
      if (!x.ok) push(target, `failed: ${cell(x.error)}; ${figure}`, 'failed');
      else push(target, figure, nonWatch(steady.apiserverRequests) === 0 ? 'met' : 'missed');
    }
  }
  const peaks = shardPeaks(r);
  for (const i of shards) {
    const target = `shard ${i}: controller peak RSS ≤ ${SCALE_RSS_TARGET_MIB} MiB over the whole run`;
    const peak = peaks.get(i);
    const processes = r.controllers.filter((c) => c.shard === i);
    if (peak === undefined) push(target, '–', cold ? 'failed' : 'not run');
    else
      push(
        target,
        `${mib(peak)} (${processes.map((c) => `${c.process} ${mib(c.peakRssBytes)}`).join(', ')})`,
        peak <= SCALE_RSS_TARGET_MIB * MiB ? 'met' : 'missed',
      );
  }
  {
    const target = `rotation p99 ≤ ${SCALE_ROTATION_P99_TARGET_MS / 1000} s during steady state`;
    const x = r.rotation;
    const latency = latencyMs === 20 ? '' : `, at ${latencyMs} ms service latency (the target's is 20 ms)`;
    const rotated = perShard(sh.rotation, (f) => maybe(f.serviceCalls)).replace('per shard', 'service calls per shard');
    if (!x) push(target, '–', 'not run');
    else if (!x.ok || x.p99Ms === undefined) push(target, `failed: ${cell(x.error)}; ${x.completed}/${x.requested} completed`, 'failed');
    else
      push(
        target,
        `p99 ${s(x.p99Ms)}, p50 ${s(x.p50Ms)}, max ${s(x.maxMs)} over ${x.requested} rotations requested at once in ${count(sh.namespaces)} namespaces${rotated}${latency}`,
        x.p99Ms <= SCALE_ROTATION_P99_TARGET_MS ? 'met' : 'missed',
      );
  }
  return verdicts;
}

/** The sum of a by-"VERB resource" count over one verb. */
function sumWhere(requests: Readonly<Record<string, number>>, verb: string): number {
  return Object.entries(requests)
    .filter(([key]) => key.split(' ')[0] === verb)
    .reduce((a, [, v]) => a + v, 0);
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
  if (o.scaleShards !== 1 || scaleNamespaceCount(o) !== 1) parts.push(`--scale-shards ${o.scaleShards}`, `--scale-namespaces ${scaleNamespaceCount(o)}`);
  if (o.serviceQps !== defaults.serviceQps) parts.push(`--service-qps ${o.serviceQps}`);
  if (o.phaseTimeoutS !== defaults.phaseTimeoutS) parts.push(`--phase-timeout-s ${o.phaseTimeoutS}`);
  if (o.etcdQuotaGiB !== undefined) parts.push(`--etcd-quota-gib ${o.etcdQuotaGiB}`);
  if (o.controllerLogLevel !== defaults.controllerLogLevel) parts.push(`--controller-log-level ${o.controllerLogLevel}`);
  if (o.controllerNodeFlags) parts.push(`--controller-node-flags "${o.controllerNodeFlags.join(' ')}"`);
  if (o.outDir !== defaults.outDir) parts.push(`--out ${o.outDir}`);
  return parts.join(' ');
}

/** "one replica", "one replica (20 namespaces)", "4 replicas sharded by namespace (100 namespaces)". */
function replicas(sh: ShardedScale | undefined): string {
  if (!sh) return 'one replica';
  const spread = `${count(sh.namespaces)} namespaces`;
  return sh.shards > 1 ? `${sh.shards} replicas sharded by namespace (${spread})` : `one replica (${spread})`;
}

/** How the controllers ran, for the introduction. */
function deployment(sh: ShardedScale | undefined): string {
  if (!sh) return 'one controller replica, leader election off';
  if (sh.shards === 1)
    return `one controller replica watching the whole cluster, leader election off, the groups spread over ${count(sh.namespaces)} namespaces`;
  return (
    `${sh.shards} controller replicas, each with its own Lease in ${sh.leaseNamespace ?? '?'}, sharing ${count(sh.namespaces)} namespaces ` +
    `(rendezvous hashing), spawned together${sh.settledMs !== undefined ? ` and settled (each seeing all ${sh.shards}) in ${s(sh.settledMs)}` : ''} before the first UserGroup`
  );
}

/** Each replica's figures per step: what it held, what it cost, what it asked the apiserver (by verb and resource). */
function shardSection(sh: ShardedScale): string[] {
  const steps: [string, readonly ShardFigures[] | undefined][] = [
    ['cold', sh.cold],
    ['restart', sh.restart],
    ['steady', sh.steady],
    ['rotation', sh.rotation],
  ];
  const rows = steps.flatMap(([step, figures]) =>
    (figures ?? []).map((f) => [
      step,
      String(f.shard),
      f.userGroups !== undefined ? count(f.userGroups) : '–',
      f.ownedNamespaces !== undefined ? count(f.ownedNamespaces) : '–',
      f.members !== undefined ? String(f.members) : '–',
      f.rebalances !== undefined ? String(f.rebalances) : '–',
      f.serviceCalls !== undefined ? count(f.serviceCalls) : '–',
      f.cpuSeconds !== undefined ? `${num(f.cpuSeconds, 1)} s` : '–',
      mib(f.peakRssBytes),
      mib(f.rssBytes),
      mib(f.heapUsedBytes),
      verbs(f.reconciles),
      verbs(f.kubeRequests),
      verbs(leaseRequests(f.kubeRequests)),
    ]),
  );
  return [
    'Per shard: each replica at the end of each step (UserGroups held: its usergroup_usergroups; namespaces owned and members seen: its ' +
      'usergroup_shard_* gauges; rebalances, service calls, CPU, reconciles and apiserver requests over the step; peak RSS: VmHWM of the process so far). ' +
      'The step tables above are over all replicas: CPU, calls and requests summed, peak RSS the highest. Lease requests are heartbeats (PUT every --retry-period), not polling.',
    '',
    table(
      [
        'step',
        'shard',
        'UserGroups held',
        'namespaces owned',
        'members',
        'rebalances',
        'service calls',
        'CPU',
        'peak RSS',
        'RSS at end',
        'V8 heap used at end',
        'reconciles',
        'apiserver requests',
        'of them Lease',
      ],
      rows,
    ),
  ];
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
  const sh = r.sharding;
  const out: string[] = [`# Scale: ${count(r.n)} UserGroups on ${replicas(sh)}`, ''];
  out.push(
    `${report.startedAt} → ${report.finishedAt}. Machine: ${e.cpus} CPUs, ${gib(e.memoryBytes)} RAM; Node ${e.node}; Kubernetes ${e.kubernetes} ` +
      `(etcd ${e.etcd}, quota ${r.etcdQuotaBytes !== undefined ? gib(r.etcdQuotaBytes) : "etcd's default"}); load average at start ` +
      `${e.loadAverageStart.map((l) => l.toFixed(2)).join(' ')}, at end ${e.loadAverageEnd.map((l) => l.toFixed(2)).join(' ')}.`,
    '',
    `Service latency ${o.latencyMs} ms; ${deployment(sh)}: \`${Object.entries(report.controllerEnv)
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
      sh
        ? `Cold convergence: ${count(sh.namespaces)} fresh namespaces and ${sh.shards > 1 ? `${sh.shards} idle replicas, settled,` : 'an idle controller'} then the UserGroups applied concurrently, spread over the namespaces; until every one is Ready with its Secret.`
        : 'Cold convergence: a fresh namespace and an idle controller, then the UserGroups applied concurrently; until every one is Ready with its Secret.',
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
      sh && sh.shards > 1
        ? `Restart: all ${sh.shards} replicas stopped (SIGTERM) and ${sh.shards} new ones started over the synced groups; the window runs to every group reconciled once (summed over the replicas) with every queue empty and each replica seeing ${sh.shards}, plus 2 s.`
        : 'Restart: the controller stopped (SIGTERM) and a new one started over the synced groups; the window runs to every group reconciled once with an empty queue, plus 2 s.',
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
    out.push(
      sh && sh.shards > 1
        ? `Steady state: nothing changes; the ${sh.shards} restarted replicas over the synced groups (RSS: the highest replica's at each sample).`
        : 'Steady state: nothing changes; the restarted controller over the synced groups.',
      '',
    );
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
  if (sh && (sh.cold ?? sh.restart ?? sh.steady ?? sh.rotation)) out.push(...shardSection(sh), '');
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
