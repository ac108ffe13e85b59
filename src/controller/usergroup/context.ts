// What one reconcile of one UserGroup works with (kube-rs's `ctx`): the object, the ports, the settings, its calls.
import type { Logger } from 'pino';
import type { UserGroup, UserGroupStatus } from '../../api/usergroup.js';
import type { RequestBudgetOptions, RequestKind } from '../request-budget.js';
import type { ReconcilePorts } from './ports.js';
import type { ServiceCalls } from './service-calls.js';

/** The operator's settings a reconcile decides by. */
export interface ReconcileSettings {
  readonly resyncPeriodMs: number;
  /** The operator's floor under spec.rotation.maxTokenAge (--min-token-age): a tenant cannot make rotations more frequent. */
  readonly minTokenAgeMs: number;
  /** Whether the operator restarts spec.rolloutRestartTargets (the chart's opt-in, which also grants the RBAC). */
  readonly workloadRestarts: boolean;
  /** Whether the operator prompts consenting Pods after a new token (the chart's mountedTokenRefresh, which grants the RBAC). */
  readonly podPrompts: boolean;
  /** The longest a deletion with spec.deletionPolicy Rotate is held, from its deletionTimestamp (--deletion-rotation-timeout). */
  readonly deletionRotationTimeoutMs: number;
  /** spec.deletionPolicy Rotate is in force (--rotate-on-delete); false: every rotate-on-delete finalizer is removed and none added. */
  readonly rotateOnDelete: boolean;
  /**
   * This controller alone sees every namespace's UserGroups (no --namespaces, no sharding): only then may an id the
   * rules bind to one namespace go without a claim (usergroup/claim.ts idHeldByRules).
   */
  readonly seesAllNamespaces: boolean;
  /** What each namespace's sync and rotation requests may cost: the figures the waiting Events name. */
  readonly requestBudgets: Readonly<Record<RequestKind, RequestBudgetOptions>>;
}

/**
 * Everything one reconcile of one UserGroup works with, as one value (kube-rs's `ctx`): the object as the cache
 * had it when the reconcile began, the ports, the settings, and its service calls.
 */
export interface ReconcileContext {
  readonly key: string;
  readonly ug: UserGroup;
  /** The status the reconcile began from: what it compares its one status write against. */
  readonly previous: UserGroupStatus;
  readonly ports: ReconcilePorts;
  readonly settings: ReconcileSettings;
  readonly log: Logger;
  /** Aborted when the work must stop (shutdown, lost leadership): nothing is written after it. */
  readonly signal: AbortSignal | undefined;
  readonly calls: ServiceCalls;
}

/** A wall-clock time as status shows it: whole seconds, RFC 3339. */
export function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
