// A service call that did not go out or failed, classified: its condition reason, message, Event and retry.
import type { Deferral, ServiceFailure } from '../../service/types.js';
import { Reason } from '../policies/conditions.js';
import type { Connection } from '../connections.js';
import type { ReconcileResult } from '../reconcile-contract.js';
import type { ReconcileContext } from './context.js';
import { Events, Messages, type Operation } from './event-messages.js';
import { failed, type Outcome } from './outcome.js';
import type { RotationTrigger } from './ports.js';

/**
 * A call was not made now (rate limit, a failing connection): the key comes back when woken or after the
 * connection's delay. Only a paused connection is news for the user; waiting one's turn is not.
 */
export function deferred(deferral: Deferral, operation: Operation, connection: Connection): Outcome {
  const result: ReconcileResult = { kind: 'wait', afterMs: deferral.afterMs };
  if (deferral.why !== 'paused') return { ends: true, report: undefined, result };
  // Reported as the failure that paused the connection: that is what the user can act on.
  const last = deferral.lastFailure;
  const reason = last ? reasonFor(last) : Reason.ServiceUnavailable;
  const cause = last ? ` (last failure: ${connection.shared ? last.message : coarseFailure(last)})` : '';
  const message = Messages.callPaused(operation, connection.description, deferral.message, cause);
  return { ends: true, report: { status: 'False', reason, message, fields: {}, event: Events.callFailed(operation, reason, message) }, result };
}

/** A service call failed: the condition and Event say why, the key is retried by the failure's class. */
export function serviceFailed(ctx: ReconcileContext, operation: Operation, failure: ServiceFailure, connection: Connection): Outcome {
  const reason = reasonFor(failure);
  // A tenant's own connection may point anywhere its egress rule allows: what comes back (remote text,
  // which network error) would make the operator its port scanner. It gets the kind and HTTP status only.
  const message = Messages.callFailed(operation, connection.description, connection.shared ? failure.message : coarseFailure(failure));
  ctx.log.warn({ reason, status: failure.status, operation, detail: failure.message }, 'service call failed');
  if (failure.kind === 'unauthorized') connection.invalidate();
  const result: ReconcileResult =
    failure.kind === 'rate-limited' && failure.retryAfterMs !== undefined
      ? // The account waits as a whole (service/call-gates.ts); the queue spreads the keys out (retry-policy.ts).
        { kind: 'retry-after', afterMs: failure.retryAfterMs }
      : failed(failure.kind === 'unauthorized' ? 'key-refused' : failure.kind === 'rejected' ? 'request-refused' : 'call-failed');
  return { ends: true, report: { status: 'False', reason, message, fields: {}, event: Events.callFailed(operation, reason, message) }, result };
}

/** A rotation the service did not do (its POST, or the PUT that reads the token for it, failed): counted, then reported as any failed call. */
export function rotationFailed(
  ctx: ReconcileContext,
  trigger: RotationTrigger,
  failure: ServiceFailure,
  connection: Connection,
  operation: Extract<Operation, 'rotate' | 'rotate-read'> = 'rotate',
): Outcome {
  ctx.ports.metrics.count({ metric: 'rotation-failed', trigger });
  return serviceFailed(ctx, operation, failure, connection);
}

function reasonFor(failure: ServiceFailure): Reason {
  switch (failure.kind) {
    case 'unauthorized':
      return Reason.Unauthorized;
    case 'rate-limited':
      return Reason.RateLimited;
    case 'unavailable':
      return Reason.ServiceUnavailable;
    case 'rejected':
      return Reason.Rejected;
    case 'invalid-response':
      return Reason.InvalidResponse;
  }
}

/** What a tenant may learn of a failed call to its own connection: the kind of failure and the HTTP status. */
function coarseFailure(failure: ServiceFailure): string {
  const status = failure.status === undefined ? '' : ` (HTTP ${failure.status})`;
  switch (failure.kind) {
    case 'unavailable':
      return failure.status === undefined ? 'no answer from the service (connection failed or timed out)' : `service unavailable${status}`;
    case 'unauthorized':
      return `service refused the API key${status}`;
    case 'rate-limited':
      return `service rate limit reached${status}`;
    case 'rejected':
      return `service rejected the request${status}`;
    case 'invalid-response':
      return `service answered with an invalid response${status}`;
  }
}
