// A RequeueTarget that writes down what it was told: how a reconcile's result is applied to the work queue, without a queue.
import { requeue, type ReconcileResult, type RequeueTarget } from '../../src/controller/reconcile-contract.js';
import type { RetryClass } from '../../src/controller/retry-policy.js';

/** One operation the queue was told, with its figures (the key is checked to be the one requeued). */
export type Told = readonly ['forget'] | readonly ['addAfter', number] | readonly ['addRateLimited', RetryClass, number];

/** What the worker's queue is told for one reconcile's result, in order, and whether the key was added again after a delay. */
export interface Requeued {
  readonly told: readonly Told[];
  readonly addedAfter: boolean;
}

const KEY = 'ns/ug';

/** Applies `result` at `now` (ms since the epoch) to a queue that only writes down what it is told. */
export function requeued(result: ReconcileResult, now: number, random?: () => number): Requeued {
  const told: Told[] = [];
  const tell = (key: string, what: Told): void => {
    if (key !== KEY) throw new Error(`the queue was told about ${key}, not ${KEY}`);
    told.push(what);
  };
  const queue: RequeueTarget = {
    forget: (key) => tell(key, ['forget']),
    addAfter: (key, afterMs) => tell(key, ['addAfter', afterMs]),
    addRateLimited: (key, retryClass, atLeastMs) => tell(key, ['addRateLimited', retryClass, atLeastMs]),
  };
  const addedAfter = requeue(queue, KEY, result, now, random);
  return { told, addedAfter };
}

/** What the queue is told for `result` at `now`, in order. */
export function toldQueue(result: ReconcileResult, now: number, random?: () => number): readonly Told[] {
  return requeued(result, now, random).told;
}
