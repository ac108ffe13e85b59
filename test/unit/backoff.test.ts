import { describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF_CAP_MS, ItemBackoff } from '../../src/kube/backoff.js';

function delays(backoff: ItemBackoff, key: string, count: number): number[] {
  return Array.from({ length: count }, () => backoff.when(key));
}

describe('ItemBackoff', () => {
  it('doubles from a 5 ms base per failure (random 0 gives the nominal delay)', () => {
    const backoff = new ItemBackoff({ random: () => 0 });
    expect(delays(backoff, 'ns/a', 6)).toEqual([5, 10, 20, 40, 80, 160]);
    // Six failures counted: the seventh waits 2^6 × base.
    expect(backoff.when('ns/a')).toBe(320);
  });

  it('forget resets the failure count to the base delay', () => {
    const backoff = new ItemBackoff({ random: () => 0 });
    delays(backoff, 'ns/a', 4);
    backoff.forget('ns/a');
    expect(backoff.when('ns/a')).toBe(5);
  });

  it('tracks keys independently', () => {
    const backoff = new ItemBackoff({ random: () => 0 });
    delays(backoff, 'ns/a', 3);
    expect(backoff.when('ns/b')).toBe(5);
    // ns/a's three failures are its own: its fourth waits 40 ms, ns/b's second 10 ms, a new key the base.
    expect(backoff.when('ns/a')).toBe(40);
    expect(backoff.when('ns/b')).toBe(10);
    expect(backoff.when('ns/never')).toBe(5);
  });

  it('never exceeds the cap, however many failures', () => {
    const backoff = new ItemBackoff({ baseMs: 5, capMs: 100, random: () => 0 });
    expect(delays(backoff, 'ns/a', 8)).toEqual([5, 10, 20, 40, 80, 100, 100, 100]);
    // Past 2^1024 the nominal delay is Infinity before min(); it must still be the cap.
    const many = delays(backoff, 'ns/a', 2000);
    expect(many.every((d) => d === 100)).toBe(true);
  });

  it('caps at 1 minute by default', () => {
    const backoff = new ItemBackoff({ random: () => 0 });
    const all = delays(backoff, 'ns/a', 40);
    expect(Math.max(...all)).toBe(DEFAULT_BACKOFF_CAP_MS);
    expect(DEFAULT_BACKOFF_CAP_MS).toBe(60_000);
  });

  it('jitters each delay to nominal * (1 - r/2), within [nominal/2, nominal]', () => {
    const randoms = [0, 0.25, 0.5, 0.999999];
    for (const r of randoms) {
      const backoff = new ItemBackoff({ baseMs: 8, capMs: 64, random: () => r });
      const nominal = [8, 16, 32, 64, 64];
      const got = delays(backoff, 'ns/a', nominal.length);
      got.forEach((d, i) => {
        const n = nominal[i] ?? Number.NaN;
        expect(d).toBeCloseTo(n * (1 - r / 2), 9);
        expect(d).toBeGreaterThanOrEqual(n / 2);
        expect(d).toBeLessThanOrEqual(n);
      });
    }
  });

  it('keeps delays within bounds with the default Math.random', () => {
    const backoff = new ItemBackoff({ baseMs: 5, capMs: 1000 });
    for (let failures = 0; failures < 500; failures++) {
      const nominal = Math.min(1000, 5 * 2 ** failures);
      const d = backoff.when('ns/a');
      expect(d).toBeGreaterThanOrEqual(nominal / 2);
      expect(d).toBeLessThanOrEqual(nominal);
    }
  });

  it('clamps a faulty random source instead of leaving the bounds', () => {
    for (const r of [-3, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const backoff = new ItemBackoff({ baseMs: 10, capMs: 10, random: () => r });
      const d = backoff.when('ns/a');
      expect(d).toBeGreaterThanOrEqual(5);
      expect(d).toBeLessThanOrEqual(10);
    }
  });

  it('rejects a non-positive base and a cap below the base', () => {
    expect(() => new ItemBackoff({ baseMs: 0 })).toThrow(RangeError);
    expect(() => new ItemBackoff({ baseMs: Number.NaN })).toThrow(RangeError);
    expect(() => new ItemBackoff({ baseMs: 10, capMs: 5 })).toThrow(RangeError);
    expect(() => new ItemBackoff({ capMs: Number.POSITIVE_INFINITY })).toThrow(RangeError);
  });
});
