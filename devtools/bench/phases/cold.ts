import { createHash } from 'node:crypto';
import { paths } from '../../../src/kube/paths.js';
import { OWNED_SECRETS, meta, secretData, userGroupId, userGroupName, type BenchCluster } from '../cluster.js';
import { ConvergenceTracker } from '../convergence.js';
import { BenchController, deltaBy, type BenchControllerOptions, type PromSamples } from '../controller.js';
import { MiB } from '../proc.js';
import { startProgress } from '../progress.js';
import type { ColdResult, ControllerFigures } from '../report.js';
import { groupsIn } from '../spread.js';
import { pollUntil } from '../stats.js';

/** How every bench controller runs; each spawn adds its namespace, connection and log file. */
export type ControllerSettings = Pick<
  BenchControllerOptions,
  'concurrency' | 'serviceQps' | 'logLevel' | 'scheduledRotationsPerMinute' | 'nodeOptions' | 'nodeFlags' | 'imageEnv'
> & {
  readonly logDir: string;
};

/**
 * `defaultService`: a connection made earlier (BenchCluster.connectTo); by default one is made here. The peer phase
 * makes it before it reads the apiserver's request counts, so that the bench's own requests are not counted as the
 * controller's. `watch`: only the namespace (--namespaces, the default), or every namespace as the chart runs it.
 */
export async function spawnBenchController(
  cluster: BenchCluster,
  namespace: string,
  settings: ControllerSettings,
  label: string,
  defaultService?: string,
  watch: 'namespace' | 'cluster' = 'namespace',
): Promise<BenchController> {
  return BenchController.spawn({
    kubeconfigPath: cluster.cp.kubeconfigPath,
    namespace: watch === 'cluster' ? undefined : namespace,
    defaultService: defaultService ?? (await cluster.connectTo(namespace)),
    concurrency: settings.concurrency,
    serviceQps: settings.serviceQps,
    logLevel: settings.logLevel,
    scheduledRotationsPerMinute: settings.scheduledRotationsPerMinute,
    nodeOptions: settings.nodeOptions,
    nodeFlags: settings.nodeFlags,
    imageEnv: settings.imageEnv,
    logFile: `${settings.logDir}/controller-${label}.log`,
  });
}

/**
 * After convergence: every Secret holds the token the service has now for its group (one paged list per namespace,
 * one look-up; each page is checked and dropped, so 100,000 Secrets are never held at once). Several namespaces:
 * the N groups spread over them as spread.ts places them.
 */
export async function verifySecrets(cluster: BenchCluster, namespace: string | readonly string[], n: number): Promise<number> {
  const namespaces = typeof namespace === 'string' ? [namespace] : namespace;
  const current = new Map(cluster.sim.groups(cluster.controllerKey).map((g) => [g.userGroupId, g.tokenSha256]));
  let verified = 0;
  for (const [j, ns] of namespaces.entries()) {
    const count = groupsIn(n, namespaces.length, j);
    const idOf = new Map(Array.from({ length: count }, (_, i) => [userGroupName(i), userGroupId(ns, i)] as const));
    await cluster.eachPage(paths.secrets(ns), OWNED_SECRETS, (secrets) => {
      for (const secret of secrets) {
        const id = idOf.get(meta(secret).name);
        const token = secretData(secret, 'token');
        if (id !== undefined && token && createHash('sha256').update(token).digest('hex') === current.get(id)) verified++;
      }
    });
  }
  return verified;
}

/** The result of a cold run that threw before it had figures (creating its namespace, spawning its controller). */
export function coldFailed(n: number, error: string): ColdResult {
  return {
    n,
    namespace: '',
    ok: false,
    error,
    convergeMs: 0,
    applyMs: 0,
    ready: 0,
    secrets: 0,
    verified: 0,
    serviceCalls: 0,
    controller: { peakRssBytes: undefined, cpuSeconds: undefined, kubeRequests: {}, reconciles: {} },
  };
}

export interface ColdRun {
  readonly result: ColdResult;
  /** The controller, still running (the caller stops it or keeps it for the later phases). */
  readonly controller: BenchController;
  /** How often the convergence watches fell behind (410 Gone) and were replaced by a paged list. */
  readonly convergenceRelists: number;
}

export const kubeByVerb = (m: PromSamples): Record<string, number> => m.by('usergroup_kube_requests_total', 'verb');
export const reconcilesByResult = (m: PromSamples): Record<string, number> => m.by('usergroup_reconcile_total', 'result');

export function heapOf(m: PromSamples): NonNullable<ControllerFigures['heap']> {
  return {
    usedBytes: m.sum('nodejs_heap_size_used_bytes'),
    totalBytes: m.sum('nodejs_heap_size_total_bytes'),
    externalBytes: m.sum('nodejs_external_memory_bytes'),
  };
}

/** Means over [before, after] of the controller's reconcile, service-call and queue-wait histograms, in ms. */
export function histogramMeans(before: PromSamples, after: PromSamples): NonNullable<ControllerFigures['means']> {
  const mean = (name: string): number | undefined => {
    const n = after.sum(`${name}_count`) - before.sum(`${name}_count`);
    return n > 0 ? (1000 * (after.sum(`${name}_sum`) - before.sum(`${name}_sum`))) / n : undefined;
  };
  return {
    reconcileMs: mean('usergroup_reconcile_duration_seconds'),
    serviceCallMs: mean('usergroup_service_request_duration_seconds'),
    queueWaitMs: mean('workqueue_queue_duration_seconds'),
  };
}

/**
 * Cold convergence: a fresh namespace and a fresh, idle controller; then N UserGroups are applied concurrently
 * (server-side apply, bounded parallelism). Time runs from the first apply until every UserGroup is Ready for
 * its generation and every token Secret exists.
 */
export async function runCold(
  cluster: BenchCluster,
  n: number,
  settings: ControllerSettings,
  applyParallelism: number,
  timeoutMs: number,
  label = `cold N=${n}`,
): Promise<ColdRun> {
  const namespace = await cluster.createNamespace(`bench-cold-${n}`);
  const controller = await spawnBenchController(cluster, namespace, settings, `cold-${n}`);
  await controller.waitReady(120_000);
  const before = await controller.metrics();
  const callsBefore = cluster.serviceCalls();
  const tracker = new ConvergenceTracker(n);
  await tracker.start(cluster, namespace);

  let applied = 0;
  let applyMs = 0;
  let applyError: string | undefined;
  const progress = startProgress(label, () => {
    const p = controller.proc.latest;
    return `applied ${applied}/${n}, Ready ${tracker.ready.size}, Secrets ${tracker.secrets.size}; controller RSS ${p ? (p.rssBytes / MiB).toFixed(0) : '?'} MiB, CPU ${p ? p.cpuSeconds.toFixed(1) : '?'} s`;
  });
  const started = performance.now();
  const applying = cluster
    .applyUserGroups(namespace, n, applyParallelism, () => applied++)
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
        if (controller.exited()) throw new Error(`the controller exited:\n${controller.logTail()}`);
        return tracker.doneAt;
      },
      timeoutMs,
      100,
    );
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  await applying;
  tracker.stop();
  const convergeMs = tracker.doneAt !== undefined ? tracker.doneAt - started : performance.now() - started;
  progress.stop(
    error
      ? `FAILED after ${(convergeMs / 1000).toFixed(1)} s: ${error}`
      : `all ${n} Ready with Secrets in ${(convergeMs / 1000).toFixed(2)} s (applies done at ${(applyMs / 1000).toFixed(2)} s)`,
  );

  const sample = controller.sample();
  const after = await controller.metrics().catch(() => undefined);
  const serviceCalls = cluster.serviceCalls() - callsBefore;
  const verified = error ? 0 : await verifySecrets(cluster, namespace, n);
  if (!error && verified !== n) error = `only ${verified}/${n} Secrets hold the service's current token`;
  const result: ColdResult = {
    n,
    namespace,
    ok: error === undefined,
    ...(error ? { error } : {}),
    convergeMs,
    applyMs,
    ready: tracker.ready.size,
    secrets: tracker.secrets.size,
    verified,
    serviceCalls,
    controller: {
      peakRssBytes: sample?.peakRssBytes,
      ...(sample ? { rssBytes: sample.rssBytes } : {}),
      cpuSeconds: sample?.cpuSeconds,
      kubeRequests: after ? deltaBy(kubeByVerb(before), kubeByVerb(after)) : {},
      reconciles: after ? deltaBy(reconcilesByResult(before), reconcilesByResult(after)) : {},
      ...(after ? { means: histogramMeans(before, after), heap: heapOf(after) } : {}),
    },
  };
  return { result, controller, convergenceRelists: tracker.relists };
}
