import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TokenBucket } from '../../src/platform/token-bucket.js';

describe('TokenBucket with a fake clock', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const clock = (): number => Date.now();

  it('reserve() never waits: the burst is free, then each reservation is 1/qps further out', () => {
    const bucket = new TokenBucket(10, 2, clock);
    expect([bucket.reserve(), bucket.reserve(), bucket.reserve(), bucket.reserve(), bucket.reserve()]).toEqual([0, 0, 100, 200, 300]);
    // The debt is paid back at qps: 300 ms later the next reservation is 100 ms out again.
    vi.advanceTimersByTime(300);
    expect(bucket.reserve()).toBe(100);
  });

  it('allows a burst, then refills at qps', () => {
    const bucket = new TokenBucket(10, 3, clock);
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, true, false]);
    vi.advanceTimersByTime(99);
    expect(bucket.tryTake()).toBe(false);
    vi.advanceTimersByTime(1);
    expect(bucket.tryTake()).toBe(true);
    expect(bucket.tryTake()).toBe(false);
  });

  it('never holds more than burst tokens', () => {
    const bucket = new TokenBucket(10, 2, clock);
    vi.advanceTimersByTime(60_000);
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, false]);
  });

  it('tryTake finds no token while reservations are outstanding', () => {
    const bucket = new TokenBucket(10, 1, clock);
    expect(bucket.reserve()).toBe(0);
    expect(bucket.reserve()).toBe(100);
    vi.advanceTimersByTime(100);
    expect(bucket.tryTake()).toBe(false);
    vi.advanceTimersByTime(100);
    expect(bucket.tryTake()).toBe(true);
  });

  it('survives a clock that steps backwards', () => {
    let now = 5_000;
    const bucket = new TokenBucket(10, 1, () => now);
    expect(bucket.tryTake()).toBe(true);
    now = 1_000;
    expect(bucket.tryTake()).toBe(false);
    now = 1_100;
    expect(bucket.tryTake()).toBe(true);
  });

  it('starts from a given balance (what another process spent), never above the burst; a debt queues reservations', () => {
    let now = 0;
    expect(new TokenBucket(10, 5, () => now, 2).available).toBe(2);
    expect(new TokenBucket(10, 5, () => now, 50).available).toBe(5);
    const owing = new TokenBucket(10, 5, () => now, -1);
    expect(owing.reserve()).toBe(200);
    now = 200;
    expect(owing.available).toBeCloseTo(0);
  });

  it.each<[number, number]>([
    [0, 1],
    [-1, 1],
    [Number.NaN, 1],
    [Number.POSITIVE_INFINITY, 1],
    [1, 0],
    [1, 1.5],
  ])('rejects qps %s with burst %s', (qps, burst) => {
    expect(() => new TokenBucket(qps, burst, clock)).toThrow(RangeError);
  });
});
