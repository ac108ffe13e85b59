// The operator's Prometheus metrics: what they count, and what is read from the controller at scrape time.
import { getHeapStatistics } from 'node:v8';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ServiceCallSample } from '../service/client.js';
import type { InformerStats } from '../kube/informer.js';
import type { WorkQueueMetrics } from '../kube/workqueue.js';

/** One UserGroup's token schedule (seconds since the epoch; the maximum age in seconds). */
export interface TokenScheduleSample {
  readonly namespace: string;
  readonly name: string;
  readonly issuedSeconds: number;
  readonly maxAgeSeconds: number;
  readonly nextRotationSeconds: number | undefined;
}

/** What the metrics read from the controller at work now, at scrape time. */
export interface MetricsSource {
  /** The token schedule of each UserGroup with scheduled rotation. */
  tokenSchedules(): Iterable<TokenScheduleSample>;
  /** Counts of UserGroups per "ready/reason". */
  userGroupCounts(): ReadonlyMap<string, number>;
  /** The work queue's in-flight work; undefined while not at work. */
  queueInFlight(): { readonly unfinishedSeconds: number; readonly longestSeconds: number } | undefined;
  /** Each cached resource's list and watch counts. */
  informerStats(): ReadonlyMap<string, InformerStats>;
  /** With --shard-by-namespace: how many namespaces this replica owns now; undefined otherwise. */
  ownedNamespaces(): number | undefined;
  /** UserGroups and token Secrets in the caches that carry the rotate-on-delete finalizer. */
  rotateOnDeleteFinalizers(): number;
}

const NO_SOURCE: MetricsSource = {
  tokenSchedules: () => [],
  userGroupCounts: () => new Map(),
  queueInFlight: () => undefined,
  informerStats: () => new Map(),
  ownedNamespaces: () => undefined,
  rotateOnDeleteFinalizers: () => 0,
};

/** Buckets for reconcile and service latency: 1 ms to 60 s. */
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The operator's Prometheus metrics. Label values are only fixed vocabularies
 * (results, operations, status codes, reasons): never names, ids, tokens or keys.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly reconcileTotal = new Counter({
    name: 'usergroup_reconcile_total',
    help: 'Reconciles by result (success, requeue, error).',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly reconcileErrors = new Counter({
    name: 'usergroup_reconcile_errors_total',
    help: 'Reconciles that ended in an error and a retry.',
    registers: [this.registry],
  });
  readonly reconcileDuration = new Histogram({
    name: 'usergroup_reconcile_duration_seconds',
    help: 'Reconcile duration by result.',
    labelNames: ['result'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({ name: 'workqueue_depth', help: 'Keys waiting in the work queue.', labelNames: ['name'], registers: [this.registry] });
  readonly queueAdds = new Counter({ name: 'workqueue_adds_total', help: 'Keys added to the work queue.', labelNames: ['name'], registers: [this.registry] });
  readonly queueRetries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Delayed re-adds (backoff, Retry-After, resync).',
    labelNames: ['name'],
    registers: [this.registry],
  });
  readonly queueLatency = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'Time a key waits in the queue before a worker takes it.',
    labelNames: ['name'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly workDuration = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'Time a worker spends on a key.',
    labelNames: ['name'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly serviceRequests = new Counter({
    name: 'usergroup_service_requests_total',
    help: 'Calls to the analytics service by operation and HTTP status code ("none" when no response arrived).',
    labelNames: ['operation', 'code'],
    registers: [this.registry],
  });
  readonly serviceDuration = new Histogram({
    name: 'usergroup_service_request_duration_seconds',
    help: 'Service call latency by operation.',
    labelNames: ['operation'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly kubeRequests = new Counter({
    name: 'usergroup_kube_requests_total',
    help: 'Requests to the Kubernetes apiserver by HTTP method (WATCH for watch opens), resource and status code ("none" when no response arrived).',
    labelNames: ['verb', 'resource', 'code'],
    registers: [this.registry],
  });
  readonly tokensRotated = new Counter({
    name: 'usergroup_tokens_rotated_total',
    help: 'Tokens rotated at the service, by trigger: requested (the annotation), scheduled (spec.rotation.maxTokenAge), adoption.',
    labelNames: ['trigger'],
    registers: [this.registry],
  });
  readonly rotationFailures = new Counter({
    name: 'usergroup_rotation_failures_total',
    help: 'Rotations the service did not do (refused, failed, no answer), by trigger; each is retried. Deferred ones are not counted.',
    labelNames: ['trigger'],
    registers: [this.registry],
  });
  readonly deleteRotations = new Counter({
    name: 'usergroup_delete_rotations_total',
    help: 'Deletions of UserGroups with spec.deletionPolicy Rotate that held the rotate-on-delete finalizer, by result: rotated (or the token was already invalid), skipped (no call: suspended, refused, no trusted token, policy back to Retain), abandoned (the limit passed or the connection is gone; the token stays valid).',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly workloadRestarts = new Counter({
    name: 'usergroup_workload_restarts_total',
    help: 'spec.rolloutRestartTargets after a token change, by kind and outcome: restarted, not-allowed (its owner did not name the UserGroup), missing, failed (retried).',
    labelNames: ['kind', 'outcome'],
    registers: [this.registry],
  });
  // One series per UserGroup with spec.rotation.maxTokenAge (as cert-manager exports one per Certificate).
  readonly tokenIssued = this.scheduleGauge(
    'usergroup_token_issued_timestamp_seconds',
    'When the stored token was obtained (created, adopted, rotated).',
    (s) => s.issuedSeconds,
  );
  readonly tokenMaxAge = this.scheduleGauge(
    'usergroup_token_max_age_seconds',
    "spec.rotation.maxTokenAge, raised to the operator's --min-token-age: the token should never be older.",
    (s) => s.maxAgeSeconds,
  );
  readonly tokenNextRotation = this.scheduleGauge(
    'usergroup_token_next_rotation_timestamp_seconds',
    'When the scheduled rotation falls due; a time in the past means it is overdue.',
    (s) => s.nextRotationSeconds,
  );
  readonly userGroups = (() => {
    const counts = (): ReadonlyMap<string, number> => this.source.userGroupCounts();
    return new Gauge({
      name: 'usergroup_usergroups',
      help: 'UserGroups by Ready status and reason.',
      labelNames: ['ready', 'reason'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [key, n] of counts()) {
          const [ready = 'Unknown', reason = ''] = key.split('/');
          this.set({ ready, reason }, n);
        }
      },
    });
  })();
  readonly rotateOnDeleteFinalizers = (() => {
    const count = (): number => this.source.rotateOnDeleteFinalizers();
    return new Gauge({
      name: 'usergroup_rotate_on_delete_finalizers',
      help: "UserGroups and token Secrets (in this replica's caches) carrying the usergroup.dev/rotate-on-delete finalizer; with --rotate-on-delete=false it falls to 0, and then a rollback below 0.3.0 is safe.",
      registers: [this.registry],
      collect() {
        this.set(count());
      },
    });
  })();
  // client-go updates these two from a ticker; here they are read when scraped, so the queue runs no timer.
  readonly queueUnfinished = (() => {
    const inFlight = (): number => this.source.queueInFlight()?.unfinishedSeconds ?? 0;
    return new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help: 'Seconds of work in progress not yet done (all in-flight keys together); growing means stuck workers.',
      labelNames: ['name'],
      registers: [this.registry],
      collect() {
        this.set({ name: 'usergroup' }, inFlight());
      },
    });
  })();
  readonly queueLongest = (() => {
    const longest = (): number => this.source.queueInFlight()?.longestSeconds ?? 0;
    return new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'Seconds the longest-running in-flight key has been worked on.',
      labelNames: ['name'],
      registers: [this.registry],
      collect() {
        this.set({ name: 'usergroup' }, longest());
      },
    });
  })();
  // Counters kept by the informers themselves (they count without knowing of Prometheus), copied out when scraped.
  // A (re)list (start, 410 Gone, repeated watch failures) is a watch-list, or a paged list where the apiserver refuses
  // watch-lists or one did not finish: the two counters together count every full list.
  readonly informerLists = this.informerCounter(
    'usergroup_informer_lists_total',
    'Full lists made by the informers with paged LIST requests (where the apiserver does not do watch-lists, or one did not finish).',
    (s) => s.lists,
  );
  readonly informerWatchLists = this.informerCounter(
    'usergroup_informer_watch_lists_total',
    'Full lists made by the informers as watch-lists (one watch with sendInitialEvents, complete at its initial-events-end bookmark).',
    (s) => s.watchLists,
  );
  readonly informerWatches = this.informerCounter(
    'usergroup_informer_watches_total',
    'Watches opened by the informers, watch-list requests included.',
    (s) => s.watches,
  );
  readonly informerWatchEnds = (() => {
    const stats = (): ReadonlyMap<string, InformerStats> => this.source.informerStats();
    return new Counter({
      name: 'usergroup_informer_watch_ends_total',
      help: 'Watches that ended other than by their server timeout: gone (410, re-listed), silent (no byte for too long), failure.',
      labelNames: ['resource', 'reason'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [resource, s] of stats()) {
          this.inc({ resource, reason: 'gone' }, s.gone);
          this.inc({ resource, reason: 'silent' }, s.silent);
          this.inc({ resource, reason: 'failure' }, s.failures);
        }
      },
    });
  })();
  readonly informerOversizedPages = this.informerCounter(
    'usergroup_informer_oversized_pages_total',
    'List pages abandoned for exceeding the byte bound and asked for again with fewer objects.',
    (s) => s.oversizedPages,
  );
  readonly informerLargestPage = (() => {
    const stats = (): ReadonlyMap<string, InformerStats> => this.source.informerStats();
    return new Gauge({
      name: 'usergroup_informer_largest_page_bytes',
      help: 'The largest list page read whole, in bytes.',
      labelNames: ['resource'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [resource, s] of stats()) this.set({ resource }, s.largestPageBytes);
      },
    });
  })();
  readonly leader = new Gauge({
    name: 'usergroup_leader',
    help: '1 while this process is at work: the leader, a replica with a share of the namespaces (--shard-by-namespace), or one without leader election.',
    registers: [this.registry],
  });
  readonly shardMembers = new Gauge({
    name: 'usergroup_shard_members',
    help: 'With --shard-by-namespace: the replicas this one sees live (their Leases renewed), itself included.',
    registers: [this.registry],
  });
  readonly shardOwnedNamespaces = (() => {
    const owned = (): number | undefined => this.source.ownedNamespaces();
    return new Gauge({
      name: 'usergroup_shard_owned_namespaces',
      help: "With --shard-by-namespace: the namespaces in this replica's share now.",
      registers: [this.registry],
      collect() {
        const n = owned();
        if (n !== undefined) this.set(n);
      },
    });
  })();
  readonly shardRebalances = new Counter({
    name: 'usergroup_shard_rebalances_total',
    help: "With --shard-by-namespace: times this replica's share of the namespaces changed (each re-fills its caches).",
    registers: [this.registry],
  });
  readonly events = new Counter({
    name: 'usergroup_events_total',
    help: 'Kubernetes Events emitted by type and reason.',
    labelNames: ['type', 'reason'],
    registers: [this.registry],
  });
  readonly eventsDropped = new Counter({
    name: 'usergroup_events_dropped_total',
    help: "Events not written: too many Event writes were queued (as client-go drops them), or the namespace's Warning budget was spent.",
    labelNames: ['type', 'reason'],
    registers: [this.registry],
  });
  /** What a reconcile or a watch event costs the garbage collector; prom-client's defaults only show what is held. */
  readonly heapAllocated = (() => {
    let reported = 0;
    return new Counter({
      name: 'nodejs_heap_allocated_bytes_total',
      help: 'Bytes allocated on the V8 heap since the process started (v8 total_allocated_bytes).',
      registers: [this.registry],
      collect() {
        const total = getHeapStatistics().total_allocated_bytes;
        if (total > reported) this.inc(total - reported);
        reported = Math.max(reported, total);
      },
    });
  })();
  readonly metricsAuthRequests = new Counter({
    name: 'usergroup_metrics_auth_requests_total',
    help: '/metrics requests by authentication and authorization outcome (allowed, unauthenticated, denied, throttled, error) and what answered them (cache, review, none).',
    labelNames: ['result', 'source'],
    registers: [this.registry],
  });
  readonly metricsAuthReviews = new Counter({
    name: 'usergroup_metrics_auth_reviews_total',
    help: 'TokenReviews and SubjectAccessReviews made for /metrics requests, by review and result (authenticated, unauthenticated, allowed, denied, error).',
    labelNames: ['review', 'result'],
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({
    name: 'usergroup_build_info',
    help: 'Build information (always 1).',
    labelNames: ['version', 'node_version'],
    registers: [this.registry],
  });

  constructor(
    version: string,
    private readonly source: MetricsSource = NO_SOURCE,
  ) {
    collectDefaultMetrics({ register: this.registry });
    this.buildInfo.set({ version, node_version: process.version }, 1);
  }

  private scheduleGauge(name: string, help: string, value: (sample: TokenScheduleSample) => number | undefined): Gauge {
    const samples = (): Iterable<TokenScheduleSample> => this.source.tokenSchedules();
    return new Gauge({
      name,
      help,
      labelNames: ['namespace', 'name'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const s of samples()) {
          const v = value(s);
          if (v !== undefined) this.set({ namespace: s.namespace, name: s.name }, v);
        }
      },
    });
  }

  private informerCounter(name: string, help: string, count: (stats: InformerStats) => number): Counter {
    const stats = (): ReadonlyMap<string, InformerStats> => this.source.informerStats();
    return new Counter({
      name,
      help,
      labelNames: ['resource'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [resource, s] of stats()) this.inc({ resource }, count(s));
      },
    });
  }

  queueHooks(name: string): WorkQueueMetrics {
    return {
      depth: (n) => this.queueDepth.set({ name }, n),
      add: () => this.queueAdds.inc({ name }),
      retry: () => this.queueRetries.inc({ name }),
      queueLatency: (s) => this.queueLatency.observe({ name }, s),
      workDuration: (s) => this.workDuration.observe({ name }, s),
    };
  }

  observeService(sample: ServiceCallSample): void {
    this.serviceRequests.inc({ operation: sample.operation, code: sample.status === undefined ? 'none' : String(sample.status) });
    this.serviceDuration.observe({ operation: sample.operation }, sample.durationMs / 1000);
  }

  observeKubeRequest(verb: string, code: string, resource: string): void {
    this.kubeRequests.inc({ verb, resource, code });
  }

  observeReconcile(result: 'success' | 'requeue' | 'error', seconds: number): void {
    this.reconcileTotal.inc({ result });
    this.reconcileDuration.observe({ result }, seconds);
    if (result === 'error') this.reconcileErrors.inc();
  }
}
