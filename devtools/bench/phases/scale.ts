import { apiserverMetrics, openRequests, operatorRequests, storedObjects } from '../apiserver-requests.js';
import type { BenchCluster } from '../cluster.js';
import { deltaBy, type BenchController, type PromSamples } from '../controller.js';
import { MiB, ProcWatcher } from '../proc.js';
import { say } from '../progress.js';
import type { ProcessMemory, ScaleResult, ScaleRestart, ScaleSteady } from '../scale-report.js';
import { sleep } from '../stats.js';
import { coldFailed, runCold, type ControllerSettings } from './cold.js';
import { restartFailed, runRestart } from './restart.js';
import { rotationFailed, runRotation } from './rotation.js';
import { runSteady } from './steady.js';

export interface ScalePhaseOptions {
  readonly n: number;
  readonly applyParallelism: number;
  readonly steadyMinutes: number;
  readonly rotations: number;
  /** Each step's timeout (scaleTimeoutMs). */
  readonly timeoutMs: number;
  readonly etcdQuotaBytes: number | undefined;
  readonly settings: ControllerSettings;
  /** --heap-snapshots: a heap snapshot of each replica after the steady window (its figures read first). */
  readonly snapshot?: (c: BenchController, label: string) => Promise<void>;
}

/** How often the controller's RSS is noted during the steady window. */
const RSS_SAMPLE_MS = 5000;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * The `scale` phase: one controller replica over N UserGroups (--scale-n, 100,000 by default), with the world phases' own code
 * in their order: cold convergence (runCold), a restart over the synced groups (runRestart), a steady window
 * (runSteady) and rotations requested at once (runRotation). Around them it reads what those leave out: the
 * apiserver's count of requests on the operator's resources in the restart and steady windows (apiserver_request_total,
 * and the watches still open from apiserver_longrunning_requests), the controller's RSS over the steady window, and
 * at the end the control plane's and the bench's own peak RSS, etcd's size and the objects stored.
 *
 * It leaves its namespace behind: it runs last, and stopping the control plane is quicker than deleting 300,000
 * objects.
 */
export async function runScale(cluster: BenchCluster, o: ScalePhaseOptions): Promise<ScaleResult> {
  const n = o.n;
  const started = performance.now();
  // The control plane's processes and this one (the simulator lives here), read at the end: VmHWM is kept by the kernel.
  const watched: [string, number | undefined][] = [
    ['kube-apiserver', cluster.cp.apiserver.pid],
    ['etcd', cluster.cp.etcd.pid],
    ['kube-controller-manager', cluster.cp.controllerManager.pid],
    ['bench (simulator + drivers)', process.pid],
  ];
  const watchers = watched.flatMap(([name, pid]) => (pid !== undefined ? [[name, new ProcWatcher(pid, 10_000)] as const] : []));
  const base: ScaleResult = {
    n,
    ok: true,
    steadyMinutes: o.steadyMinutes,
    timeoutMs: o.timeoutMs,
    etcdQuotaBytes: o.etcdQuotaBytes,
    controllers: [],
    processes: [],
  };
  const controllers: ProcessMemory[] = [];
  const step = (text: string): void => say(`[scale N=${n}] ${text}`);

  let result: ScaleResult = base;
  /** The cold phase's controller, and the one started over the synced groups. */
  let coldController: BenchController | undefined;
  let restarted: BenchController | undefined;
  /** The steps; each notes its figures in `result` as it ends, and a failed step ends the phase. */
  const steps = async (): Promise<void> => {
    step(`cold convergence of ${n.toLocaleString('en-US')} UserGroups (each step times out after ${Math.round(o.timeoutMs / 1000)} s)`);
    let cold;
    try {
      const run = await runCold(cluster, n, o.settings, o.applyParallelism, o.timeoutMs, `scale cold N=${n}`);
      cold = run.result;
      coldController = run.controller;
      if (run.convergenceRelists > 0) result = { ...result, convergenceRelists: run.convergenceRelists };
    } catch (err) {
      cold = coldFailed(n, message(err));
    }
    result = { ...result, cold };
    if (!cold.ok || !coldController) {
      result = { ...result, ok: false, error: `cold convergence failed: ${cold.error ?? 'no controller'}` };
      return;
    }
    const namespace = cold.namespace;

    // Restart. The old controller is stopped here, not by runRestart, so that the apiserver's counts can be read
    // in between: it counts a watch when the watch ends, and the old controller's (and the convergence tracker's) end
    // now. The new controller's connection (its Secret and ClusterUserGroupService, already there) is made before
    // the first reading too: those requests are the bench's, not the controller's.
    await coldController.stop();
    controllers.push(memoryOf('controller, cold convergence', coldController));
    const connection = await cluster.connectTo(namespace);
    await sleep(1000);
    let before = await apiserverMetrics(cluster);
    step('restart over the synced groups');
    let restart: ScaleRestart;
    try {
      const r = await runRestart(cluster, namespace, n, coldController, o.settings, o.timeoutMs, connection);
      restarted = r.controller;
      restart = { result: r.result, ...(await windowCounts(cluster, before)) };
    } catch (err) {
      restart = { result: restartFailed(n, message(err)), ...(await windowCounts(cluster, before)) };
    }
    result = { ...result, restart };
    if (!restart.result.ok || !restarted || restarted.exited()) {
      result = { ...result, ok: false, error: `restart failed: ${restart.result.error ?? 'the controller exited'}` };
      return;
    }

    step(`steady window of ${o.steadyMinutes} min`);
    const running = restarted;
    const rssSamples: [number, number][] = [];
    const steadyStart = performance.now();
    const sampler = setInterval(() => {
      const p = running.proc.sample();
      if (p) rssSamples.push([Math.round((performance.now() - steadyStart) / 1000), p.rssBytes]);
    }, RSS_SAMPLE_MS);
    before = await apiserverMetrics(cluster);
    let steady: ScaleSteady;
    try {
      const x = await runSteady(cluster, n, running, o.steadyMinutes);
      steady = { result: x, ...(await windowCounts(cluster, before)), rssSamples };
    } finally {
      clearInterval(sampler);
    }
    result = { ...result, steady };
    if (running.exited()) {
      result = { ...result, ok: false, error: 'the controller exited in the steady window' };
      return;
    }

    await o.snapshot?.(running, 'scale-steady');
    step(`${o.rotations} rotations requested at once`);
    const rotation = await runRotation(cluster, namespace, n, running, o.rotations, Math.min(o.timeoutMs, 300_000)).catch((err: unknown) =>
      rotationFailed(n, o.rotations, message(err)),
    );
    const ok = [cold, restart.result, steady.result, rotation].every((x) => x.ok);
    result = { ...result, rotation, ok, ...(ok ? {} : { error: 'a step failed (see its figures)' }) };
  };

  try {
    await steps();
  } catch (err) {
    result = { ...result, ok: false, error: message(err) };
  }
  // Whatever happened, the figures of the end: each controller's peak, the other processes', etcd's size.
  if (coldController && controllers.length === 0) {
    await coldController.stop();
    controllers.push(memoryOf('controller, cold convergence', coldController));
  }
  if (restarted) {
    await restarted.stop();
    controllers.push(memoryOf('controller, restarted (restart, steady, rotation)', restarted));
  }
  const processes = watchers.map(([name, w]) => {
    const p = w.sample();
    w.stop();
    return { process: name, peakRssBytes: p?.peakRssBytes, rssBytes: p?.rssBytes, cpuSeconds: p?.cpuSeconds };
  });
  const etcdDb = await cluster.cp.etcdDbSize().catch(() => undefined);
  const stored = await apiserverMetrics(cluster).then(storedObjects, () => undefined);
  result = { ...result, controllers, processes, ...(etcdDb ? { etcdDb } : {}), ...(stored ? { storedObjects: stored } : {}) };
  step(
    `${result.ok ? 'done' : `FAILED: ${result.error ?? ''}`} after ${((performance.now() - started) / 60_000).toFixed(1)} min; controller peak RSS ` +
      `${controllers.map((c) => `${((c.peakRssBytes ?? NaN) / MiB).toFixed(0)} MiB`).join(', ')}; etcd ${etcdDb ? `${(etcdDb.dbSizeBytes / MiB).toFixed(0)} MiB` : '?'}`,
  );
  return result;
}

/**
 * The controller's memory when it stopped: VmHWM and RSS of its last reading (stop() reads it once more).
 */
export function memoryOf(process: string, c: BenchController): ProcessMemory {
  const p = c.proc.latest;
  return { process, peakRssBytes: p?.peakRssBytes, rssBytes: p?.rssBytes, cpuSeconds: p?.cpuSeconds };
}

/** The apiserver's requests on the operator's resources since `before`, and the watches opened since. */
export async function windowCounts(
  cluster: BenchCluster,
  before: PromSamples,
): Promise<{ apiserverRequests: Record<string, number>; openedWatches: Record<string, number> }> {
  const after = await apiserverMetrics(cluster);
  return { apiserverRequests: deltaBy(operatorRequests(before), operatorRequests(after)), openedWatches: deltaBy(openRequests(before), openRequests(after)) };
}
