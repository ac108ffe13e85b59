import type { BenchCluster } from '../cluster.js';
import { deltaBy, type BenchController } from '../controller.js';
import { MiB } from '../proc.js';
import { startProgress } from '../progress.js';
import type { SteadyResult } from '../report.js';
import { sleep } from '../stats.js';
import { heapOf, kubeByVerb, reconcilesByResult } from './cold.js';

/**
 * Steady state: N synced groups, nothing changes for `minutes`. Service calls from the simulator; apiserver
 * requests from the controller's usergroup_kube_requests_total (scraped at both ends only); CPU from /proc.
 */
export async function runSteady(cluster: BenchCluster, n: number, controller: BenchController, minutes: number): Promise<SteadyResult> {
  const before = await controller.metrics();
  const cpuBefore = controller.sample()?.cpuSeconds;
  const callsBefore = cluster.serviceCalls();
  const started = performance.now();
  const durationMs = minutes * 60_000;
  const progress = startProgress(
    `steady N=${n}`,
    () => {
      const p = controller.proc.latest;
      return (
        `${((performance.now() - started) / 60_000).toFixed(1)}/${minutes} min idle; service calls ${cluster.serviceCalls() - callsBefore}; ` +
        `controller CPU ${p && cpuBefore !== undefined ? (p.cpuSeconds - cpuBefore).toFixed(2) : '?'} s, RSS ${p ? (p.rssBytes / MiB).toFixed(0) : '?'} MiB`
      );
    },
    10_000,
  );
  let error: string | undefined;
  while (performance.now() - started < durationMs) {
    if (controller.exited()) {
      error = `the controller exited:\n${controller.logTail()}`;
      break;
    }
    await sleep(Math.min(1000, Math.max(0, durationMs - (performance.now() - started))));
  }
  const elapsedMin = Math.max((performance.now() - started) / 60_000, 1e-6);
  const after = await controller.metrics().catch(() => undefined);
  const sample = controller.sample();
  const serviceCalls = cluster.serviceCalls() - callsBefore;
  const kubeRequests = after ? deltaBy(kubeByVerb(before), kubeByVerb(after)) : {};
  const total = Object.values(kubeRequests).reduce((a, b) => a + b, 0);
  const nonWatch = total - (kubeRequests['WATCH'] ?? 0);
  if (!after && !error) error = 'could not read the controller metrics at the end';
  const cpu = sample && cpuBefore !== undefined ? sample.cpuSeconds - cpuBefore : undefined;
  progress.stop(
    `${serviceCalls} service calls, ${total} apiserver requests (${nonWatch} besides watch opens), controller CPU ${cpu?.toFixed(2) ?? '?'} s in ${elapsedMin.toFixed(1)} min`,
  );
  return {
    n,
    ok: error === undefined,
    ...(error ? { error } : {}),
    minutes: elapsedMin,
    serviceCalls,
    serviceCallsPerMin: serviceCalls / elapsedMin,
    kubeRequestsPerMin: total / elapsedMin,
    kubeNonWatchPerMin: nonWatch / elapsedMin,
    controller: {
      peakRssBytes: sample?.peakRssBytes,
      ...(sample ? { rssBytes: sample.rssBytes } : {}),
      cpuSeconds: cpu,
      kubeRequests,
      reconciles: after ? deltaBy(reconcilesByResult(before), reconcilesByResult(after)) : {},
      ...(after ? { heap: heapOf(after) } : {}),
    },
  };
}
