// The settings the controller runs by, and how a cluster-wide rate is shared out among replicas.
import type { RequestBudgetOptions, RequestKind } from './request-budget.js';

/**
 * The operator's settings the controller works by (flags and environment variables, src/cli/config.ts). The CLI's
 * RunConfig is these and more, so it is passed as it is, never copied field by field.
 */
export interface ControllerSettings {
  /** Namespaces to watch; empty = all. */
  readonly namespaces: readonly string[];
  readonly concurrency: number;
  readonly resyncPeriodMs: number;
  /** The cap on scheduled rotations (--scheduled-rotations-per-minute), cluster-wide. */
  readonly scheduledRotationsPerMinute: number;
  /** The floor under spec.rotation.maxTokenAge (--min-token-age). */
  readonly minTokenAgeMs: number;
  /** The cap on restarts of spec.rolloutRestartTargets (--workload-restarts-per-minute), cluster-wide; 0: restarts are off. */
  readonly workloadRestartsPerMinute: number;
  /** The cap on prompts of consenting Pods (--mounted-token-refreshes-per-minute), cluster-wide; 0: prompts are off. */
  readonly podPromptsPerMinute: number;
  /**
   * What each namespace's sync and rotation requests may cost (--sync-request-burst, --sync-requests-per-minute,
   * --rotation-request-burst, --rotation-requests-per-minute). Per namespace, so never divided among shard replicas:
   * a namespace has one owner at a time.
   */
  readonly requestBudgets: Readonly<Record<RequestKind, RequestBudgetOptions>>;
  /** The ClusterUserGroupService for UserGroups without spec.serviceRef. */
  readonly defaultService: string | undefined;
  /** Calls per second and burst per account (--service-qps, --service-burst), for every cluster on the account. */
  readonly serviceQps: number;
  readonly serviceBurst: number;
  /** The part of them this cluster takes (--service-share): the clusters on one account share its rate limit. */
  readonly serviceShare: number;
  readonly serviceTimeoutMs: number;
  readonly watchInactivityTimeoutMs: number | undefined;
  /** The operator's rules for namespaced UserGroupService URLs (--allowed-service-hosts, --allow-http-services). */
  readonly allowedServiceHosts: readonly string[];
  readonly allowHttpServices: boolean;
  /** The longest a deletion with spec.deletionPolicy Rotate is held, from its deletionTimestamp (--deletion-rotation-timeout). */
  readonly deletionRotationTimeoutMs: number;
  /**
   * Keep the rotate-on-delete finalizer of spec.deletionPolicy Rotate (--rotate-on-delete, default true). False: remove
   * it from every object and add none (before a rollback to a release that does not know it, or an uninstall).
   */
  readonly rotateOnDelete: boolean;
}

/** The rates that are the operator's as a whole, shared out among the replicas at work. */
export type OperatorRates = Pick<
  ControllerSettings,
  'serviceQps' | 'serviceBurst' | 'serviceShare' | 'scheduledRotationsPerMinute' | 'workloadRestartsPerMinute' | 'podPromptsPerMinute'
>;

/**
 * One of `members` replicas at work takes 1/members of each cluster-wide rate, so the service and the cluster see the
 * same rates however many replicas share the namespaces; of the account's rate, the cluster has its share
 * (--service-share) to give out. (A burst of calls cannot be split below one.)
 */
export function shareOf<S extends OperatorRates>(settings: S, members: number): S {
  const part = settings.serviceShare / members;
  return {
    ...settings,
    serviceQps: settings.serviceQps * part,
    serviceBurst: Math.max(1, Math.floor(settings.serviceBurst * part)),
    serviceShare: part,
    scheduledRotationsPerMinute: settings.scheduledRotationsPerMinute / members,
    workloadRestartsPerMinute: settings.workloadRestartsPerMinute / members,
    podPromptsPerMinute: settings.podPromptsPerMinute / members,
  };
}
