import { describe, expect, it } from 'vitest';
import { RateCap } from '../../src/controller/rate-cap.js';

describe('RateCap: the global cap on scheduled rotations', () => {
  it('spaces slots evenly: 120 per minute is one every 500 ms, and a refused take costs nothing', () => {
    let now = 10_000;
    const cap = new RateCap(120, () => now);
    expect(cap.take()).toBe(0);
    expect(cap.take()).toBe(500);
    now += 200;
    expect(cap.take()).toBe(300);
    now += 300;
    expect(cap.take()).toBe(0);
    expect(cap.take()).toBe(500);
  });

  it('never lets more than perMinute (+1) through in any minute, however often it is asked', () => {
    let now = 0;
    const cap = new RateCap(60, () => now);
    const taken: number[] = [];
    for (; now < 180_000; now += 7) if (cap.take() === 0) taken.push(now);
    for (const start of [0, 30_000, 61_234, 120_000]) {
      expect(taken.filter((t) => t >= start && t < start + 60_000).length).toBeLessThanOrEqual(61);
    }
    expect(taken.length).toBeGreaterThanOrEqual(179);
  });

  it('an idle cap does not save up a burst', () => {
    let now = 0;
    const cap = new RateCap(60, () => now);
    expect(cap.take()).toBe(0);
    now += 600_000;
    expect(cap.take()).toBe(0);
    expect(cap.take()).toBe(1000);
  });
});
