import { describe, expect, it } from 'vitest';
import { RateCap, rateCaps } from '../../src/controller/rate-cap.js';
import { shareOf } from '../../src/controller/settings.js';

describe('RateCap: a global cap, evenly spaced, each waiting key with a slot of its own', () => {
  it('spaces slots evenly: 120 per minute is one every 500 ms; a key told to wait has its slot kept for it', () => {
    let now = 10_000;
    const cap = new RateCap(120, () => now);
    expect(cap.take('a')).toBe(0);
    expect(cap.take('b')).toBe(500);
    expect(cap.take('c')).toBe(1_000);
    now += 200;
    // Asked again before its time: the same slot, not a later one.
    expect(cap.take('b')).toBe(300);
    now += 300;
    expect(cap.take('b')).toBe(0);
    // A newcomer queues behind the slots already given.
    expect(cap.take('d')).toBe(1_000);
    now += 500;
    expect(cap.take('c')).toBe(0);
  });

  it('keys that come back when told use every slot: N keys due at once are done in N slots, each asked at most twice', () => {
    let now = 0;
    const cap = new RateCap(600, () => now);
    const comeBack = new Map<string, number>();
    const asked = new Map<string, number>();
    for (let i = 0; i < 50; i++) {
      const key = `k${i}`;
      asked.set(key, 1);
      const wait = cap.take(key);
      if (wait > 0) comeBack.set(key, now + wait);
    }
    const done: number[] = [0];
    while (comeBack.size > 0) {
      now = Math.min(...comeBack.values());
      for (const [key, at] of [...comeBack]) {
        if (at > now) continue;
        asked.set(key, (asked.get(key) ?? 0) + 1);
        const wait = cap.take(key);
        comeBack.delete(key);
        if (wait > 0) comeBack.set(key, now + wait);
        else done.push(now);
      }
    }
    expect(done).toHaveLength(50);
    expect(Math.max(...done)).toBe(49 * 100);
    expect(Math.max(...asked.values())).toBe(2);
  });

  it('never lets more than perMinute (+1) through in any minute, however often it is asked', () => {
    let now = 0;
    const cap = new RateCap(60, () => now);
    const taken: number[] = [];
    for (let i = 0; now < 180_000; now += 7, i++) if (cap.take(`k${i % 97}`) === 0) taken.push(now);
    for (const start of [0, 30_000, 61_234, 120_000]) {
      expect(taken.filter((t) => t >= start && t < start + 60_000).length).toBeLessThanOrEqual(61);
    }
    expect(taken.length).toBeGreaterThanOrEqual(175);
  });

  it('an idle cap does not save up a burst; a slot nobody came back for is dropped a minute later', () => {
    let now = 0;
    const cap = new RateCap(60, () => now);
    expect(cap.take('a')).toBe(0);
    expect(cap.take('gone')).toBe(1_000);
    now += 600_000;
    expect(cap.take('b')).toBe(0);
    expect(cap.take('c')).toBe(1_000);
    // "gone" asks again long after its slot: a fresh one, behind c.
    expect(cap.take('gone')).toBe(2_000);
  });
});

describe('the caps shared among replicas (settings.ts shareOf, then rateCaps): cluster-wide however many replicas work', () => {
  const rates = { serviceQps: 10, serviceBurst: 20, serviceShare: 1, scheduledRotationsPerMinute: 60, workloadRestartsPerMinute: 1, podPromptsPerMinute: 600 };

  /** Replicas that each always have a restart waiting, asking every second for `minutes`: when each restart happened. */
  function saturate(replicas: number, minutes: number): number[] {
    let now = 0;
    const caps = Array.from({ length: replicas }, () => rateCaps(shareOf(rates, replicas), () => now).restarts);
    const at: number[] = [];
    for (; now < minutes * 60_000; now += 1_000) {
      caps.forEach((cap, i) => {
        if (cap?.take(`replica-${i}`) === 0) at.push(now);
      });
    }
    return at;
  }

  it('--workload-restarts-per-minute 1 over 3 shards: one a minute cluster-wide (each replica one every 3 minutes), not 3', () => {
    const one = saturate(1, 60);
    const three = saturate(3, 60);
    expect(one).toHaveLength(60);
    // Each replica's first slot is free (a burst of one), so N replicas may start with N at once; after that the rate holds.
    expect(three.length).toBeLessThanOrEqual(60 + 2);
    for (let start = 0; start < 50 * 60_000; start += 60_000) {
      expect(three.filter((t) => t >= start && t < start + 10 * 60_000).length, `restarts in the 10 minutes from ${start / 60_000} min`).toBeLessThanOrEqual(
        10 + 2,
      );
    }
  });

  it('restarts off (0 a minute): no cap, and the share of a fraction stays a fraction', () => {
    expect(rateCaps(shareOf({ ...rates, workloadRestartsPerMinute: 0 }, 3)).restarts).toBeUndefined();
    expect(shareOf(rates, 3)).toMatchObject({ workloadRestartsPerMinute: 1 / 3, scheduledRotationsPerMinute: 20, serviceBurst: 6 });
    expect(shareOf(rates, 3).serviceQps).toBeCloseTo(10 / 3, 12);
    expect(shareOf({ ...rates, serviceBurst: 2 }, 3).serviceBurst).toBe(1);
  });

  it("--service-share: the cluster's part of the account's rate, then split among its replicas; the caps are the cluster's own", () => {
    // One of two clusters on an account, with 2 shards: each replica a quarter of the account's calls.
    expect(shareOf({ ...rates, serviceShare: 0.5 }, 2)).toMatchObject({
      serviceQps: 2.5,
      serviceBurst: 5,
      scheduledRotationsPerMinute: 30,
      workloadRestartsPerMinute: 0.5,
    });
    expect(shareOf({ ...rates, serviceShare: 0.5 }, 1)).toMatchObject({ serviceQps: 5, serviceBurst: 10 });
  });
});
