import { describe, expect, it } from 'vitest';
import { RETRY_PERSISTENT, RETRY_TABLE, RETRY_TRANSIENT, RetryPolicy, requeueFor, type FailureCause } from '../../src/controller/retry-policy.js';

describe('the retry policy: one table from what a reconcile came to, to what the queue does', () => {
  it('done forgets the failures, and comes back for the resync when one is due', () => {
    expect(requeueFor({ kind: 'done' })).toEqual({ kind: 'forget' });
    expect(requeueFor({ kind: 'done', resyncAfterMs: 3_600_000 })).toEqual({ kind: 'forget', afterMs: 3_600_000 });
  });

  it('a wait the connection asked for replaces the backoff and resets it', () => {
    expect(requeueFor({ kind: 'wait', afterMs: 1_234 })).toEqual({ kind: 'forget', afterMs: 1_234 });
  });

  it.each<[FailureCause, 'transient' | 'persistent', number]>([
    ['call-failed', 'transient', 0],
    ['lost-race', 'transient', 0],
    ['crashed', 'transient', 0],
    ['request-refused', 'persistent', 0],
    ['key-refused', 'transient', 60_000],
    ['secret-write-refused', 'transient', 30_000],
    ['secret-taken', 'transient', 30_000],
    ['connection-unresolved', 'transient', 10_000],
  ])('%s: %s backoff, at least %d ms', (cause, retryClass, atLeastMs) => {
    expect(requeueFor({ kind: 'failed', cause })).toEqual({ kind: 'backoff', retryClass, atLeastMs });
  });

  it('every cause has a row', () => {
    expect(Object.keys(RETRY_TABLE).sort()).toEqual([
      'call-failed',
      'connection-unresolved',
      'crashed',
      'key-refused',
      'lost-race',
      'request-refused',
      'restart-refused',
      'secret-taken',
      'secret-write-refused',
    ]);
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
});
