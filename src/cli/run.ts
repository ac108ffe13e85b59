// `usergroup-operator run`: loads the kubeconfig, builds the controller under its runner, and serves metrics and health.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { Controller } from '../controller/controller.js';
import type { NewController, Runner } from '../controller/runner-contract.js';
import { createRunner, type RunMode } from '../controller/runner.js';
import { shareOf } from '../controller/settings.js';
import { KubeClient } from '../kube/http.js';
import { KubeconfigNotFoundError, loadKubeAccess, type KubeAccess } from '../kube/kubeconfig.js';
import { serve, type Handler } from '../observability/http-server.js';
import { MetricsAuthorizer } from '../observability/metrics-auth.js';
import { Metrics, type MetricsSource } from '../observability/metrics.js';
import { createLogger } from '../observability/log.js';
import { packageVersion } from './version.js';
import { parseRunConfig, usage, type RunConfig } from './config.js';

export interface Io {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
}

/** `--kubeconfig`, else $KUBECONFIG, ~/.kube/config, in-cluster: kubectl's order. */
export function loadKubeConfig(file: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): Promise<KubeAccess> {
  // --kubeconfig defaults to $KUBECONFIG, which may be a list to merge rather than one file.
  if (file?.includes(path.delimiter)) return loadKubeAccess({ env: { ...env, KUBECONFIG: file } });
  return loadKubeAccess({ path: file, env });
}

export interface RunningOperator {
  /** How this replica runs the controller (alone, leader-elected, or sharded). */
  readonly runner: Runner;
  /** The controller at work now (with --shard-by-namespace, the one over this replica's current share). */
  readonly controller: Controller;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Bound ports (tests use port 0). */
  readonly metricsPort: number | undefined;
  readonly healthPort: number | undefined;
  stop(): Promise<void>;
}

/** How long informers may fail before /healthz reports the process unhealthy (a restart may help). */
const WATCH_FAILURE_TOLERANCE_MS = 5 * 60_000;

/** Starts the controller from a parsed configuration (also used by `dev` and the tests). */
export async function startOperator(config: RunConfig, log: Logger, access: KubeAccess): Promise<RunningOperator> {
  const metrics = new Metrics(
    packageVersion(),
    metricsSource(() => runner, config),
  );
  const client = await KubeClient.create(access, 'usergroup-operator', (verb, code, resource) => metrics.observeKubeRequest(verb, code, resource));
  const identity = `${process.env['POD_NAME'] ?? os.hostname()}_${randomBytes(4).toString('hex')}`;
  /**
   * A controller (over a shard's namespaces with --shard-by-namespace). The service rate per account and the caps
   * on scheduled rotations and workload restarts are the operator's, cluster-wide: one of `members` replicas at
   * work takes its part of each.
   */
  const newController: NewController = (lease, owns, members) =>
    new Controller({
      client,
      settings: shareOf(config, members),
      log,
      lease,
      instance: identity,
      owns,
      serviceClient: { userAgent: `usergroup-operator/${packageVersion()}`, observe: (sample) => metrics.observeService(sample) },
      hooks: {
        queue: metrics.queueHooks('usergroup'),
        reconciled: (verdict, seconds) => metrics.observeReconcile(verdict, seconds),
        tokenRotated: (trigger) => metrics.tokensRotated.inc({ trigger }),
        rotationFailed: (trigger) => metrics.rotationFailures.inc({ trigger }),
        workloadRestarted: (kind, outcome) => metrics.workloadRestarts.inc({ kind, outcome }),
        deletionRotation: (result) => metrics.deleteRotations.inc({ result }),
        event: (type, reason) => metrics.events.inc({ type, reason }),
        eventDropped: (type, reason) => metrics.eventsDropped.inc({ type, reason }),
      },
    });
  const runner = createRunner({
    mode: runMode(config, client, identity, metrics),
    create: newController,
    graceMs: config.shutdownGracePeriodMs,
    log,
    onWorking: (working) => metrics.leader.set(working ? 1 : 0),
  });

  const health = await serve(config.healthAddr, healthRoutes(runner));
  const serveMetrics: Handler = async () => ({ status: 200, contentType: metrics.registry.contentType, body: await metrics.registry.metrics() });
  // Metrics reveal the managed namespaces and the operator's activity; like controller-runtime, only callers allowed to
  // `get` /metrics by the cluster's RBAC see them. The health port stays open: the kubelet's probes carry no token.
  const metricsServer = await serve(config.metricsAddr, {
    '/metrics': config.metricsAuth
      ? new MetricsAuthorizer({
          client,
          log,
          observeRequest: (result, source) => metrics.metricsAuthRequests.inc({ result, source }),
          observeReview: (review, result) => metrics.metricsAuthReviews.inc({ review, result }),
        }).guard(serveMetrics)
      : serveMetrics,
  });

  await runner.start();
  return {
    runner,
    get controller() {
      return runner.controller;
    },
    metrics,
    log,
    metricsPort: metricsServer.port,
    healthPort: health.port,
    stop: async () => {
      await runner.stop();
      await Promise.all([health.close(), metricsServer.close()]);
      client.close();
    },
  };
}

/** Alone, leader-elected, or sharded; the Leases live in the operator's namespace, which tenants cannot write to. */
function runMode(config: RunConfig, client: KubeClient, identity: string, metrics: Metrics): RunMode {
  const lease = {
    client,
    namespace: config.leaderElectionNamespace ?? podNamespace(),
    identity,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
  };
  if (config.shardByNamespace) {
    return {
      kind: 'sharded',
      membership: { ...lease, group: config.leaderElectionId },
      onMembers: (count) => metrics.shardMembers.set(count),
      onRebalanced: () => metrics.shardRebalances.inc(),
    };
  }
  return config.leaderElect ? { kind: 'leader-elected', election: { ...lease, name: config.leaderElectionId } } : { kind: 'single' };
}

/** What the metrics read at scrape time: the controller at work now. */
function metricsSource(runner: () => Runner, config: RunConfig): MetricsSource {
  const listed = (name: string): boolean => config.namespaces.length === 0 || config.namespaces.includes(name);
  return {
    tokenSchedules: () => runner().controller.tokenSchedules(),
    userGroupCounts: () => runner().controller.countByReadyReason(),
    rotateOnDeleteFinalizers: () => runner().controller.rotateOnDeleteFinalizers(),
    queueInFlight: () => runner().controller.queueInFlight(),
    informerStats: () => runner().controller.informerStats(),
    ownedNamespaces: () =>
      config.shardByNamespace
        ? runner()
            .controller.caches.namespaces.list()
            .filter((ns) => listed(ns.metadata.name)).length
        : undefined,
  };
}

/** /healthz fails only after the watches have failed for long (a restart may help); a synced standby is ready too. */
function healthRoutes(runner: Runner): Record<string, Handler> {
  return {
    '/healthz': () => {
      const failing = runner.controller.watchFailingForMs();
      return Promise.resolve(
        failing < WATCH_FAILURE_TOLERANCE_MS
          ? { status: 200, contentType: 'text/plain', body: 'ok\n' }
          : { status: 500, contentType: 'text/plain', body: `watches failing for ${Math.round(failing / 1000)} s\n` },
      );
    },
    // A standby with synced caches is ready too: it can take over at once.
    '/readyz': () =>
      Promise.resolve(
        runner.synced ? { status: 200, contentType: 'text/plain', body: 'ok\n' } : { status: 503, contentType: 'text/plain', body: 'caches not synced\n' },
      ),
  };
}

function podNamespace(): string {
  if (process.env['POD_NAMESPACE']) return process.env['POD_NAMESPACE'];
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim();
  } catch {
    return 'default';
  }
}

export async function runCommand(argv: readonly string[], io: Io, env: Readonly<Record<string, string | undefined>> = process.env): Promise<number> {
  const parsed = parseRunConfig(argv, env);
  if (parsed.ok === 'help') {
    io.out(usage());
    return 0;
  }
  if (!parsed.ok) {
    io.err(`usergroup-operator run: invalid configuration:\n${parsed.errors.map((e) => `  - ${e}`).join('\n')}\n\nsee usergroup-operator run --help\n`);
    return 2;
  }
  const config = parsed.config;
  const log = createLogger(config.logLevel);
  let access: KubeAccess;
  try {
    access = await loadKubeConfig(config.kubeconfig, env);
  } catch (err) {
    const text =
      err instanceof KubeconfigNotFoundError
        ? 'no kubeconfig: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a cluster'
        : err instanceof Error
          ? err.message
          : String(err);
    io.err(`usergroup-operator run: ${text}\n`);
    return 2;
  }
  log.info({ namespaces: config.namespaces, concurrency: config.concurrency, defaultService: config.defaultService ?? 'none' }, 'starting');
  const operator = await startOperator(config, log, access);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      operator.stop().then(
        () => {
          log.info('stopped');
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err: String(err) }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
