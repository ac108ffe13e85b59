import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { CLAIM_NAMESPACE_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, ROTATE_ANNOTATION, USERGROUP_KIND } from '../api/constants.js';
import { isRecord } from '../platform/json-value.js';
import { parseClaim, type UserGroupClaim } from '../api/claim.js';
import { parseClusterUserGroupService, type ClusterUserGroupService } from '../api/clusterusergroupservice.js';
import { objectKey, parseMeta, sameStringMap, type ObjectMeta } from '../api/meta.js';
import { parseSecretName, parseTokenSecretMeta, type ObservedSecret, type SecretName } from '../api/secret.js';
import { parseUserGroup, type ServiceRef, type UserGroup } from '../api/usergroup.js';
import { parseUserGroupService, type UserGroupService } from '../api/usergroupservice.js';
import type { ServiceClientOptions } from '../service/client.js';
import type { SecretValue } from '../service/secret-value.js';
import { InformerGroup } from '../kube/cache.js';
import { ClaimWriter } from '../kube/claim-writer.js';
import { EventRecorder } from '../kube/events.js';
import type { KubeClient } from '../kube/http.js';
import { Informer, type Cached, type InformerStats } from '../kube/informer.js';
import { paths } from '../kube/paths.js';
import { SecretWriter } from '../kube/secret-writer.js';
import { WorkloadRestarter } from '../kube/workload-restarter.js';
import type { RestartKind } from '../api/workload.js';
import { StatusWriter } from '../kube/status-writer.js';
import { WorkQueue, type WorkQueueMetrics } from '../kube/workqueue.js';
import { Connections } from './connections.js';
import { Reconciler, regardingUserGroup, type ReconcilerPorts, type RestartOutcome, type RotationTrigger } from './reconciler.js';
import { effectiveMaxTokenAge } from './decide.js';
import { RateCap } from './rate-cap.js';
import { requeueFor, RetryPolicy, type ReconcileResult } from './retry-policy.js';
import { parseEgressPolicy, type EgressPolicy } from '../service/egress-policy.js';
import { KeyMultimap } from './key-multimap.js';
import { UserGroupIdIndex } from './usergroup-index.js';
import { relevantChange } from './relevant-change.js';
import { sleep } from '../platform/sleep.js';

/** What the controller does with each of its caches alike, whatever they hold. */
interface CacheLifecycle {
  start(): void;
  waitForSync(): Promise<void>;
  readonly synced: boolean;
  stop(): Promise<void>;
  readonly informers: readonly { readonly name: string; readonly stats: InformerStats; failingForMs(): number }[];
}

export interface ControllerOptions {
  /** Namespaces to watch; empty = all. */
  readonly namespaces: readonly string[];
  readonly concurrency: number;
  readonly resyncPeriodMs: number;
  /** The global cap on scheduled rotations (--scheduled-rotations-per-minute). */
  readonly scheduledRotationsPerMinute: number;
  /** The floor under spec.rotation.maxTokenAge (--min-token-age). */
  readonly minTokenAgeMs: number;
  /** The global cap on restarts of spec.rolloutRestartTargets (--workload-restarts-per-minute); 0: restarts are off. */
  readonly workloadRestartsPerMinute: number;
  /** The ClusterUserGroupService for UserGroups without spec.serviceRef. */
  readonly defaultService: string | undefined;
  readonly serviceQps: number;
  readonly serviceBurst: number;
  readonly serviceClient: ServiceClientOptions;
  /** Identity in Events (pod name). */
  readonly instance: string;
  readonly watchInactivityMs?: number;
  /** The operator's rules for namespaced UserGroupService URLs (--allowed-service-hosts, --allow-http-services). */
  readonly egress: { readonly allowedHosts: readonly string[]; readonly allowHttp: boolean };
  /**
   * This replica's share of the namespaces (--shard-by-namespace); absent: all. Objects of other namespaces are
   * dropped before they are parsed or cached.
   */
  readonly owns?: (namespace: string) => boolean;
}

/** One UserGroup's token schedule, for metrics. */
export interface TokenSchedule {
  readonly namespace: string;
  readonly name: string;
  readonly issuedSeconds: number;
  readonly maxAgeSeconds: number;
  readonly nextRotationSeconds: number | undefined;
}

export interface ControllerHooks {
  readonly queue?: WorkQueueMetrics;
  readonly reconciled?: (result: 'success' | 'requeue' | 'error', seconds: number) => void;
  readonly tokenRotated?: (trigger: RotationTrigger) => void;
  readonly rotationFailed?: (trigger: RotationTrigger) => void;
  readonly workloadRestarted?: (kind: RestartKind, outcome: RestartOutcome) => void;
  readonly event?: (type: string, reason: string) => void;
  readonly eventDropped?: (type: string, reason: string) => void;
}

/** A namespace as the tenant rules see it: its labels (set by cluster admins). */
interface NamespaceLabels {
  readonly metadata: ObjectMeta;
}

/**
 * Watches UserGroups, their token Secrets, the connections (UserGroupServices, ClusterUserGroupServices),
 * UserGroupClaims and namespaces' labels, turns every change into a UserGroup key on the work queue, and
 * runs the reconciler on `concurrency` workers. Informers run from start(); workers only while
 * startWorkers() is in effect (leader election gates them).
 */
export class Controller {
  readonly userGroups: InformerGroup<UserGroup>;
  readonly secrets: InformerGroup<ObservedSecret>;
  /** Every other Secret, names only: tells whether creating a token Secret can succeed without a read. */
  readonly otherSecrets: InformerGroup<SecretName>;
  readonly services: InformerGroup<UserGroupService>;
  readonly clusterServices: InformerGroup<ClusterUserGroupService>;
  readonly claims: InformerGroup<UserGroupClaim>;
  readonly namespaces: InformerGroup<NamespaceLabels>;
  private readonly index = new UserGroupIdIndex();
  /** Owner UserGroup uid → keys of the token Secrets it controls. */
  private readonly secretsByOwner = new KeyMultimap();
  /**
   * Token Secret key → the resourceVersion whose data this process wrote or checked, and the token itself
   * when it knows it (a rotation then needs no read). Only tokens from the service, one per UserGroup.
   */
  private readonly verifiedSecrets = new Map<string, { readonly rv: string; readonly token: SecretValue | undefined }>();
  /** Holder UserGroup uid → names of the UserGroupClaims it holds. */
  private readonly claimsByHolder = new KeyMultimap();
  private queue: WorkQueue | undefined;
  private workers: Promise<void>[] = [];
  /** A stop in progress; a start waits for it. */
  private stopping: Promise<void> | undefined;
  /** What the last start or stop asked for, applied once a stop in progress is done. */
  private wantWorkers = false;
  private workAbort: AbortController | undefined;
  private readonly recorder: EventRecorder;
  private readonly reconciler: Reconciler;
  private readonly connections: Connections;

  constructor(
    client: KubeClient,
    private readonly options: ControllerOptions,
    private readonly log: Logger,
    private readonly hooks: ControllerHooks = {},
  ) {
    const informerOptions = { client, log, ...(options.watchInactivityMs !== undefined ? { inactivityMs: options.watchInactivityMs } : {}) };
    const owns = options.owns;
    const admit = (namespaceOf: (metadata: Readonly<Record<string, unknown>>) => unknown): { admit?: (m: Readonly<Record<string, unknown>>) => boolean } =>
      owns
        ? {
            admit: (m) => {
              const ns = namespaceOf(m);
              return typeof ns === 'string' && owns(ns);
            },
          }
        : {};
    const byNamespace = admit((m) => m['namespace']);
    const group = <T extends Cached>(
      name: string,
      path: (ns?: string) => string,
      parse: (raw: unknown) => T | undefined,
      labelSelector?: string,
      metadataOnly = false,
    ): InformerGroup<T> => {
      const namespaces = options.namespaces.length > 0 ? options.namespaces : [''];
      return new InformerGroup(
        new Map(
          namespaces.map((ns) => [
            ns,
            new Informer<T>({
              ...informerOptions,
              name,
              path: path(ns || undefined),
              parse,
              ...(labelSelector ? { labelSelector } : {}),
              metadataOnly,
              ...byNamespace,
            }),
          ]),
        ),
      );
    };
    this.userGroups = group('usergroups', paths.userGroups, (raw) => okOrUndefined(parseUserGroup(raw)));
    // Metadata only, and only Secrets a UserGroup controls: the label is no filter a tenant cannot put on
    // its own 1 MiB Secrets. The data is read when a reconcile needs it.
    this.secrets = group('secrets', paths.secrets, parseTokenSecretMeta, `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`, true);
    this.otherSecrets = group('other-secrets', paths.secrets, (raw) => okOrUndefined(parseSecretName(raw)), `${MANAGED_BY_LABEL}!=${MANAGED_BY_VALUE}`, true);
    this.services = group('usergroupservices', paths.userGroupServices, (raw) => okOrUndefined(parseUserGroupService(raw)));
    // Cluster-scoped: one informer whatever --namespaces says (a shard still needs the connections and claims).
    const cluster = <T extends Cached>(
      name: string,
      path: string,
      parse: (raw: unknown) => T | undefined,
      metadataOnly = false,
      shard: { admit?: (m: Readonly<Record<string, unknown>>) => boolean } = {},
    ): InformerGroup<T> => new InformerGroup(new Map([['', new Informer<T>({ ...informerOptions, name, path, parse, metadataOnly, ...shard })]]));
    this.clusterServices = cluster('clusterusergroupservices', paths.clusterUserGroupServices(), (raw) => okOrUndefined(parseClusterUserGroupService(raw)));
    // A shard keeps its own namespaces' claims, and any other it had to read (a refusal then hears of its release).
    this.claims = cluster(
      'usergroupclaims',
      paths.claims(),
      (raw) => okOrUndefined(parseClaim(raw)),
      false,
      admit((m) => (isRecord(m['labels']) ? m['labels'][CLAIM_NAMESPACE_LABEL] : undefined)),
    );
    this.namespaces = cluster(
      'namespaces',
      paths.namespaces(),
      (raw) => {
        const meta = okOrUndefined(parseMeta(typeof raw === 'object' && raw !== null ? (raw as { metadata?: unknown }).metadata : undefined));
        return meta && { metadata: meta };
      },
      true,
      admit((m) => m['name']),
    );

    const secretWriter = new SecretWriter(client);
    const claimWriter = new ClaimWriter(client);
    const statusWriter = new StatusWriter(client);
    this.recorder = new EventRecorder(client, {
      controller: 'usergroup.dev/usergroup-operator',
      instance: options.instance,
      log,
      ...(hooks.event ? { onEmit: hooks.event } : {}),
      ...(hooks.eventDropped ? { onDrop: hooks.eventDropped } : {}),
    });
    this.connections = new Connections({
      defaultService: options.defaultService,
      services: this.services,
      clusterServices: this.clusterServices,
      namespaceLabels: (ns) => this.namespaces.get(objectKey({ namespace: '', name: ns }))?.metadata.labels,
      readSecret: (ns, name) => secretWriter.get(ns, name),
      clientOptions: options.serviceClient,
      qps: options.serviceQps,
      burst: options.serviceBurst,
      log,
      egress: egressPolicy(options.egress),
      beforeCall: () => this.fence(),
    });
    const caps = {
      rotations: new RateCap(options.scheduledRotationsPerMinute),
      restarts: new RateCap(Math.max(options.workloadRestartsPerMinute, 1)),
    };
    this.reconciler = new Reconciler(this.reconcilerPorts({ secretWriter, claimWriter, statusWriter, workloads: new WorkloadRestarter(client) }, caps), {
      resyncPeriodMs: options.resyncPeriodMs,
      minTokenAgeMs: options.minTokenAgeMs,
      workloadRestarts: options.workloadRestartsPerMinute > 0,
      log,
    });
    this.wireEvents();
  }

  /** What the reconciler reads and does, over the caches and the writers; every write is fenced by the Lease. */
  private reconcilerPorts(
    writers: { secretWriter: SecretWriter; claimWriter: ClaimWriter; statusWriter: StatusWriter; workloads: WorkloadRestarter },
    caps: { rotations: RateCap; restarts: RateCap },
  ): ReconcilerPorts {
    const { secretWriter, claimWriter, statusWriter, workloads } = writers;
    return {
      userGroup: (key) => this.userGroups.get(key),
      userGroupsWithId: (id) => this.index.keys(id).flatMap((k) => this.userGroups.get(k) ?? []),
      claim: (name) => this.claims.get(objectKey({ namespace: '', name })),
      readClaim: async (name) => {
        // Kept: a shard's cache may not hold another namespace's claim, and must hear when it is released.
        const claim = await claimWriter.get(name);
        if (claim) this.claims.upsertLocal(claim);
        return claim;
      },
      createClaim: async (spec) => {
        this.fence();
        return this.keepClaim(await claimWriter.create(spec));
      },
      replaceClaim: async (current, spec) => {
        this.fence();
        return this.keepClaim(await claimWriter.replace(current, spec));
      },
      releaseClaim: (claim) => {
        this.fence();
        return claimWriter.delete(claim);
      },
      cachedSecret: (key) => this.secrets.get(key),
      secretVerified: (key, rv) => this.verifiedSecrets.get(key)?.rv === rv,
      heldToken: (key, rv) => {
        const known = this.verifiedSecrets.get(key);
        return known?.rv === rv ? known.token : undefined;
      },
      markSecretVerified: (key, rv, token) => this.verifiedSecrets.set(key, { rv, token }),
      otherSecretExists: (key) => this.otherSecrets.get(key) !== undefined,
      readSecret: (ns, name) => secretWriter.get(ns, name),
      writeSecret: async (desired, rv) => {
        this.fence();
        const written = await secretWriter.write(desired, rv);
        // The cache holds what the watch would deliver: metadata only, trimmed.
        const cached = written.ok ? parseTokenSecretMeta(toPartial(written.secret)) : undefined;
        if (cached) this.secrets.upsertLocal(cached);
        return written;
      },
      ownedSecrets: (ug) => this.secretsByOwner.get(ug.metadata.uid).flatMap((key) => this.secrets.get(key) ?? []),
      deleteSecret: (secret) => {
        this.fence();
        return secretWriter.delete(secret.metadata.namespace, secret.metadata.name, secret.metadata.uid);
      },
      patchStatus: async (ug, status, clear) => {
        this.fence();
        const updated = await statusWriter.patch(ug.metadata.namespace, ug.metadata.name, status, clear);
        if (!updated) return;
        this.userGroups.upsertLocal(updated);
        // The answer is newer than the watch may be: a spec change (or rotation request) that landed just before our
        // patch would reach the cache older than this and so never look like news. Ours to notice, then.
        if (relevantChange(ug, updated)) this.enqueue(objectKey(ug.metadata));
      },
      resolveConnection: (ns, ref, id) => this.connections.resolve(ns, ref, id),
      invalidateConnection: (connection) => this.connections.forgetSecret(connection.apiKeySecret),
      event: (ug, type, reason, action, note) => this.recorder.emit(regardingUserGroup(ug), type, reason, action, note),
      tokenRotated: (trigger) => this.hooks.tokenRotated?.(trigger),
      rotationFailed: (trigger) => this.hooks.rotationFailed?.(trigger),
      scheduledRotationSlot: (key) => caps.rotations.take(key),
      readWorkload: (ns, target) => workloads.get(ns, target),
      restartWorkload: (ns, target, rv, userGroupName, value) => {
        this.fence();
        return workloads.restart(ns, target, rv, userGroupName, value);
      },
      workloadRestartSlot: (key) => caps.restarts.take(key),
      workloadRestarted: (kind, outcome) => this.hooks.workloadRestarted?.(kind, outcome),
      now: () => Date.now(),
    };
  }

  /** Starts the informers (also on standbys, so a takeover starts warm) and waits for their first list. */
  async start(): Promise<void> {
    for (const group of this.caches()) group.start();
    await Promise.all(this.caches().map((g) => g.waitForSync()));
    this.log.info({ usergroups: this.userGroups.list().length, secrets: this.secrets.list().length }, 'caches synced');
  }

  get synced(): boolean {
    return this.caches().every((g) => g.synced);
  }

  /** The longest time any informer has been failing to list or watch. */
  watchFailingForMs(): number {
    return Math.max(
      0,
      ...this.caches()
        .flatMap((g) => g.informers)
        .map((i) => i.failingForMs()),
    );
  }

  /** Every cache the controller keeps, for what applies to all of them alike. */
  private caches(): CacheLifecycle[] {
    return [this.userGroups, this.secrets, this.otherSecrets, this.services, this.clusterServices, this.claims, this.namespaces];
  }

  /** A claim we just wrote is known at once, before its watch event (the next reconcile must not create it again). */
  private keepClaim<R extends { ok: boolean; claim?: UserGroupClaim }>(result: R): R {
    if (result.claim) this.claims.upsertLocal(result.claim);
    return result;
  }

  /**
   * Begins reconciling: every known UserGroup is queued once (level-triggered start). While a stop is still
   * draining, the start waits for it, so two generations of workers never run side by side.
   */
  startWorkers(): void {
    this.wantWorkers = true;
    if (this.queue || this.stopping) return;
    const queue = new WorkQueue({ rateLimiter: new RetryPolicy(), ...(this.hooks.queue ? { metrics: this.hooks.queue } : {}) });
    const abort = new AbortController();
    this.queue = queue;
    this.workAbort = abort;
    // What is there when work starts (a restart, a takeover) is taken as the operator's own writing: reading
    // 10,000 Secrets first would cost more than it protects. From now on, a resourceVersion this process did
    // not write or check is someone else's change, and its data is read before it is believed.
    this.verifiedSecrets.clear();
    for (const secret of this.secrets.list()) this.verifiedSecrets.set(objectKey(secret.metadata), { rv: secret.metadata.resourceVersion, token: undefined });
    for (const ug of this.userGroups.list()) queue.add(objectKey(ug.metadata));
    this.workers = Array.from({ length: this.options.concurrency }, () => this.work(queue, abort.signal));
    this.log.info({ concurrency: this.options.concurrency }, 'workers started');
  }

  /**
   * Stops taking work. With a grace period, in-flight reconciles may finish (graceful
   * shutdown); with 0 they are abandoned at once (a leader that lost its lease must
   * stop acting immediately — their service calls are aborted), also when a graceful stop is under way.
   */
  stopWorkers(graceMs: number): Promise<void> {
    this.wantWorkers = false;
    if (graceMs === 0) this.workAbort?.abort();
    this.stopping ??= this.drain(graceMs).finally(() => {
      this.stopping = undefined;
      if (this.wantWorkers) this.startWorkers();
    });
    return this.stopping;
  }

  private async drain(graceMs: number): Promise<void> {
    const { queue, workers, workAbort } = this;
    if (!queue) return;
    this.queue = undefined;
    queue.shutDown();
    if (graceMs > 0) {
      // The grace timer is cancelled once the workers are done, so it never holds the process up.
      const grace = new AbortController();
      const drained = await Promise.race([Promise.all(workers).then(() => true), sleep(graceMs, grace.signal).then(() => false)]);
      grace.abort();
      if (!drained) this.log.warn({ graceMs }, 'reconciles still running after the grace period; aborting them');
    }
    workAbort?.abort();
    await Promise.allSettled(workers);
    this.workers = [];
    this.log.info('workers stopped');
  }

  /** Leader election's check of the Lease by the clock (run.ts sets it); without leader election, always held. */
  holdsLease: () => boolean = () => true;

  /**
   * Runs before every write and service call. A process frozen past its renew deadline (SIGSTOP, a long pause)
   * resumes in the event loop's poll phase, where I/O callbacks of work begun before the freeze run before the
   * deadline timer can: judged by the clock here, the elector steps down (its onStoppedLeading aborts the work
   * at once) and this effect does not happen.
   */
  private fence(): void {
    if (!this.holdsLease()) throw new DOMException('the Lease was not renewed within the renew deadline', 'AbortError');
  }

  async stop(graceMs: number): Promise<void> {
    await this.stopWorkers(graceMs);
    await Promise.all(this.caches().map((g) => g.stop()));
    await this.recorder.flush();
  }

  /** The work queue's in-flight work (for the workqueue gauges); undefined while the workers are stopped. */
  queueInFlight(): { unfinishedSeconds: number; longestSeconds: number } | undefined {
    const queue = this.queue;
    return queue && { unfinishedSeconds: queue.unfinishedWorkSeconds(), longestSeconds: queue.longestRunningProcessorSeconds() };
  }

  /** Each cached resource's list and watch counts, summed over its namespaces (for the usergroup_informer_* metrics). */
  informerStats(): Map<string, InformerStats> {
    const byResource = new Map<string, InformerStats>();
    for (const informer of this.caches().flatMap((g) => g.informers)) {
      const sum = byResource.get(informer.name);
      const own = informer.stats;
      byResource.set(
        informer.name,
        sum
          ? {
              lists: sum.lists + own.lists,
              watchLists: sum.watchLists + own.watchLists,
              watches: sum.watches + own.watches,
              gone: sum.gone + own.gone,
              silent: sum.silent + own.silent,
              failures: sum.failures + own.failures,
              oversizedPages: sum.oversizedPages + own.oversizedPages,
              largestPageBytes: Math.max(sum.largestPageBytes, own.largestPageBytes),
            }
          : { ...own },
      );
    }
    return byResource;
  }

  /**
   * The token schedule of every UserGroup with scheduled rotation, as its status reports it (seconds since the
   * epoch; the age with the operator's floor), for the usergroup_token_* gauges.
   */
  *tokenSchedules(): Generator<TokenSchedule> {
    for (const ug of this.userGroups.list()) {
      const maxAgeMs = ug.spec.ok ? effectiveMaxTokenAge(ug.spec.value, this.options.minTokenAgeMs) : undefined;
      const issued = Date.parse(ug.status.rotation?.tokenIssuedTime ?? '');
      if (maxAgeMs === undefined || Number.isNaN(issued)) continue;
      const next = Date.parse(ug.status.rotation?.nextRotationTime ?? '');
      yield {
        namespace: ug.metadata.namespace,
        name: ug.metadata.name,
        issuedSeconds: issued / 1000,
        maxAgeSeconds: maxAgeMs / 1000,
        nextRotationSeconds: Number.isNaN(next) ? undefined : next / 1000,
      };
    }
  }

  /** UserGroups per "ready/reason", for the usergroup_usergroups gauge. */
  countByReadyReason(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const ug of this.userGroups.list()) {
      const ready = ug.status.conditions?.find((c) => c.type === 'Ready');
      const key = `${ready?.status ?? 'Unknown'}/${ready?.reason ?? ''}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  }

  private enqueue(key: string, urgent = false): void {
    this.queue?.add(key, urgent);
  }

  private wireEvents(): void {
    this.userGroups.on((type, ug, old) => {
      this.index.update(type, ug);
      const key = objectKey(ug.metadata);
      if (type === 'deleted') {
        this.onDeleted(ug);
      } else if (type === 'updated' && old && !relevantChange(old, ug)) {
        return;
      }
      // A rotation request has someone waiting on it (kubectl usergroup rotate): ahead of background work.
      this.enqueue(key, type === 'updated' && old !== undefined && old.metadata.annotations[ROTATE_ANNOTATION] !== ug.metadata.annotations[ROTATE_ANNOTATION]);
      // A claim's holder that went (or whose id moved) lets a waiting UserGroup of its namespace take the id over.
      const gone = type === 'deleted' || ug.metadata.deletionTimestamp !== undefined;
      const id = ug.spec.ok ? ug.spec.value.userGroupId : undefined;
      const oldId = old?.spec.ok ? old.spec.value.userGroupId : undefined;
      if (oldId !== undefined && oldId !== id) this.enqueueId(oldId, key);
      // Only a holder going frees the id (a claim, or a synced UserGroup from before claims): a duplicate
      // going changes nothing for the others, and 2,000 of them deleted must not cost 2,000² reconciles.
      if (gone && id !== undefined && (this.claimsByHolder.get(ug.metadata.uid).length > 0 || ug.status.syncedHash !== undefined)) this.enqueueId(id, key);
    });
    this.secrets.on((type, secret) => {
      const owner = secret.metadata.ownerReferences.find((o) => o.controller && o.kind === USERGROUP_KIND);
      if (!owner) return;
      const key = objectKey(secret.metadata);
      if (type === 'deleted') this.verifiedSecrets.delete(key);
      if (type === 'deleted') this.secretsByOwner.delete(owner.uid, key);
      else this.secretsByOwner.add(owner.uid, key);
      this.enqueue(objectKey({ namespace: secret.metadata.namespace, name: owner.name }));
    });
    this.services.on((_type, service) => {
      this.connections.forgetNamespace(service.metadata.namespace);
      this.enqueueWhere(
        (ug, ref) => ug.metadata.namespace === service.metadata.namespace && ref?.kind === 'UserGroupService' && ref.name === service.metadata.name,
      );
    });
    this.clusterServices.on((_type, service, old) => {
      for (const s of [service, old])
        if (s?.spec.ok) this.connections.forgetSecret(`${s.spec.value.apiKeySecretRef.namespace}/${s.spec.value.apiKeySecretRef.name}`);
      const name = service.metadata.name;
      this.enqueueWhere((_ug, ref) => (ref ? ref.kind === 'ClusterUserGroupService' && ref.name === name : this.options.defaultService === name));
    });
    // The holder already knows what it just wrote; the others with that id (waiting, or refused) re-decide. A
    // released claim concerns all of them, the holder included (it claims again).
    this.claims.on((type, claim, old) => {
      if (old && old.spec.userGroup.uid !== claim.spec.userGroup.uid) this.claimsByHolder.delete(old.spec.userGroup.uid, claim.metadata.name);
      if (type === 'deleted') this.claimsByHolder.delete(claim.spec.userGroup.uid, claim.metadata.name);
      else this.claimsByHolder.add(claim.spec.userGroup.uid, claim.metadata.name);
      const holder = objectKey({ namespace: claim.spec.namespace, name: claim.spec.userGroup.name });
      this.enqueueId(claim.spec.userGroupId, type === 'deleted' ? undefined : holder);
    });
    this.namespaces.on((type, ns, old) => {
      if (type === 'updated' && old && sameStringMap(old.metadata.labels, ns.metadata.labels)) return;
      this.enqueueWhere((ug) => ug.metadata.namespace === ns.metadata.name);
    });
  }

  /** Queues every UserGroup declaring this userGroupId, but `except`. */
  private enqueueId(userGroupId: string, except?: string): void {
    for (const other of this.index.keys(userGroupId)) if (other !== except) this.enqueue(other);
  }

  private enqueueWhere(match: (ug: UserGroup, ref: ServiceRef | undefined) => boolean): void {
    if (!this.queue) return;
    for (const ug of this.userGroups.list()) if (match(ug, ug.spec.ok ? ug.spec.value.serviceRef : undefined)) this.enqueue(objectKey(ug.metadata));
  }

  private onDeleted(ug: UserGroup): void {
    // Only the active controller speaks; standbys watch too but stay quiet.
    if (!this.queue) return;
    this.log.info({ usergroup: objectKey(ug.metadata) }, 'UserGroup deleted; the group stays at the service');
    this.recorder.emit(
      regardingUserGroup(ug),
      'Normal',
      'Deleted',
      'Delete',
      'UserGroup deleted: the service has no delete operation, so the user group stays there; its token Secret is removed by garbage collection',
    );
  }

  private async work(queue: WorkQueue, signal: AbortSignal): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const started = performance.now();
      let result: ReconcileResult;
      try {
        result = await this.reconciler.reconcile(key, randomBytes(4).toString('hex'), signal, () => queue.add(key));
      } catch (err) {
        this.log.error({ usergroup: key, err: String(err) }, 'reconcile threw');
        result = { kind: 'failed', cause: 'crashed' };
      }
      const seconds = (performance.now() - started) / 1000;
      const requeue = requeueFor(result);
      if (requeue.kind === 'forget') {
        queue.forget(key);
        if (requeue.afterMs !== undefined) queue.addAfter(key, requeue.afterMs);
      } else {
        queue.addRateLimited(key, requeue.retryClass, requeue.atLeastMs);
      }
      this.hooks.reconciled?.(result.kind === 'done' ? (result.resyncAfterMs !== undefined ? 'requeue' : 'success') : 'error', seconds);
      queue.done(key);
    }
  }
}

/** The PartialObjectMetadata shape of a Secret we read or wrote whole, for the metadata-only cache. */
function toPartial(secret: ObservedSecret): unknown {
  const m = secret.metadata;
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
      labels: m.labels,
      annotations: m.annotations,
      ownerReferences: m.ownerReferences.map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid, controller: o.controller })),
    },
  };
}

function egressPolicy(egress: ControllerOptions['egress']): EgressPolicy {
  const parsed = parseEgressPolicy(egress.allowedHosts, egress.allowHttp);
  // The CLI refuses bad patterns at startup; reaching this is a programming error.
  if (!parsed.ok) throw new Error(`invalid egress policy: ${parsed.messages.join('; ')}`);
  return parsed.policy;
}

function okOrUndefined<T>(parsed: { ok: true; value: T } | { ok: false; error: string }): T | undefined {
  return parsed.ok ? parsed.value : undefined;
}
