import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CircuitBreaker } from '../../src/service/circuit-breaker.js';

describe('CircuitBreaker', () => {
  let now = 0;
  const clock = (): number => now;
  beforeEach(() => {
    now = 0;
    vi.useFakeTimers();
  });
  afterEach(() => vi.useRealTimers());

  const breaker = (): CircuitBreaker =>
    new CircuitBreaker({ threshold: 3, minFailingMs: 5_000, baseOpenMs: 2_000, maxOpenMs: 30_000, now: clock, random: () => 0.5 });
  const advance = async (ms: number): Promise<void> => {
    now += ms;
    await vi.advanceTimersByTimeAsync(ms);
  };

  it('lets one call out at a time until a first success, then any number', () => {
    const b = breaker();
    const woken: string[] = [];
    expect(b.admit('a', () => woken.push('a'))).toEqual({ ok: true, probe: false });
    expect(b.admit('b', () => woken.push('b'))).toMatchObject({ ok: false, why: 'busy' });
    b.record('success');
    expect(woken).toEqual(['b']);
    expect(b.admit('b', () => undefined).ok).toBe(true);
    expect(b.admit('c', () => undefined).ok).toBe(true);
    expect(b.admit('d', () => undefined).ok).toBe(true);
  });

  it('stays closed through a burst of failures shorter than minFailingMs (random faults, not an outage)', () => {
    const b = breaker();
    b.admit('x', () => undefined);
    b.record('success');
    for (let i = 0; i < 10; i++) {
      expect(b.admit(`k${i}`, () => undefined).ok).toBe(true);
      b.record('failure');
      now += 100;
    }
    expect(b.state).toBe('closed');
  });

  it('opens after threshold failures spanning minFailingMs, sends nothing while open, and probes with one call', async () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) {
      if (i > 0) await advance(2_500);
      expect(b.admit('k', () => undefined).ok).toBe(true);
      b.record('failure');
    }
    expect(b.state).toBe('open');
    const woken: string[] = [];
    for (const k of ['a', 'b', 'c']) expect(b.admit(k, () => woken.push(k))).toMatchObject({ ok: false, why: 'open' });
    // Open for 2 s ± 20 % (random 0.5: exactly 2 s); then one waiter is woken to probe.
    await advance(1_999);
    expect(woken).toEqual([]);
    await advance(1);
    expect(woken).toEqual(['a']);
    expect(b.admit('a', () => undefined)).toEqual({ ok: true, probe: true });
    expect(b.admit('b', () => woken.push('b'))).toMatchObject({ ok: false });
    b.record('success');
    expect(b.state).toBe('closed');
    expect(woken.sort()).toEqual(['a', 'b', 'c']);
  });

  it('doubles the open interval per failed probe, up to maxOpenMs', async () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) {
      b.admit('k', () => undefined);
      b.record('failure');
      await advance(2_500);
    }
    const intervals: number[] = [];
    for (let round = 0; round < 6; round++) {
      const opened = now;
      let admitted = b.admit('k', () => undefined);
      while (!admitted.ok) {
        await advance(100);
        admitted = b.admit('k', () => undefined);
      }
      intervals.push(now - opened);
      b.record('failure');
    }
    // The first was opened 2.5 s before the loop started counting; then 4, 8, 16, 30, 30 s.
    expect(intervals.slice(1)).toEqual([4_000, 8_000, 16_000, 30_000, 30_000]);
  });

  it('passes the slot on when a woken caller does not call (baton)', async () => {
    const b = breaker();
    b.admit('first', () => undefined);
    const woken: string[] = [];
    b.admit('a', () => woken.push('a'));
    b.admit('b', () => woken.push('b'));
    b.record('failure');
    expect(woken).toEqual(['a']);
    await advance(1_000);
    expect(woken).toEqual(['a', 'b']);
  });

  it('a follow-up call is not held back by single-flight, but never goes to an open breaker', async () => {
    const b = breaker();
    b.admit('a', () => undefined);
    b.record('success');
    b.admit('a', () => undefined);
    b.record('failure');
    b.admit('a', () => undefined);
    b.record('failure');
    expect(b.admit('x', () => undefined).ok).toBe(true);
    expect(b.admit('y', () => undefined)).toMatchObject({ ok: false, why: 'busy' });
    expect(b.admit('z', () => undefined, true).ok).toBe(true);
  });
});
