import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { Controller } from '../controller/controller.js';
import { KubeClient } from '../kube/http.js';
import { KubeconfigNotFoundError, loadKubeAccess, type KubeAccess } from '../kube/kubeconfig.js';
import { LeaderElector } from '../kube/leader-election.js';
import { ShardedController } from '../controller/sharded-controller.js';
import { serve, type Handler } from '../observability/http-server.js';
import { MetricsAuthorizer } from '../observability/metrics-auth.js';
import { Metrics } from '../observability/metrics.js';
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
  /** The controller at work now (with --shard-by-namespace, the one over this replica's current share). */
  readonly controller: Controller;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Bound ports (tests use port 0). */
  readonly metricsPort: number | undefined;
  readonly healthPort: number | undefined;
  readonly elector: LeaderElector | undefined;
  readonly shards: ShardedController | undefined;
  stop(): Promise<void>;
}

/** How long informers may fail before /healthz reports the process unhealthy (a restart may help). */
const WATCH_FAILURE_TOLERANCE_MS = 5 * 60_000;

/** Starts the controller from a parsed configuration (also used by `dev` and the tests). */
export async function startOperator(config: RunConfig, log: Logger, access: KubeAccess): Promise<RunningOperator> {
  const metrics = new Metrics(packageVersion());
  const client = await KubeClient.create(access, 'usergroup-operator', (verb, code, resource) => metrics.observeKubeRequest(verb, code, resource));
  const identity = `${process.env['POD_NAME'] ?? os.hostname()}_${randomBytes(4).toString('hex')}`;
  const newController = (owns?: (namespace: string) => boolean): Controller =>
    new Controller(
      client,
      {
        namespaces: config.namespaces,
        concurrency: config.concurrency,
        resyncPeriodMs: config.resyncPeriodMs,
        scheduledRotationsPerMinute: config.scheduledRotationsPerMinute,
        minTokenAgeMs: config.minTokenAgeMs,
        workloadRestartsPerMinute: config.workloadRestartsPerMinute,
        defaultService: config.defaultService,
        serviceQps: config.serviceQps,
        serviceBurst: config.serviceBurst,
        serviceClient: {
          timeoutMs: config.serviceTimeoutMs,
          userAgent: `usergroup-operator/${packageVersion()}`,
          observe: (sample) => metrics.observeService(sample),
        },
        instance: identity,
        egress: { allowedHosts: config.allowedServiceHosts, allowHttp: config.allowHttpServices },
        ...(config.watchInactivityTimeoutMs !== undefined ? { watchInactivityMs: config.watchInactivityTimeoutMs } : {}),
        ...(owns ? { owns } : {}),
      },
      log,
      {
        queue: metrics.queueHooks('usergroup'),
        reconciled: (result, seconds) => metrics.observeReconcile(result, seconds),
        tokenRotated: (trigger) => metrics.tokensRotated.inc({ trigger }),
        rotationFailed: (trigger) => metrics.rotationFailures.inc({ trigger }),
        workloadRestarted: (kind, outcome) => metrics.workloadRestarts.inc({ kind, outcome }),
        event: (type, reason) => metrics.events.inc({ type, reason }),
        eventDropped: (type, reason) => metrics.eventsDropped.inc({ type, reason }),
      },
    );
  const shards = config.shardByNamespace ? shardedController(config, client, identity, log, metrics, newController) : undefined;
  const single = shards ? undefined : newController();
  const current = (): Controller => {
    const controller = shards?.controller ?? single;
    if (!controller) throw new Error('no controller: neither sharded nor single');
    return controller;
  };
  metrics.userGroupCounts = () => current().countByReadyReason();
  metrics.queueInFlight = () => current().queueInFlight();
  metrics.informerStats = () => current().informerStats();
  metrics.tokenSchedules = () => current().tokenSchedules();

  const health = await serve(
    config.healthAddr,
    healthRoutes(current, () => shards?.synced ?? current().synced),
  );
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

  let elector: LeaderElector | undefined;
  if (shards) {
    metrics.leader.set(0);
    shards.start();
    log.info({ identity, group: config.leaderElectionId }, 'sharing the namespaces with the other replicas');
  } else if (single) {
    await single.start();
    if (config.leaderElect) {
      elector = leaderElector(config, client, identity, log, single, metrics);
      log.info({ identity, lease: config.leaderElectionId }, 'waiting to become leader');
      elector.start();
    } else {
      metrics.leader.set(1);
      single.startWorkers();
    }
  }
  return {
    get controller() {
      return current();
    },
    metrics,
    log,
    metricsPort: metricsServer.port,
    healthPort: health.port,
    elector,
    shards,
    stop: async () => {
      if (shards) {
        await shards.stop();
      } else {
        // Finish in-flight work before giving up the Lease, so a standby never overlaps with us.
        await single?.stopWorkers(config.shutdownGracePeriodMs);
        await elector?.stop();
        await single?.stop(0);
      }
      await Promise.all([health.close(), metricsServer.close()]);
      client.close();
    },
  };
}

/** Replicas sharing the namespaces: a Lease each in the operator's namespace, which tenants cannot write to. */
function shardedController(
  config: RunConfig,
  client: KubeClient,
  identity: string,
  log: Logger,
  metrics: Metrics,
  create: (owns: (namespace: string) => boolean) => Controller,
): ShardedController {
  const shards = new ShardedController({
    identity,
    create,
    membership: {
      client,
      namespace: config.leaderElectionNamespace ?? podNamespace(),
      group: config.leaderElectionId,
      leaseDurationMs: config.leaseDurationMs,
      renewDeadlineMs: config.renewDeadlineMs,
      retryPeriodMs: config.retryPeriodMs,
      log,
    },
    graceMs: config.shutdownGracePeriodMs,
    log,
    onMembers: (count) => metrics.shardMembers.set(count),
    onRebalanced: () => metrics.shardRebalances.inc(),
  });
  const listed = (name: string): boolean => config.namespaces.length === 0 || config.namespaces.includes(name);
  metrics.ownedNamespaces = () => shards.controller.namespaces.list().filter((ns) => listed(ns.metadata.name)).length;
  return shards;
}

/** /healthz fails only after the watches have failed for long (a restart may help); a synced standby is ready too. */
function healthRoutes(controller: () => Controller, synced: () => boolean): Record<string, Handler> {
  return {
    '/healthz': () => {
      const failing = controller().watchFailingForMs();
      return Promise.resolve(
        failing < WATCH_FAILURE_TOLERANCE_MS
          ? { status: 200, contentType: 'text/plain', body: 'ok\n' }
          : { status: 500, contentType: 'text/plain', body: `watches failing for ${Math.round(failing / 1000)} s\n` },
      );
    },
    // A standby with synced caches is ready too: it can take over at once.
    '/readyz': () =>
      Promise.resolve(
        synced() ? { status: 200, contentType: 'text/plain', body: 'ok\n' } : { status: 503, contentType: 'text/plain', body: 'caches not synced\n' },
      ),
  };
}

/** Only the leader's workers run; every effect first asks the elector whether the Lease is still held by the clock. */
function leaderElector(config: RunConfig, client: KubeClient, identity: string, log: Logger, controller: Controller, metrics: Metrics): LeaderElector {
  const elector = new LeaderElector({
    client,
    namespace: config.leaderElectionNamespace ?? podNamespace(),
    name: config.leaderElectionId,
    identity,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    log,
    onStartedLeading: () => {
      metrics.leader.set(1);
      controller.startWorkers();
    },
    onStoppedLeading: () => {
      metrics.leader.set(0);
      void controller.stopWorkers(0);
    },
  });
  controller.holdsLease = () => elector.holdsLease();
  return elector;
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
