// The Ready condition policy (policies/conditions.ts).
import { describe, expect, it } from 'vitest';
import type { Condition } from '../../../src/api/usergroup.js';
import { nextReadyCondition, Reason } from '../../../src/controller/policies/conditions.js';

describe('nextReadyCondition', () => {
  const t0 = '2025-01-01T00:00:00Z';
  const t1 = '2025-01-02T00:00:00Z';

  it('builds a Ready condition', () => {
    expect(nextReadyCondition(undefined, 'True', Reason.Synced, 'ok', 3, t0)).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Synced',
      message: 'ok',
      lastTransitionTime: t0,
      observedGeneration: 3,
    });
  });

  it('keeps lastTransitionTime while the status stays the same', () => {
    const prev: Condition = { type: 'Ready', status: 'False', reason: 'Rejected', message: 'a', lastTransitionTime: t0 };
    const next = nextReadyCondition(prev, 'False', Reason.ServiceUnavailable, 'b', 2, t1);
    expect(next.lastTransitionTime).toBe(t0);
    expect(next.reason).toBe('ServiceUnavailable');
    expect(next.message).toBe('b');
  });

  it('moves lastTransitionTime when the status flips', () => {
    const prev: Condition = { type: 'Ready', status: 'False', reason: 'Rejected', message: 'a', lastTransitionTime: t0 };
    expect(nextReadyCondition(prev, 'True', Reason.Synced, 'ok', 2, t1).lastTransitionTime).toBe(t1);
    expect(nextReadyCondition({ ...prev, status: 'True' }, 'Unknown', Reason.Synced, 'x', 2, t1).lastTransitionTime).toBe(t1);
  });

  it('uses now when the previous condition has no lastTransitionTime', () => {
    const prev: Condition = { type: 'Ready', status: 'True', reason: 'Synced', message: '', lastTransitionTime: '' };
    expect(nextReadyCondition(prev, 'True', Reason.Synced, 'ok', 1, t1).lastTransitionTime).toBe(t1);
  });

  it('truncates the message to 32768 characters', () => {
    const c = nextReadyCondition(undefined, 'False', Reason.Rejected, 'x'.repeat(40_000), 1, t0);
    expect(c.message).toHaveLength(32_768);
    expect(nextReadyCondition(undefined, 'False', Reason.Rejected, 'y'.repeat(32_768), 1, t0).message).toHaveLength(32_768);
  });
});
