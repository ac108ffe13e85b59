// The contract between the worker and every reconciler (controller-runtime's pkg/reconcile): what a reconcile is
// handed, what it comes to, and the one mapping from that result to what the work queue does with the key.
import { CLOCK_WAKE_FLOOR_MS, jittered, RETRY_AFTER_SPREAD_MS, RETRY_TABLE, type FailureCause, type RetryClass } from './retry-policy.js';

export type { FailureCause, RetryClass };

/** What the worker hands a reconcile: a key, never an event (level-triggered). */
export interface ReconcileRequest {
  readonly key: string;
  /** Names this reconcile in the logs. */
  readonly reconcileId: string;
  /** Aborted when the work must stop (shutdown, lost leadership). */
  readonly signal: AbortSignal | undefined;
  /** Queues the key again: a connection that deferred a call wakes it when the call may go out. */
  readonly wake: () => void;
}

/**
 * A reconciler: brings the object the key names in line with what it asks for, from what is observed now, and says
 * what came of it. It never catches for the worker nor touches the backoff: a throw is a failure of the key.
 */
export type Reconciler = (request: ReconcileRequest) => Promise<ReconcileResult>;

/**
 * When a converged UserGroup needs its next reconcile: wall-clock times at which something falls due (the periodic
 * resync, a scheduled rotation), and slots a global cap keeps for this key.
 */
export interface Wake {
  /** Milliseconds since the epoch. */
  readonly dueAt: readonly number[];
  /** Milliseconds from now: the slot is the key's at that very time only. */
  readonly slotInMs: readonly number[];
}

/** What a reconcile came to, like controller-runtime's Result / error and kube-rs's Action. */
export type ReconcileResult =
  /** Converged; come back at the wake-up, if any. */
  | { readonly kind: 'done'; readonly wake?: Wake }
  /** Not now: the connection said when (its rate limit, its breaker). Not a failure of the key. */
  | { readonly kind: 'wait'; readonly afterMs: number }
  /** The service answered 429 with Retry-After: the whole account waits that long (service/call-gates.ts). */
  | { readonly kind: 'retry-after'; readonly afterMs: number }
  | { readonly kind: 'failed'; readonly cause: FailureCause };

/** The work queue's operations a reconcile's result is applied with (kube/workqueue.ts's WorkQueue has them). */
export interface RequeueTarget {
  /** Forgets the key's failures (its backoff starts over). */
  forget(key: string): void;
  /** Adds the key again after `afterMs`. */
  addAfter(key: string, afterMs: number): void;
  /** One more failure of its class: the queue's backoff, but not sooner than `atLeastMs`. */
  addRateLimited(key: string, retryClass: RetryClass, atLeastMs: number): void;
}

/**
 * The one switch from a reconcile's result to what the queue does with its key. `now`: ms since the epoch. Returns
 * whether the key was added again after a delay (addAfter): for a converged one, that it asked to come back.
 */
export function requeue(queue: RequeueTarget, key: string, result: ReconcileResult, now: number, random: () => number = Math.random): boolean {
  switch (result.kind) {
    case 'done': {
      queue.forget(key);
      const afterMs = result.wake && wakeAfterMs(result.wake, now);
      if (afterMs === undefined) return false;
      queue.addAfter(key, afterMs);
      return true;
    }
    case 'wait':
      // Replaces our guess and resets it, as controller-runtime's RequeueAfter does.
      queue.forget(key);
      queue.addAfter(key, result.afterMs);
      return true;
    case 'retry-after':
      queue.forget(key);
      queue.addAfter(key, jittered(result.afterMs, RETRY_AFTER_SPREAD_MS, random));
      return true;
    case 'failed': {
      const { retryClass, atLeastMs } = RETRY_TABLE[result.cause];
      queue.addRateLimited(key, retryClass, atLeastMs);
      return false;
    }
  }
}

/** The earliest of the wake-ups: a due time (not sooner than the floor), or a slot (at that very time). */
function wakeAfterMs(wake: Wake, now: number): number | undefined {
  const due = wake.dueAt.length === 0 ? undefined : Math.max(CLOCK_WAKE_FLOOR_MS, Math.min(...wake.dueAt) - now);
  const waits = [...(due === undefined ? [] : [due]), ...wake.slotInMs];
  return waits.length === 0 ? undefined : Math.min(...waits);
}
