import { apiserverMetrics, storedObjects } from '../apiserver-requests.js';
import type { BenchCluster } from '../cluster.js';
import { ConvergenceTracker } from '../convergence.js';
import { BenchController, deltaBy, PromSamples, type ShardFlags } from '../controller.js';
import { MiB, ProcWatcher } from '../proc.js';
import { say, startProgress } from '../progress.js';
import type { ColdResult, ControllerFigures, RestartResult, RotationResult, SteadyResult } from '../report.js';
import type { ProcessMemory, ScaleResult, ScaleRestart, ScaleSteady, ShardedScale, ShardFigures } from '../scale-report.js';
import { forEachBounded, pollUntil, sleep } from '../stats.js';
import { coldFailed, heapOf, histogramMeans, reconcilesByResult, verifySecrets, type ControllerSettings } from './cold.js';
import { restartFailed } from './restart.js';
import { rotationFailed, runRotation } from './rotation.js';
import { memoryOf, windowCounts, type ScalePhaseOptions } from './scale.js';

export interface ShardedScaleOptions extends ScalePhaseOptions {
  /** Controller replicas (--shard-by-namespace when more than one). */
  readonly shards: number;
  /** Namespaces the N UserGroups are spread over. */
  readonly namespaces: number;
}

/** The shard group: --leader-election-id, and the usergroup.dev/shard-group label of the replicas' Leases. */
export const SHARD_GROUP = 'usergroup-bench-scale';
/** How long the replicas may take to see each other (a Lease each, renewed every 2 s by default). */
const SETTLE_TIMEOUT_MS = 120_000;
const RSS_SAMPLE_MS = 5000;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The replicas of one step: spawned together, stopped together. */
interface Replicas {
  readonly controllers: readonly BenchController[];
  /** Run with --shard-by-namespace: their usergroup_shard_* gauges mean something (without, they read 0). */
  readonly sharded: boolean;
}

/**
 * The `scale` phase over M namespaces and S replicas: the same steps as with one (cold convergence, restart,
 * steady window, rotations), with every replica's figures read from its own /proc and /metrics. The namespaces
 * exist, and with S > 1 the replicas have seen each other (usergroup_shard_members = S on each), before the first
 * UserGroup, so the cold start measures convergence and not the shares settling. The restart stops every replica and
 * starts S new ones. Like runScale it leaves its namespaces to the control plane's stop.
 */
export async function runShardedScale(cluster: BenchCluster, o: ShardedScaleOptions): Promise<ScaleResult> {
  const { n, shards } = o;
  const started = performance.now();
  const step = (text: string): void => say(`[scale N=${n} S=${shards} M=${o.namespaces}] ${text}`);
  const watched: [string, number | undefined][] = [
    ['kube-apiserver', cluster.cp.apiserver.pid],
    ['etcd', cluster.cp.etcd.pid],
    ['kube-controller-manager', cluster.cp.controllerManager.pid],
    ['bench (simulator + drivers)', process.pid],
  ];
  const watchers = watched.flatMap(([name, pid]) => (pid !== undefined ? [[name, new ProcWatcher(pid, 10_000)] as const] : []));
  let sharding: ShardedScale = { shards, namespaces: o.namespaces };
  let result: ScaleResult = {
    n,
    ok: true,
    steadyMinutes: o.steadyMinutes,
    timeoutMs: o.timeoutMs,
    etcdQuotaBytes: o.etcdQuotaBytes,
    controllers: [],
    processes: [],
    sharding,
  };
  const memories: ProcessMemory[] = [];
  const live: { cold?: Replicas; restarted?: Replicas } = {};
  /** Notes why the phase ended early; returns false, for `return fail(…)` in the steps. */
  const fail = (error: string): false => {
    result = { ...result, ok: false, error };
    return false;
  };

  const steps = async (): Promise<boolean> => {
    step(`${o.namespaces} namespaces and the connection`);
    const home = await cluster.createNamespace('bench-scale-control');
    const namespaces = await createNamespaces(cluster, o.namespaces);
    const service = await cluster.connectToAll(home, namespaces);
    const shard: ShardFlags | undefined = shards > 1 ? { leaseNamespace: home, group: SHARD_GROUP } : undefined;
    if (shard) sharding = { ...sharding, leaseNamespace: home };
    const spawn = (label: string): Promise<Replicas> => spawnReplicas(cluster, shards, o.settings, service, shard, label);

    step(`${shards} replica${shards > 1 ? 's' : ''}, waiting for their caches${shard ? ' and for each to see all' : ''}`);
    const spawnedAt = performance.now();
    const cold = await spawn('cold');
    live.cold = cold;
    await waitSettled(cold, shards, SETTLE_TIMEOUT_MS);
    sharding = { ...sharding, settledMs: performance.now() - spawnedAt };

    step(
      `cold convergence of ${n.toLocaleString('en-US')} UserGroups over ${o.namespaces} namespaces (each step times out after ${Math.round(o.timeoutMs / 1000)} s)`,
    );
    const c = await coldSharded(cluster, namespaces, n, cold, o).catch((err: unknown) => ({ result: coldFailed(n, message(err)), shards: [] }));
    sharding = { ...sharding, cold: c.shards };
    result = { ...result, cold: c.result };
    if (!c.result.ok) return fail(`cold convergence failed: ${c.result.error ?? ''}`);

    // As runScale: the old replicas stop before the first reading, so that the apiserver counts their watches now.
    await stopAll(cold, 'cold convergence', memories);
    live.cold = undefined;
    await sleep(1000);
    let before = await apiserverMetrics(cluster);
    step(`restart of all ${shards} over the synced groups`);
    const r = await restartSharded(cluster, n, shards, spawn, o.timeoutMs, (x) => (live.restarted = x)).catch((err: unknown) => ({
      result: restartFailed(n, message(err)),
      shards: [],
    }));
    const restart: ScaleRestart = { result: r.result, ...(await windowCounts(cluster, before)) };
    sharding = { ...sharding, restart: r.shards };
    result = { ...result, restart };
    const restarted = live.restarted;
    if (!restart.result.ok || !restarted || restarted.controllers.some((x) => x.exited()))
      return fail(`restart failed: ${restart.result.error ?? 'a replica exited'}`);

    step(`steady window of ${o.steadyMinutes} min`);
    before = await apiserverMetrics(cluster);
    const st = await steadySharded(cluster, n, restarted, o.steadyMinutes);
    const steady: ScaleSteady = { result: st.result, ...(await windowCounts(cluster, before)), rssSamples: st.rssSamples };
    sharding = { ...sharding, steady: st.shards };
    result = { ...result, steady };
    if (!st.result.ok) return fail(`the steady window failed: ${st.result.error ?? ''}`);

    for (const [i, c] of restarted.controllers.entries()) await o.snapshot?.(c, `scale-steady-${i}`);
    step(`${o.rotations} rotations requested at once over the namespaces`);
    const rot = await rotationSharded(cluster, namespaces, n, restarted, o);
    sharding = { ...sharding, rotation: rot.shards };
    const ok = [c.result, restart.result, steady.result, rot.result].every((x) => x.ok);
    result = { ...result, rotation: rot.result, ok, ...(ok ? {} : { error: 'a step failed (see its figures)' }) };
    return ok;
  };

  try {
    await steps();
  } catch (err) {
    fail(message(err));
  }
  if (live.cold) await stopAll(live.cold, 'cold convergence', memories);
  if (live.restarted) await stopAll(live.restarted, 'restarted (restart, steady, rotation)', memories);
  const processes = watchers.map(([name, w]) => {
    const p = w.sample();
    w.stop();
    return { process: name, peakRssBytes: p?.peakRssBytes, rssBytes: p?.rssBytes, cpuSeconds: p?.cpuSeconds };
  });
  const etcdDb = await cluster.cp.etcdDbSize().catch(() => undefined);
  const stored = await apiserverMetrics(cluster).then(storedObjects, () => undefined);
  result = { ...result, sharding, controllers: memories, processes, ...(etcdDb ? { etcdDb } : {}), ...(stored ? { storedObjects: stored } : {}) };
  step(
    `${result.ok ? 'done' : `FAILED: ${result.error ?? ''}`} after ${((performance.now() - started) / 60_000).toFixed(1)} min; peak RSS per replica ` +
      memories.map((m) => `${m.shard ?? '?'}: ${((m.peakRssBytes ?? NaN) / MiB).toFixed(0)} MiB`).join(', '),
  );
  return result;
}

/** bench-scale-<i>-<random>, i = 0…m-1, created 16 at a time; in the order of i. */
async function createNamespaces(cluster: BenchCluster, m: number): Promise<string[]> {
  const names = new Array<string>(m);
  await forEachBounded(m, 16, async (i) => {
    names[i] = await cluster.createNamespace(`bench-scale-${i}`);
  });
  return names;
}

/** S replicas watching the whole cluster (no --namespaces), each with its own metrics port and log file. */
async function spawnReplicas(
  cluster: BenchCluster,
  shards: number,
  settings: ControllerSettings,
  defaultService: string,
  shard: ShardFlags | undefined,
  label: string,
): Promise<Replicas> {
  const controllers = await Promise.all(
    Array.from({ length: shards }, (_, i) =>
      BenchController.spawn({
        kubeconfigPath: cluster.cp.kubeconfigPath,
        namespace: undefined,
        defaultService,
        concurrency: settings.concurrency,
        serviceQps: settings.serviceQps,
        logLevel: settings.logLevel,
        scheduledRotationsPerMinute: settings.scheduledRotationsPerMinute,
        nodeOptions: settings.nodeOptions,
        nodeFlags: settings.nodeFlags,
        imageEnv: settings.imageEnv,
        logFile: `${settings.logDir}/controller-scale-${label}-shard-${i + 1}.log`,
        shard,
        podName: `bench-shard-${i + 1}`,
      }),
    ),
  );
  return { controllers, sharded: shard !== undefined };
}

/**
 * Every replica ready (caches synced) and, sharded, seeing all S (usergroup_shard_members): before that a newcomer
 * owns nothing, and a cold start would measure the shares settling.
 */
async function waitSettled(replicas: Replicas, shards: number, timeoutMs: number): Promise<void> {
  await Promise.all(replicas.controllers.map((c) => c.waitReady(timeoutMs)));
  if (shards === 1) return;
  await pollUntil(
    `each of ${shards} replicas to see all ${shards} (usergroup_shard_members)`,
    async () => {
      const scrapes = await Promise.all(replicas.controllers.map((c) => scrape(c)));
      const missing = scrapes.findIndex((m) => !m.samples.some((x) => x.name === 'usergroup_shard_members'));
      if (missing >= 0 && scrapes[missing]?.samples.length)
        throw new Error(`replica ${missing + 1} exports no usergroup_shard_members: is dist/ built from the --shard-by-namespace code (npm run build)?`);
      return scrapes.every((m) => m.sum('usergroup_shard_members') === shards) ? true : undefined;
    },
    timeoutMs,
    500,
  );
}

/** Its /metrics, or an empty scrape when it does not answer (exited, busy): a figure left out, not a failed step. */
async function scrape(c: BenchController): Promise<PromSamples> {
  if (c.exited()) throw new Error(`a replica exited:\n${c.logTail()}`);
  return c.metrics().catch(() => new PromSamples([]));
}

/** usergroup_kube_requests_total by "VERB resource" (by verb alone from a controller without the resource label). */
export function kubeByVerbAndResource(m: PromSamples): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of m.samples) {
    if (x.name !== 'usergroup_kube_requests_total') continue;
    const key = [x.labels['verb'] ?? '', x.labels['resource'] ?? ''].filter(Boolean).join(' ');
    out[key] = (out[key] ?? 0) + x.value;
  }
  return out;
}

const has = (m: PromSamples | undefined, name: string): boolean => m?.samples.some((x) => x.name === name) ?? false;

/** One replica's figures over a step: `before` undefined counts from its start. */
export function shardFigures(
  shard: number,
  c: BenchController,
  before: PromSamples | undefined,
  after: PromSamples | undefined,
  cpuBefore: number | undefined,
  sharded = true,
): ShardFigures {
  const sample = c.proc.sample() ?? c.proc.latest;
  const from = before ?? new PromSamples([]);
  const gauge = (name: string): number | undefined => (after && has(after, name) ? after.sum(name) : undefined);
  const counter = (name: string): number | undefined => (after && has(after, name) ? after.sum(name) - from.sum(name) : undefined);
  return {
    shard,
    peakRssBytes: sample?.peakRssBytes,
    rssBytes: sample?.rssBytes,
    heapUsedBytes: gauge('nodejs_heap_size_used_bytes'),
    cpuSeconds: sample ? sample.cpuSeconds - (cpuBefore ?? 0) : undefined,
    userGroups: gauge('usergroup_usergroups') ?? (after ? 0 : undefined),
    ownedNamespaces: sharded ? gauge('usergroup_shard_owned_namespaces') : undefined,
    members: sharded ? gauge('usergroup_shard_members') : undefined,
    rebalances: sharded ? counter('usergroup_shard_rebalances_total') : undefined,
    serviceCalls: counter('usergroup_service_requests_total') ?? (after ? 0 : undefined),
    reconciles: after ? deltaBy(reconcilesByResult(from), reconcilesByResult(after)) : {},
    kubeRequests: after ? deltaBy(kubeByVerbAndResource(from), kubeByVerbAndResource(after)) : {},
  };
}

/** Over all replicas, as the one-replica tables show a controller: CPU, requests and reconciles summed, peak RSS the highest. */
export function combined(figures: readonly ShardFigures[]): ControllerFigures {
  const defined = (xs: (number | undefined)[]): number[] => xs.filter((x): x is number => x !== undefined);
  const peaks = defined(figures.map((f) => f.peakRssBytes));
  const cpu = defined(figures.map((f) => f.cpuSeconds));
  const sum = (records: Readonly<Record<string, number>>[], key: (k: string) => string): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const r of records) for (const [k, v] of Object.entries(r)) out[key(k)] = (out[key(k)] ?? 0) + v;
    return out;
  };
  const rss = defined(figures.map((f) => f.rssBytes));
  return {
    peakRssBytes: peaks.length > 0 ? Math.max(...peaks) : undefined,
    rssBytes: rss.length > 0 ? rss.reduce((a, b) => a + b, 0) : undefined,
    cpuSeconds: cpu.length > 0 ? cpu.reduce((a, b) => a + b, 0) : undefined,
    // By verb, as the one-replica tables: the per-shard table has the resources.
    kubeRequests: sum(
      figures.map((f) => f.kubeRequests),
      (k) => k.split(' ')[0] ?? k,
    ),
    reconciles: sum(
      figures.map((f) => f.reconciles),
      (k) => k,
    ),
  };
}

/** The replicas' scrapes as one: sum() then adds up every replica's samples. */
const pooled = (scrapes: readonly (PromSamples | undefined)[]): PromSamples => new PromSamples(scrapes.flatMap((m) => m?.samples ?? []));

const exitedOne = (replicas: Replicas): BenchController | undefined => replicas.controllers.find((c) => c.exited());

/** Cold convergence over the namespaces, the replicas already settled; as runCold, with every replica's figures. */
async function coldSharded(
  cluster: BenchCluster,
  namespaces: readonly string[],
  n: number,
  replicas: Replicas,
  o: ShardedScaleOptions,
): Promise<{ result: ColdResult; shards: ShardFigures[] }> {
  const cs = replicas.controllers;
  const before = await Promise.all(cs.map((c) => c.metrics()));
  const cpuBefore = cs.map((c) => c.proc.sample()?.cpuSeconds);
  const callsBefore = cluster.serviceCalls();
  const tracker = new ConvergenceTracker(n);
  await tracker.start(cluster, namespaces);
  let applied = 0;
  let applyMs = 0;
  let applyError: string | undefined;
  const progress = startProgress(`scale cold N=${n} S=${cs.length}`, () => {
    const rss = cs.map((c) => (c.proc.latest ? (c.proc.latest.rssBytes / MiB).toFixed(0) : '?')).join('/');
    return `applied ${applied}/${n}, Ready ${tracker.ready.size}, Secrets ${tracker.secrets.size}; replica RSS ${rss} MiB`;
  });
  const started = performance.now();
  const applying = cluster
    .applySpreadUserGroups(namespaces, n, o.applyParallelism, () => applied++)
    .then(
      () => {
        applyMs = performance.now() - started;
      },
      (err: unknown) => {
        applyError = String(err);
      },
    );
  let error: string | undefined;
  try {
    await pollUntil(
      `${n} UserGroups Ready with their Secrets`,
      () => {
        if (applyError) throw new Error(`applying UserGroups failed: ${applyError}`);
        if (tracker.error) throw new Error(tracker.error);
        const exited = exitedOne(replicas);
        if (exited) throw new Error(`a replica exited:\n${exited.logTail()}`);
        return tracker.doneAt;
      },
      o.timeoutMs,
      100,
    );
  } catch (err) {
    error = message(err);
  }
  await applying;
  tracker.stop();
  const convergeMs = (tracker.doneAt ?? performance.now()) - started;
  progress.stop(error ? `FAILED after ${(convergeMs / 1000).toFixed(1)} s: ${error}` : `all ${n} Ready with Secrets in ${(convergeMs / 1000).toFixed(2)} s`);
  const after = await Promise.all(cs.map((c) => c.metrics().catch(() => undefined)));
  const shards = cs.map((c, i) => shardFigures(i + 1, c, before[i], after[i], cpuBefore[i], replicas.sharded));
  const serviceCalls = cluster.serviceCalls() - callsBefore;
  const verified = error ? 0 : await verifySecrets(cluster, namespaces, n);
  if (!error && verified !== n) error = `only ${verified}/${n} Secrets hold the service's current token`;
  const result: ColdResult = {
    n,
    namespace: `${namespaces.length} namespaces`,
    ok: error === undefined,
    ...(error ? { error } : {}),
    convergeMs,
    applyMs,
    ready: tracker.ready.size,
    secrets: tracker.secrets.size,
    verified,
    serviceCalls,
    // The histogram means pooled over the replicas (their samples summed), as one controller's would be.
    controller: { ...combined(shards), means: histogramMeans(pooled(before), pooled(after)), heap: heapOf(pooled(after)) },
  };
  if (tracker.relists > 0) say(`[scale] the convergence watches fell behind ${tracker.relists} times and were replaced by paged lists`);
  return { result, shards };
}

/**
 * Restart: S new replicas over the synced groups (the old ones are stopped by the caller). Re-observed: the replicas
 * together reconciled every group once, every queue is empty and, sharded, each sees exactly S (the old Leases gone).
 * Service calls counted at the simulator from the spawn until 2 s after that.
 */
async function restartSharded(
  cluster: BenchCluster,
  n: number,
  shards: number,
  spawn: (label: string) => Promise<Replicas>,
  timeoutMs: number,
  onSpawned: (r: Replicas) => void,
): Promise<{ result: RestartResult; shards: ShardFigures[] }> {
  const callsBefore = cluster.serviceCalls();
  const started = performance.now();
  const replicas = await spawn('restart');
  onSpawned(replicas);
  const cs = replicas.controllers;
  let last: PromSamples[] = [];
  const progress = startProgress(
    `scale restart N=${n} S=${shards}`,
    () => `reconciled ${last.reduce((a, m) => a + m.sum('usergroup_reconcile_total'), 0)}/${n}; service calls ${cluster.serviceCalls() - callsBefore}`,
    3000,
  );
  let cachesSyncedMs: number | undefined;
  let reobservedMs: number | undefined;
  let error: string | undefined;
  try {
    await Promise.all(cs.map((c) => c.waitReady(timeoutMs)));
    const logged = cs.map((c) => (c.loggedAt('caches synced') ?? Date.now()) - c.spawnedAt);
    cachesSyncedMs = Math.max(...logged);
    reobservedMs = await pollUntil(
      `${n} UserGroups re-observed by ${shards} replicas (reconciled once, queues empty)`,
      async () => {
        last = await Promise.all(cs.map((c) => scrape(c)));
        const reconciled = last.reduce((a, m) => a + m.sum('usergroup_reconcile_total'), 0);
        const idle = last.every((m) => m.samples.length > 0 && m.sum('workqueue_depth') === 0);
        const settled = shards === 1 || last.every((m) => m.sum('usergroup_shard_members') === shards);
        return reconciled >= n && idle && settled ? performance.now() - started : undefined;
      },
      timeoutMs,
      200,
    );
    await sleep(2000);
  } catch (err) {
    error = message(err);
  }
  const serviceCalls = cluster.serviceCalls() - callsBefore;
  const after = await Promise.all(cs.map((c) => c.metrics().catch(() => undefined)));
  const figures = cs.map((c, i) => shardFigures(i + 1, c, undefined, after[i], undefined, replicas.sharded));
  const errors = after.reduce((a, m) => a + (m ? m.sum('usergroup_reconcile_total', { result: 'error' }) : 0), 0);
  if (!error && errors > 0) error = `${errors} reconciles failed`;
  progress.stop(error ? `FAILED: ${error}` : `re-observed in ${((reobservedMs ?? 0) / 1000).toFixed(2)} s; ${serviceCalls} service calls`);
  return {
    shards: figures,
    result: { n, ok: error === undefined, ...(error ? { error } : {}), cachesSyncedMs, reobservedMs, serviceCalls, controller: combined(figures) },
  };
}

/** Steady window over all replicas: nothing changes for `minutes`; the highest replica RSS sampled every few seconds. */
async function steadySharded(
  cluster: BenchCluster,
  n: number,
  replicas: Replicas,
  minutes: number,
): Promise<{ result: SteadyResult; shards: ShardFigures[]; rssSamples: [number, number][] }> {
  const cs = replicas.controllers;
  const before = await Promise.all(cs.map((c) => c.metrics()));
  const cpuBefore = cs.map((c) => c.proc.sample()?.cpuSeconds);
  const callsBefore = cluster.serviceCalls();
  const started = performance.now();
  const rssSamples: [number, number][] = [];
  const sampler = setInterval(() => {
    const rss = cs.map((c) => c.proc.sample()?.rssBytes ?? 0);
    rssSamples.push([Math.round((performance.now() - started) / 1000), Math.max(...rss)]);
  }, RSS_SAMPLE_MS);
  const progress = startProgress(
    `scale steady N=${n} S=${cs.length}`,
    () => `${((performance.now() - started) / 60_000).toFixed(1)}/${minutes} min idle; service calls ${cluster.serviceCalls() - callsBefore}`,
    10_000,
  );
  let error: string | undefined;
  try {
    while (performance.now() - started < minutes * 60_000) {
      const exited = exitedOne(replicas);
      if (exited) {
        error = `a replica exited:\n${exited.logTail()}`;
        break;
      }
      await sleep(Math.min(1000, Math.max(0, minutes * 60_000 - (performance.now() - started))));
    }
  } finally {
    clearInterval(sampler);
  }
  const elapsedMin = Math.max((performance.now() - started) / 60_000, 1e-6);
  const after = await Promise.all(cs.map((c) => c.metrics().catch(() => undefined)));
  if (!error && after.some((m) => !m)) error = 'could not read every replica metrics at the end';
  const shards = cs.map((c, i) => shardFigures(i + 1, c, before[i], after[i], cpuBefore[i], replicas.sharded));
  const serviceCalls = cluster.serviceCalls() - callsBefore;
  const controller = combined(shards);
  const requests = Object.values(controller.kubeRequests).reduce((a, b) => a + b, 0);
  const nonWatch = requests - (controller.kubeRequests['WATCH'] ?? 0);
  progress.stop(`${serviceCalls} service calls, ${requests} apiserver requests from the replicas (${nonWatch} besides watch opens, Lease heartbeats included)`);
  return {
    shards,
    rssSamples,
    result: {
      n,
      ok: error === undefined,
      ...(error ? { error } : {}),
      minutes: elapsedMin,
      serviceCalls,
      serviceCallsPerMin: serviceCalls / elapsedMin,
      kubeRequestsPerMin: requests / elapsedMin,
      kubeNonWatchPerMin: nonWatch / elapsedMin,
      controller,
    },
  };
}

/** Rotations spread over the namespaces (runRotation), with each replica's figures around them. */
async function rotationSharded(
  cluster: BenchCluster,
  namespaces: readonly string[],
  n: number,
  replicas: Replicas,
  o: ShardedScaleOptions,
): Promise<{ result: RotationResult; shards: ShardFigures[] }> {
  const cs = replicas.controllers;
  const before = await Promise.all(cs.map((c) => c.metrics().catch(() => undefined)));
  const cpuBefore = cs.map((c) => c.proc.sample()?.cpuSeconds);
  const result = await runRotation(cluster, namespaces, n, cs, o.rotations, Math.min(o.timeoutMs, 300_000)).catch((err: unknown) =>
    rotationFailed(n, o.rotations, message(err)),
  );
  const after = await Promise.all(cs.map((c) => c.metrics().catch(() => undefined)));
  return { result, shards: cs.map((c, i) => shardFigures(i + 1, c, before[i], after[i], cpuBefore[i], replicas.sharded)) };
}

/** Stops every replica of a step (together) and notes each one's memory. */
async function stopAll(replicas: Replicas, step: string, memories: ProcessMemory[]): Promise<void> {
  await Promise.all(replicas.controllers.map((c) => c.stop()));
  const shards = replicas.controllers.length;
  // One replica keeps the one-replica name; its shard number still ties its two processes together.
  replicas.controllers.forEach((c, i) => memories.push({ ...memoryOf(`controller${shards > 1 ? `, shard ${i + 1}` : ''}, ${step}`, c), shard: i + 1 }));
}
