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

  it('forgets namespaces whose bucket is full again once many have spent', () => {
    let now = 0;
    const budget = new NamespaceBudget({ burst: 1, perSecond: 1 }, () => now);
    for (let i = 0; i < 1_025; i++) budget.take(`ns-${i}`);
    now = 10_000;
    budget.take('late');
    expect((budget as unknown as { spent: Map<string, unknown> }).spent.size).toBe(1);
  });
});
