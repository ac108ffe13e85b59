import type { Logger } from 'pino';
import type { UserGroup, UserGroupStatus } from '../../api/usergroup.js';
import type { SecretValue } from '../../service/secret-value.js';
import type { ServiceResult, UpsertRequest } from '../../service/types.js';
import type { CallContext, CallResult, Connection, Deferral } from '../connections.js';
import type { RequestBudgetOptions, RequestKind } from '../request-budget.js';
import type { ReconcilePorts } from './ports.js';

/** The operator's settings a reconcile decides by. */
export interface ReconcileSettings {
  readonly resyncPeriodMs: number;
  /** The operator's floor under spec.rotation.maxTokenAge (--min-token-age): a tenant cannot make rotations more frequent. */
  readonly minTokenAgeMs: number;
  /** Whether the operator restarts spec.rolloutRestartTargets (the chart's opt-in, which also grants the RBAC). */
  readonly workloadRestarts: boolean;
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

/**
 * The service calls of one reconcile. The first may be deferred (the account's rate limit, a failing connection);
 * later ones are follow-ups of work begun and always go out: deferring one would strand the first.
 */
export class ServiceCalls {
  private made = 0;
  /** A rotation intent is stored: its POST finishes work begun, like a follow-up (deferring it costs a recovery PUT). */
  private intentStored = false;

  constructor(
    private readonly key: string,
    private readonly signal: AbortSignal | undefined,
    /** Queues the key again: a connection that deferred a call runs it when the call may go out. */
    private readonly wake: () => void,
  ) {}

  async upsert(connection: Connection, request: UpsertRequest): Promise<ServiceResult | Deferral> {
    return this.count(await connection.upsert(request, this.context()));
  }

  async rotate(connection: Connection, token: SecretValue): Promise<ServiceResult | Deferral> {
    return this.count(await connection.rotate(token, this.context()));
  }

  /** The same calls, cut off after `ms` (a deletion's rotation may not outlast its limit); the cut throws a TimeoutError. */
  within(ms: number): ServiceCalls {
    const deadline = AbortSignal.timeout(Math.max(1, Math.ceil(ms)));
    const within = new ServiceCalls(this.key, this.signal ? AbortSignal.any([this.signal, deadline]) : deadline, this.wake);
    within.made = this.made;
    within.intentStored = this.intentStored;
    return within;
  }

  /** Why no call could go out now, if so (asked before work that only makes sense with a call after it). */
  unavailable(connection: Connection): Deferral | undefined {
    return connection.unavailable(this.context());
  }

  /** The intent of a rotation is on the Secret: its POST is a follow-up. */
  intentRecorded(): void {
    this.intentStored = true;
  }

  private context(): CallContext {
    return { key: this.key, followUp: this.made > 0 || this.intentStored, signal: this.signal, wake: this.wake };
  }

  private count(result: CallResult): ServiceResult | Deferral {
    if (!result.ok && 'deferred' in result) return result.deferred;
    this.made += 1;
    return result;
  }
}

export function isDeferral(result: ServiceResult | Deferral): result is Deferral {
  return 'why' in result;
}

/** A wall-clock time as status shows it: whole seconds, RFC 3339. */
export function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
