import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TokenBucket } from '../../src/service/token-bucket.js';

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

  it('serves waiters in arrival order, one per refill interval', async () => {
    const bucket = new TokenBucket(5, 1, clock);
    expect(bucket.tryTake()).toBe(true);
    const order: number[] = [];
    const waits = [1, 2, 3].map((n) => bucket.take().then(() => order.push(n)));
    await vi.advanceTimersByTimeAsync(199);
    expect(order).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(order).toEqual([1]);
    await vi.advanceTimersByTimeAsync(200);
    expect(order).toEqual([1, 2]);
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all(waits);
    expect(order).toEqual([1, 2, 3]);
  });

  it('does not let tryTake jump ahead of a waiter', async () => {
    const bucket = new TokenBucket(10, 1, clock);
    expect(bucket.tryTake()).toBe(true);
    let served = false;
    const wait = bucket.take().then(() => {
      served = true;
    });
    // Advance the clock without running the timer: a token exists, but it belongs to the waiter.
    vi.setSystemTime(Date.now() + 100);
    expect(bucket.tryTake()).toBe(false);
    // The timer (still due at the fake timers' own clock + 100 ms) hands that token to the waiter.
    await vi.advanceTimersByTimeAsync(100);
    await wait;
    expect(served).toBe(true);
  });

  it('rejects an aborted waiter with the signal reason and serves the next', async () => {
    const bucket = new TokenBucket(10, 1, clock);
    bucket.tryTake();
    const controller = new AbortController();
    const first = bucket.take(controller.signal);
    const second = bucket.take();
    controller.abort(new Error('shutting down'));
    await expect(first).rejects.toThrow('shutting down');
    await vi.advanceTimersByTimeAsync(100);
    await expect(second).resolves.toBeUndefined();
    // The aborted waiter did not consume a token.
    expect(bucket.available).toBeLessThan(1);
  });

  it('rejects at once for an already aborted signal, without taking a token', async () => {
    const bucket = new TokenBucket(10, 1, clock);
    await expect(bucket.take(AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
    expect(bucket.tryTake()).toBe(true);
  });

  it('resolves immediately while tokens remain', async () => {
    const bucket = new TokenBucket(1, 2, clock);
    await bucket.take();
    await bucket.take();
    expect(bucket.tryTake()).toBe(false);
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

describe('TokenBucket in real time', () => {
  it('spaces calls beyond the burst at 1/qps', async () => {
    const bucket = new TokenBucket(20, 2);
    const started = performance.now();
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      await bucket.take();
      times.push(performance.now() - started);
    }
    // Two from the burst at once, then three more at 50 ms intervals: about 150 ms in all.
    expect(times[1]).toBeLessThan(40);
    expect(times[4]).toBeGreaterThanOrEqual(140);
    expect(times[4]).toBeLessThan(280);
  });
});
