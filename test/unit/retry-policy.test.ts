import { describe, expect, it } from 'vitest';
import {
  CLOCK_WAKE_FLOOR_MS,
  DELETION_RETRY_MS,
  IMMEDIATE_RETRY_MS,
  jittered,
  RETRY_AFTER_SPREAD_MS,
  RETRY_PERSISTENT,
  RETRY_TABLE,
  RETRY_TRANSIENT,
  THROTTLED_SPREAD_MS,
  type FailureCause,
} from '../../src/controller/retry-policy.js';
import { RetryPolicy } from '../../src/controller/worker.js';
import { requeued, toldQueue } from '../support/told-queue.js';

describe('the retry policy: one table from what a reconcile came to, to what the queue does', () => {
  const NOW = Date.parse('2026-11-22T01:00:00Z');

  it('done forgets the failures, and comes back for the resync when one is due', () => {
    expect(requeued({ kind: 'done' }, NOW)).toEqual({ told: [['forget']], addedAfter: false });
    expect(requeued({ kind: 'done', wake: { dueAt: [NOW + 3_600_000], slotInMs: [] } }, NOW)).toEqual({
      told: [['forget'], ['addAfter', 3_600_000]],
      addedAfter: true,
    });
  });

  it("done: the earliest wake-up; one due by the clock not sooner than a second, a cap's slot at that very time", () => {
    expect(toldQueue({ kind: 'done', wake: { dueAt: [NOW + 3_600_000, NOW + 300_000], slotInMs: [] } }, NOW)).toEqual([['forget'], ['addAfter', 300_000]]);
    // Due already (a clock behind the one that wrote the schedule): a second, not a busy loop.
    expect(toldQueue({ kind: 'done', wake: { dueAt: [NOW - 5_000], slotInMs: [] } }, NOW)).toEqual([['forget'], ['addAfter', 1_000]]);
    expect(toldQueue({ kind: 'done', wake: { dueAt: [NOW + 3_600_000], slotInMs: [250] } }, NOW)).toEqual([['forget'], ['addAfter', 250]]);
    // A wake with nothing in it asks for no return.
    expect(requeued({ kind: 'done', wake: { dueAt: [], slotInMs: [] } }, NOW)).toEqual({ told: [['forget']], addedAfter: false });
  });

  it('a wait the connection asked for replaces the backoff and resets it', () => {
    expect(requeued({ kind: 'wait', afterMs: 1_234 }, NOW)).toEqual({ told: [['forget'], ['addAfter', 1_234]], addedAfter: true });
  });

  it("a Retry-After: the service's wait, plus up to a second so the keys it turned away do not come back at once", () => {
    expect(requeued({ kind: 'retry-after', afterMs: 5_000 }, NOW, () => 0)).toEqual({ told: [['forget'], ['addAfter', 5_000]], addedAfter: true });
    expect(toldQueue({ kind: 'retry-after', afterMs: 5_000 }, NOW, () => 0.999)).toEqual([['forget'], ['addAfter', 5_999]]);
  });

  const causes: [FailureCause, 'transient' | 'persistent', number][] = [
    ['call-failed', 'transient', 0],
    ['lost-race', 'transient', 0],
    ['crashed', 'transient', 0],
    ['request-refused', 'persistent', 0],
    ['key-refused', 'transient', 60_000],
    ['secret-write-refused', 'transient', 30_000],
    ['secret-taken', 'transient', 30_000],
    ['connection-unresolved', 'transient', 10_000],
    ['restart-refused', 'persistent', 0],
    ['prompt-refused', 'persistent', 0],
  ];
  it.each(causes)('%s: %s backoff, at least %d ms', (cause, retryClass, atLeastMs) => {
    // The failures are not forgotten: the backoff counts this one.
    expect(requeued({ kind: 'failed', cause }, NOW)).toEqual({ told: [['addRateLimited', retryClass, atLeastMs]], addedAfter: false });
  });

  it('every cause the table knows has its requeue checked above', () => {
    expect(Object.keys(RETRY_TABLE).sort()).toEqual(causes.map(([cause]) => cause).sort());
  });

  it('each class counts its own failures, both forgotten together', () => {
    const policy = new RetryPolicy(() => 0);
    expect([1, 2, 3, 4, 5, 6].map(() => policy.when('ns/a', 'transient'))).toEqual([100, 200, 400, 800, 1_600, RETRY_TRANSIENT.capMs]);
    // A run of transient failures does not make a refusal wait long, and the other way round.
    expect(policy.when('ns/a', 'persistent')).toBe(RETRY_PERSISTENT.baseMs);
    policy.forget('ns/a');
    expect(policy.when('ns/a', 'persistent')).toBe(RETRY_PERSISTENT.baseMs);
    expect(policy.when('ns/a')).toBe(RETRY_TRANSIENT.baseMs);
  });

  it('holds every other delay and jitter of the controller, at the figures they had where they were', () => {
    expect({ CLOCK_WAKE_FLOOR_MS, RETRY_AFTER_SPREAD_MS, THROTTLED_SPREAD_MS, DELETION_RETRY_MS, IMMEDIATE_RETRY_MS }).toEqual({
      CLOCK_WAKE_FLOOR_MS: 1_000,
      RETRY_AFTER_SPREAD_MS: 1_000,
      THROTTLED_SPREAD_MS: 1_000,
      DELETION_RETRY_MS: 5_000,
      IMMEDIATE_RETRY_MS: 1,
    });
    expect(jittered(5_000, 1_000, () => 0)).toBe(5_000);
    expect(jittered(5_000, 1_000, () => 0.5)).toBe(5_500);
  });
});
