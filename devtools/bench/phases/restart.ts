import type { BenchCluster } from '../cluster.js';
import { deltaBy, PromSamples, type BenchController } from '../controller.js';
import { MiB } from '../proc.js';
import { startProgress } from '../progress.js';
import type { RestartResult } from '../report.js';
import { pollUntil, sleep } from '../stats.js';
import { heapOf, histogramMeans, kubeByVerb, reconcilesByResult, spawnBenchController, type ControllerSettings } from './cold.js';

/** The result of a restart that threw before it had figures. */
export function restartFailed(n: number, error: string): RestartResult {
  return {
    n,
    ok: false,
    error,
    cachesSyncedMs: undefined,
    reobservedMs: undefined,
    serviceCalls: 0,
    controller: { peakRssBytes: undefined, cpuSeconds: undefined, kubeRequests: {}, reconciles: {} },
  };
}

/**
 * Restart: the running controller over N synced groups is stopped (SIGTERM) and a new one started. "Caches synced" is
 * the time of its log line of that name. "Re-observed"
 * = from the new process's own metrics: every UserGroup reconciled once (usergroup_reconcile_total ≥ N; the
 * queue gets each key once at start) and workqueue_depth 0. Service calls are counted at the simulator from the
 * spawn until 2 s after that. `defaultService`: the controller's connection, made earlier (BenchCluster.connectTo) when
 * the caller counts the apiserver's requests over the window; by default it is made here.
 */
export async function runRestart(
  cluster: BenchCluster,
  namespace: string,
  n: number,
  old: BenchController,
  settings: ControllerSettings,
  timeoutMs: number,
  defaultService?: string,
): Promise<{ result: RestartResult; controller: BenchController }> {
  await old.stop();
  const callsBefore = cluster.serviceCalls();
  const started = performance.now();
  const controller = await spawnBenchController(cluster, namespace, settings, 'restart', defaultService);
  let cachesSyncedMs: number | undefined;
  let reobservedMs: number | undefined;
  let last: PromSamples | undefined;
  const progress = startProgress(
    `restart N=${n}`,
    () => {
      const p = controller.proc.latest;
      const reconciled = last ? last.sum('usergroup_reconcile_total') : 0;
      return (
        `${cachesSyncedMs === undefined ? 'syncing caches' : `caches synced at ${(cachesSyncedMs / 1000).toFixed(2)} s`}; reconciled ${reconciled}/${n}, queue ${last ? last.sum('workqueue_depth') : '?'}; ` +
        `service calls ${cluster.serviceCalls() - callsBefore}; RSS ${p ? (p.rssBytes / MiB).toFixed(0) : '?'} MiB`
      );
    },
    3000,
  );
  let error: string | undefined;
  try {
    await controller.waitReady(timeoutMs);
    // The log line's own time: /readyz may answer late while the event loop is busy with the first reconciles.
    const logged = controller.loggedAt('caches synced');
    cachesSyncedMs = logged !== undefined ? logged - controller.spawnedAt : performance.now() - started;
    await pollUntil(
      `${n} UserGroups re-observed (reconciled once, queue empty)`,
      async () => {
        if (controller.exited()) throw new Error(`the controller exited:\n${controller.logTail()}`);
        last = await controller.metrics();
        return last.sum('usergroup_reconcile_total') >= n && last.sum('workqueue_depth') === 0 ? performance.now() - started : undefined;
      },
      timeoutMs,
      200,
    ).then((ms) => {
      reobservedMs = ms;
    });
    await sleep(2000);
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  const serviceCalls = cluster.serviceCalls() - callsBefore;
  const after = await controller.metrics().catch(() => undefined);
  const sample = controller.sample();
  const errors = after ? after.sum('usergroup_reconcile_total', { result: 'error' }) : 0;
  if (!error && errors > 0) error = `${errors} reconciles failed`;
  progress.stop(
    error
      ? `FAILED: ${error}`
      : `re-observed ${n} groups in ${((reobservedMs ?? 0) / 1000).toFixed(2)} s (caches synced at ${((cachesSyncedMs ?? 0) / 1000).toFixed(2)} s); ${serviceCalls} service calls`,
  );
  return {
    controller,
    result: {
      n,
      ok: error === undefined,
      ...(error ? { error } : {}),
      cachesSyncedMs,
      reobservedMs,
      serviceCalls,
      controller: {
        peakRssBytes: sample?.peakRssBytes,
        ...(sample ? { rssBytes: sample.rssBytes } : {}),
        cpuSeconds: sample?.cpuSeconds,
        kubeRequests: after ? deltaBy({}, kubeByVerb(after)) : {},
        reconciles: after ? deltaBy({}, reconcilesByResult(after)) : {},
        ...(after ? { means: histogramMeans(new PromSamples([]), after), heap: heapOf(after) } : {}),
      },
    },
  };
}
