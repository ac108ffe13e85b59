// How a step ends and what a reconcile reports: Step (a value handed on, or the Outcome), DONE and failed, the blocked outcomes.
import type { ConditionStatus, UserGroupStatus } from '../../api/usergroup.js';
import { Reason } from '../policies/conditions.js';
import type { FailureCause, ReconcileResult } from '../reconcile-contract.js';
import type { ReconcileContext } from './context.js';
import { Events, Messages } from './event-messages.js';
import type { UserGroupEvent } from './ports.js';

/** What the reconcile has to say in status: written once, at its end (report.ts), and only if it differs. */
export interface StatusReport {
  readonly status: ConditionStatus;
  readonly reason: Reason;
  readonly message: string;
  /** Status fields to set; a field given as undefined is cleared. */
  readonly fields: UserGroupStatus;
  /** Sent after the status is written: the Event that goes with a failure condition. */
  readonly event?: UserGroupEvent | undefined;
}

/**
 * How a reconcile ends: what to report (undefined: status stays as it is) and what the worker does with the key.
 * `ends` tells it from a step's value handed on (Next): a step that ends the reconcile returns its Outcome itself.
 */
export interface Outcome {
  readonly ends: true;
  readonly report: StatusReport | undefined;
  readonly result: ReconcileResult;
}

/** A step's value for the next step (a step that never ends the reconcile returns only this). */
export interface Next<T> {
  readonly ends: false;
  readonly value: T;
}

/** A step hands on its value, or ends the reconcile with its Outcome. */
export type Step<T> = Next<T> | Outcome;

export const next = <T>(value: T): Next<T> => ({ ends: false, value });

export const failed = (cause: FailureCause): ReconcileResult => ({ kind: 'failed', cause });
export const DONE: ReconcileResult = { kind: 'done' };

/** A condition the user must fix: status + Event, and a retry (`poll`) only where nothing else will wake us. */
export function blocked(ctx: ReconcileContext, reason: Reason, message: string, poll?: FailureCause): Outcome {
  ctx.log.info({ reason }, message);
  return { ends: true, report: { status: 'False', reason, message, fields: {}, event: Events.blocked(reason, message) }, result: poll ? failed(poll) : DONE };
}

/** The apiserver refused the token Secret (validation, quota, RBAC): say so on the object, never just in a log. */
export function secretWriteRefused(secret: string, error: Error): Outcome {
  const message = Messages.secretWriteFailed(secret, error.message);
  return {
    ends: true,
    report: { status: 'False', reason: Reason.SecretWriteFailed, message, fields: {}, event: Events.secretWriteFailed(message) },
    result: failed('secret-write-refused'),
  };
}
