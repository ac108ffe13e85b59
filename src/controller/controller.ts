// The controller: caches, triggers, the work queue and the workers, wired over one set of ports.
import type { Logger } from 'pino';
import { ROTATE_ON_DELETE_STATE_ANNOTATION } from '../api/constants.js';
import { objectKey } from '../api/meta.js';
import type { UserGroup } from '../api/usergroup.js';
import type { RestartKind } from '../api/workload.js';
import { ClaimWriter } from '../kube/claim-writer.js';
import { EventRecorder } from '../kube/event-recorder.js';
import type { KubeClient } from '../kube/http.js';
import type { InformerStats } from '../kube/informer.js';
import { FinalizerWriter } from '../kube/finalizer-writer.js';
import { SecretWriter } from '../kube/secret-writer.js';
import { StatusWriter } from '../kube/status-writer.js';
import { WorkloadRestarter } from '../kube/workload-restarter.js';
import { PodPrompter } from '../kube/pod-prompter.js';
import type { WorkQueueMetrics } from '../kube/workqueue.js';
import type { ServiceClientOptions } from '../service/client.js';
import { parseEgressPolicy, type EgressPolicy } from '../service/egress-policy.js';
import { Caches } from './caches.js';
import { Connections } from './connections.js';
import type { TokenScheduleSample } from '../observability/metrics.js';
import { countByReadyReason, informerTotals, rotateOnDeleteFinalizers, tokenSchedules } from './metrics-view.js';
import { rateCaps } from './rate-cap.js';
import { REQUEST_KINDS, requestBudgets, type RequestBudgets } from './request-budget.js';
import { budgetAnnotations, takeOverDebts } from './request-budget-record.js';
import { reconcilePorts } from './reconcile-ports.js';
import type { ControllerSettings } from './settings.js';
import {
  claimTriggers,
  clusterServiceTriggers,
  namespaceTriggers,
  relevantChange,
  serviceTriggers,
  tokenSecretTriggers,
  userGroupTriggers,
  type Trigger,
  type TriggerView,
} from './triggers.js';
import { Events } from './usergroup-messages.js';
import type { DeletionRotationResult, ReconcileCount, ReconcilePorts, RestartOutcome, RotationTrigger } from './usergroup-ports.js';
import { reconcileUserGroup } from './usergroup/reconcile.js';
import { Workers, type ReconcileVerdict } from './worker.js';

/** Where the controller's counts go (observability/metrics.ts); every hook is optional. */
export interface ControllerHooks {
  readonly queue?: WorkQueueMetrics;
  readonly reconciled?: (verdict: ReconcileVerdict, seconds: number) => void;
  readonly tokenRotated?: (trigger: RotationTrigger) => void;
  readonly rotationFailed?: (trigger: RotationTrigger) => void;
  readonly workloadRestarted?: (kind: RestartKind, outcome: RestartOutcome) => void;
  readonly deletionRotation?: (result: DeletionRotationResult) => void;
  readonly event?: (type: string, reason: string) => void;
  readonly eventDropped?: (type: string, reason: string) => void;
}

/** Whether this replica may act now: its Lease renewed within the renew deadline, by the clock. */
export interface LeaseCheck {
  holdsLease(): boolean;
}

/** Without leader election or sharding, the replica always may. */
export const ALWAYS_HELD: LeaseCheck = { holdsLease: () => true };

export interface ControllerDeps {
  readonly client: KubeClient;
  /** This replica's share of the settings (settings.ts shareOf). */
  readonly settings: ControllerSettings;
  readonly log: Logger;
  readonly hooks?: ControllerHooks;
  readonly lease: LeaseCheck;
  /** Identity in Events (pod name and a suffix). */
  readonly instance: string;
  /** The service client's user agent and its per-call metrics. */
  readonly serviceClient: Omit<ServiceClientOptions, 'timeoutMs'>;
  /** This replica's share of the namespaces (--shard-by-namespace); absent: all. */
  readonly owns?: ((namespace: string) => boolean) | undefined;
}

/**
 * The UserGroup controller: caches (caches.ts) whose events become UserGroup keys (triggers.ts) on the workers'
 * queue (worker.ts), each reconciled (usergroup/reconcile.ts) through ports over the caches and writers
 * (reconcile-ports.ts), each writer fencing its writes and writing them through itself. Informers run from start();
 * workers only while startWorkers() is in effect (leader election or a shard's share gates them).
 */
export class Controller {
  readonly caches: Caches;
  private readonly workers: Workers;
  private readonly connections: Connections;
  private readonly recorder: EventRecorder;
  private readonly triggerView: TriggerView;
  private readonly ports: ReconcilePorts;
  private readonly budgets: RequestBudgets;

  constructor(private readonly deps: ControllerDeps) {
    const { client, settings, log, hooks = {}, lease } = deps;
    this.caches = new Caches({ client, log, namespaces: settings.namespaces, watchInactivityMs: settings.watchInactivityTimeoutMs, owns: deps.owns });
    const caches = this.caches;
    const fence = leaseFence(lease);
    this.recorder = new EventRecorder(client, {
      controller: 'usergroup.dev/usergroup-operator',
      instance: deps.instance,
      log,
      ...(hooks.event ? { onEmit: hooks.event } : {}),
      ...(hooks.eventDropped ? { onDrop: hooks.eventDropped } : {}),
    });
    // Every writer fences its writes and writes them through to the caches it is given: what it wrote, the caches
    // know when it returns (the next reconcile does not write it again).
    const secrets = new SecretWriter(client, { fence, through: { cache: caches.secrets, wrote: (key, rv, data) => caches.verified.wrote(key, rv, data) } });
    const finalizers = new FinalizerWriter(client, { fence, userGroups: caches.userGroups, secrets: { cache: caches.secrets, record: caches.verified } });
    this.connections = connections(deps, caches, secrets, fence);
    this.budgets = requestBudgets(settings.requestBudgets);
    const ports = (this.ports = reconcilePorts({
      caches,
      writers: {
        secrets,
        claims: new ClaimWriter(client, { fence, cache: caches.claims }),
        status: new StatusWriter(client, {
          fence,
          cache: caches.userGroups,
          // The answer is newer than the watch may be: a spec change (or rotation request) that landed just before our
          // patch would reach the cache older than this and so never look like news. Ours to notice, then.
          written: (before, after) => {
            if (relevantChange(before, after)) this.workers.add(objectKey(before.metadata));
          },
        }),
        workloads: new WorkloadRestarter(client, { fence }),
        pods: new PodPrompter(client, { fence }),
        finalizers,
      },
      connections: this.connections,
      recorder: this.recorder,
      metrics: { count: (counted) => countIn(hooks, counted) },
      caps: { ...rateCaps(settings), requests: this.budgets },
    }));
    const reconcileSettings = {
      resyncPeriodMs: settings.resyncPeriodMs,
      minTokenAgeMs: settings.minTokenAgeMs,
      workloadRestarts: settings.workloadRestartsPerMinute > 0,
      podPrompts: settings.podPromptsPerMinute > 0,
      deletionRotationTimeoutMs: settings.deletionRotationTimeoutMs,
      rotateOnDelete: settings.rotateOnDelete,
      seesAllNamespaces: settings.namespaces.length === 0 && deps.owns === undefined,
      requestBudgets: settings.requestBudgets,
    };
    this.workers = new Workers({
      concurrency: settings.concurrency,
      reconcile: (request) => reconcileUserGroup({ ports, settings: reconcileSettings, log }, request),
      log,
      queueMetrics: hooks.queue,
      reconciled: hooks.reconciled,
    });
    this.triggerView = {
      keysWithId: (id) => caches.byUserGroupId.keys(id),
      holdsClaim: (uid) => caches.claimsByHolder.get(uid).length > 0,
      userGroups: () => caches.userGroups.list(),
      defaultService: settings.defaultService,
    };
    this.wireTriggers();
  }

  /** Starts the informers (also on standbys, so a takeover starts warm) and waits for their first list. */
  async start(): Promise<void> {
    await this.caches.start();
    this.deps.log.info({ usergroups: this.caches.userGroups.list().length, secrets: this.caches.secrets.list().length }, 'caches synced');
  }

  get synced(): boolean {
    return this.caches.synced;
  }

  /** Begins reconciling: every known UserGroup is queued once (level-triggered start). */
  startWorkers(): void {
    this.workers.start(() => {
      this.caches.verified.trustAsFound(this.caches.secrets.list());
      return this.caches.userGroups.list().map((ug) => objectKey(ug.metadata));
    });
  }

  /**
   * What the namespaces' request budgets owe, as Lease annotations (request-budget-record.ts): written with every
   * renewal of this replica's Lease, so the next owner of a namespace does not start it with a full budget.
   */
  requestBudgetAnnotations(): Record<string, string> {
    return budgetAnnotations(this.budgets, Date.now());
  }

  /**
   * Takes on the debts another Lease records (the one a new leader took over; a shard peer's, for the namespaces
   * this controller owns). Before the workers start, so no request is answered from a budget the last owner spent.
   */
  takeOverRequestBudgets(annotations: Readonly<Record<string, string>>): void {
    takeOverDebts(this.budgets, annotations, Date.now(), this.deps.owns);
  }

  /**
   * Carries on what the controller this one replaces owed (a shard's share changed), all of it: what moves away stays
   * on this replica's Lease until it is paid off, for the member that takes it over.
   */
  inheritRequestBudgets(previous: Controller): void {
    for (const kind of REQUEST_KINDS) for (const [ns, ms] of previous.budgets[kind].owed()) this.budgets[kind].owe(ns, ms);
  }

  /** Stops taking work; in-flight reconciles may finish within `graceMs` (graceful shutdown, a share moving away). */
  stopWorkers(graceMs: number): Promise<void> {
    return this.workers.stop(graceMs);
  }

  /** Stops at once, aborting in-flight reconciles and their service calls: the Lease is lost. */
  abortWorkers(): Promise<void> {
    return this.workers.abort();
  }

  async stop(graceMs: number): Promise<void> {
    await this.workers.stop(graceMs);
    await this.caches.stop();
    await this.recorder.flush();
  }

  /** The longest time any informer has been failing to list or watch (for /healthz). */
  watchFailingForMs(): number {
    return this.caches.watchFailingForMs();
  }

  /** The work queue's in-flight work (for the workqueue gauges); undefined while the workers are stopped. */
  queueInFlight(): { unfinishedSeconds: number; longestSeconds: number } | undefined {
    return this.workers.inFlight();
  }

  /** Each cached resource's list and watch counts (for the usergroup_informer_* metrics). */
  informerStats(): Map<string, InformerStats> {
    return informerTotals(this.caches.informerStats());
  }

  /** The token schedules of UserGroups with scheduled rotation (for the usergroup_token_* gauges). */
  tokenSchedules(): Iterable<TokenScheduleSample> {
    return tokenSchedules(this.caches.userGroups.list(), this.deps.settings.minTokenAgeMs);
  }

  /** UserGroups per "ready/reason" (for the usergroup_usergroups gauge). */
  countByReadyReason(): Map<string, number> {
    return countByReadyReason(this.caches.userGroups.list());
  }

  /** UserGroups and token Secrets in the caches that carry the rotate-on-delete finalizer. */
  rotateOnDeleteFinalizers(): number {
    return rotateOnDeleteFinalizers(this.caches.userGroups.list()) + rotateOnDeleteFinalizers(this.caches.secrets.list());
  }

  /**
   * What this controller says of the rotate-on-delete finalizer on its Lease: `active` while it keeps them; with
   * --rotate-on-delete=false, `released` once its synced caches show none left (a rollback below 0.3.0 is safe), else
   * `releasing`. Counted only then: a scan of the caches each Lease write (every --retry-period) costs the default
   * nothing.
   */
  rotateOnDeleteState(): Record<string, string> {
    const state = this.deps.settings.rotateOnDelete ? 'active' : this.caches.synced && this.rotateOnDeleteFinalizers() === 0 ? 'released' : 'releasing';
    return { [ROTATE_ON_DELETE_STATE_ANNOTATION]: state };
  }

  /** Cache events → UserGroup keys (triggers.ts), and what else an event means for the connections and Events. */
  private wireTriggers(): void {
    const { caches, triggerView: view } = this;
    const queue = (triggers: readonly Trigger[]): void => {
      for (const t of triggers) this.workers.add(t.key, t.urgent);
    };
    caches.userGroups.on((type, ug, old) => {
      if (!this.workers.active) return;
      if (type === 'deleted') this.deleted(ug);
      queue(userGroupTriggers(type, ug, old, view));
    });
    caches.secrets.on((_type, secret) => {
      if (this.workers.active) queue(tokenSecretTriggers(secret));
    });
    caches.services.on((_type, service) => {
      this.connections.forgetNamespace(service.metadata.namespace);
      if (this.workers.active) queue(serviceTriggers(service, view));
    });
    caches.clusterServices.on((_type, service, old) => {
      for (const s of [service, old])
        if (s?.spec.ok) this.connections.forgetSecret(`${s.spec.value.apiKeySecretRef.namespace}/${s.spec.value.apiKeySecretRef.name}`);
      if (this.workers.active) queue(clusterServiceTriggers(service, view));
    });
    caches.claims.on((type, claim) => {
      if (this.workers.active) queue(claimTriggers(type, claim, view));
    });
    caches.namespaces.on((type, ns, old) => {
      if (this.workers.active) queue(namespaceTriggers(type, ns, old, view));
    });
  }

  /** Only the active controller speaks; standbys watch too but stay quiet. */
  private deleted(ug: UserGroup): void {
    this.deps.log.info({ usergroup: objectKey(ug.metadata) }, 'UserGroup deleted; the group stays at the service');
    this.ports.events.emit(ug, Events.deleted(ug.spec.ok && ug.spec.value.deletionPolicy === 'Retain'));
  }
}

/**
 * Runs before every write and every service call: a process frozen past its renew deadline (SIGSTOP, a long pause)
 * resumes in the event loop's poll phase, where I/O callbacks of work begun before the freeze run before the
 * deadline timer can; judged here by the clock, the elector steps down (aborting the work at once) and the effect
 * does not happen.
 */
function leaseFence(lease: LeaseCheck): () => void {
  return () => {
    if (!lease.holdsLease()) throw new DOMException('the Lease was not renewed within the renew deadline', 'AbortError');
  };
}

/** The connections to the service, resolved from the caches; every call fenced by the Lease. */
function connections(deps: ControllerDeps, caches: Caches, secrets: SecretWriter, fence: () => void): Connections {
  const { settings } = deps;
  return new Connections({
    defaultService: settings.defaultService,
    services: caches.services,
    clusterServices: caches.clusterServices,
    namespaceLabels: (ns) => caches.namespaces.get(objectKey({ namespace: '', name: ns }))?.metadata.labels,
    readSecret: (ns, name) => secrets.read(ns, name),
    clientOptions: { ...deps.serviceClient, timeoutMs: settings.serviceTimeoutMs },
    qps: settings.serviceQps,
    burst: settings.serviceBurst,
    log: deps.log,
    egress: egressPolicy(settings),
    beforeCall: fence,
  });
}

/** A reconcile's count, to its hook. */
function countIn(hooks: ControllerHooks, counted: ReconcileCount): void {
  switch (counted.metric) {
    case 'token-rotated':
      return hooks.tokenRotated?.(counted.trigger);
    case 'rotation-failed':
      return hooks.rotationFailed?.(counted.trigger);
    case 'workload-restarted':
      return hooks.workloadRestarted?.(counted.kind, counted.outcome);
    case 'deletion-rotation':
      return hooks.deletionRotation?.(counted.result);
  }
}

function egressPolicy(settings: Pick<ControllerSettings, 'allowedServiceHosts' | 'allowHttpServices'>): EgressPolicy {
  const parsed = parseEgressPolicy(settings.allowedServiceHosts, settings.allowHttpServices);
  // The CLI refuses bad patterns at startup; reaching this is a programming error.
  if (!parsed.ok) throw new Error(`invalid egress policy: ${parsed.messages.join('; ')}`);
  return parsed.policy;
}
