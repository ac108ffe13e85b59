import { describe, expect, it } from 'vitest';
import { NamespaceBudget } from '../../src/kube/namespace-budget.js';

describe('NamespaceBudget: a token bucket per namespace', () => {
  it('gives each namespace its burst, then refills at its rate', () => {
    let now = 0;
    const budget = new NamespaceBudget({ burst: 2, perSecond: 1 }, () => now);
    expect([budget.take('a'), budget.take('a'), budget.take('a')]).toEqual([true, true, false]);
    expect(budget.take('b')).toBe(true);
    now = 999;
    expect(budget.take('a')).toBe(false);
    now = 1_500;
    expect([budget.take('a'), budget.take('a')]).toEqual([true, false]);
    now = 100_000;
    // Refilled to the burst, never beyond it.
    expect([budget.take('a'), budget.take('a'), budget.take('a')]).toEqual([true, true, false]);
  });

  it('forgets namespaces idle for as long as a refill takes once many have spent, and keeps the recent ones', () => {
    let now = 0;
    const budget = new NamespaceBudget({ burst: 2, perSecond: 1 }, () => now);
    for (let i = 0; i < 1_024; i++) budget.take(`ns-${i}`);
    now = 1_500;
    budget.take('recent');
    expect(budget.size).toBe(1_025);
    now = 2_000;
    budget.take('late');
    // The 1,024 idle for 2 s (burst / rate) are gone; 'recent' (0.5 s) and 'late' remain.
    expect(budget.size).toBe(2);
    // Kept with what it spent: one of two taken 0.5 s ago, half refilled since.
    expect([budget.take('recent'), budget.take('recent')]).toEqual([true, false]);
  });
});
