import { afterEach, describe, expect, it, vi } from 'vitest';
import { ItemBackoff } from '../../src/kube/backoff.js';
import { WorkQueue, type WorkQueueMetrics } from '../../src/kube/workqueue.js';

// Lets promise callbacks run; fake timers do not touch microtasks.
async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

// Records whether a promise has settled without awaiting it.
function track<T>(promise: Promise<T>): { settled: boolean; value: T | undefined } {
  const state: { settled: boolean; value: T | undefined } = { settled: false, value: undefined };
  void promise.then((value) => {
    state.settled = true;
    state.value = value;
  });
  return state;
}

// Deterministic pseudo-random numbers in [0, 1) so the worker simulation is reproducible.
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function fakeClockQueue(): WorkQueue {
  vi.useFakeTimers();
  return new WorkQueue({ rateLimiter: new ItemBackoff({ random: () => 0 }), now: () => Date.now() });
}

afterEach(() => {
  vi.useRealTimers();
});

describe('WorkQueue adds and gets', () => {
  it('hands out ready keys in FIFO order', async () => {
    const q = new WorkQueue();
    for (const key of ['ns/c', 'ns/a', 'ns/b']) q.add(key);
    expect(q.len()).toBe(3);
    expect([await q.get(), await q.get(), await q.get()]).toEqual(['ns/c', 'ns/a', 'ns/b']);
    expect(q.len()).toBe(0);
    expect(q.inFlight()).toBe(3);
  });

  it('coalesces adds of a key that is already queued', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    q.add('ns/b');
    q.add('ns/a');
    q.add('ns/a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('ns/a');
    expect(await q.get()).toBe('ns/b');
    const next = track(q.get());
    await flush();
    expect(next.settled).toBe(false);
    q.shutDown();
  });

  it('gives concurrent waiters different keys, in the order they asked', async () => {
    const q = new WorkQueue();
    const waiters = [q.get(), q.get(), q.get()];
    q.add('ns/a');
    q.add('ns/b');
    q.add('ns/a');
    q.add('ns/c');
    expect(await Promise.all(waiters)).toEqual(['ns/a', 'ns/b', 'ns/c']);
    expect(q.inFlight()).toBe(3);
  });

  it('holds a key re-added while processing until done(), then queues it behind the others', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    q.add('ns/b');
    expect(await q.get()).toBe('ns/a');
    q.add('ns/a');
    q.add('ns/a');
    q.add('ns/c');
    // Not handed out again while in flight.
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('ns/b');
    expect(await q.get()).toBe('ns/c');
    const second = track(q.get());
    await flush();
    expect(second.settled).toBe(false);
    q.done('ns/a');
    await flush();
    expect(second.value).toBe('ns/a');
    q.done('ns/a');
    expect(q.len()).toBe(0);
  });

  it('does not re-deliver a key that was not re-added, and ignores done() of unknown keys', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    expect(await q.get()).toBe('ns/a');
    q.done('ns/a');
    q.done('ns/a');
    q.done('ns/unknown');
    expect(q.len()).toBe(0);
    expect(q.inFlight()).toBe(0);
  });

  it('never gives a key to two workers at once and loses no add made during processing', async () => {
    const q = new WorkQueue();
    const keys = ['ns/a', 'ns/b', 'ns/c', 'ns/d', 'ns/e'];
    const random = lcg(7);
    const active = new Set<string>();
    let overlaps = 0;
    let seq = 0;
    const lastAdd = new Map<string, number>();
    const lastStart = new Map<string, number>();
    let addsLeft = 300;
    let allAdded: () => void = () => undefined;
    const addsDone = new Promise<void>((resolve) => {
      allAdded = resolve;
    });
    const addOne = (key: string): void => {
      lastAdd.set(key, ++seq);
      q.add(key);
      addsLeft -= 1;
      if (addsLeft === 0) allAdded();
    };
    const pick = (): string => keys[Math.floor(random() * keys.length)] ?? 'ns/a';

    const worker = async (): Promise<number> => {
      let handled = 0;
      for (let key = await q.get(); key !== undefined; key = await q.get()) {
        if (active.has(key)) overlaps += 1;
        active.add(key);
        lastStart.set(key, ++seq);
        handled += 1;
        // Adds land while this key is in flight: often the key itself.
        for (let i = 0; i < 2 && addsLeft > 0; i++) addOne(random() < 0.5 ? key : pick());
        await new Promise<void>((resolve) => setImmediate(resolve));
        active.delete(key);
        q.done(key);
      }
      return handled;
    };

    for (const key of keys) addOne(key);
    const workers = Array.from({ length: 4 }, () => worker());
    await addsDone;
    expect(await q.shutDownWithDrain(1000)).toBe(true);
    const handled = await Promise.all(workers);

    expect(overlaps).toBe(0);
    expect(handled.filter((n) => n > 0).length).toBeGreaterThan(1);
    for (const key of keys) {
      // The last add of every key was followed by a processing that started after it.
      expect(lastStart.get(key) ?? 0).toBeGreaterThan(lastAdd.get(key) ?? 0);
    }
    expect(q.inFlight()).toBe(0);
  });
});

describe('WorkQueue fairness between namespaces', () => {
  it('serves namespaces round-robin: a 5,000-key backlog delays another namespace by one key', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 5_000; i++) q.add(`noisy/g${i}`);
    q.add('quiet/rotate-me');
    const first = [await q.get(), await q.get()];
    expect(first).toEqual(['noisy/g0', 'quiet/rotate-me']);
  });

  it('keeps FIFO order within a namespace and alternates between busy ones', async () => {
    const q = new WorkQueue();
    for (const k of ['a/1', 'a/2', 'a/3', 'b/1', 'c/1', 'b/2']) q.add(k);
    const got: (string | undefined)[] = [];
    for (let i = 0; i < 6; i++) got.push(await q.get());
    expect(got).toEqual(['a/1', 'b/1', 'c/1', 'a/2', 'b/2', 'a/3']);
    expect(q.len()).toBe(0);
  });

  it('a namespace that comes back after draining takes its turn at the back', async () => {
    const q = new WorkQueue();
    q.add('a/1');
    q.add('b/1');
    q.add('b/2');
    expect(await q.get()).toBe('a/1');
    q.add('a/2');
    expect([await q.get(), await q.get(), await q.get()]).toEqual(['b/1', 'a/2', 'b/2']);
  });
});

describe('WorkQueue urgent lane', () => {
  it('serves urgent keys (a rotation someone waits for) before background work, fairly between namespaces', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 100; i++) q.add(`noisy/g${i}`);
    q.add('quiet/r1', true);
    q.add('noisy/r2', true);
    q.add('quiet/r3', true);
    expect([await q.get(), await q.get(), await q.get(), await q.get()]).toEqual(['quiet/r1', 'noisy/r2', 'quiet/r3', 'noisy/g0']);
  });

  it('moves a key already waiting in the background lane up, and hands it out once', async () => {
    const q = new WorkQueue();
    q.add('a/1');
    q.add('a/2');
    q.add('a/2', true);
    expect(await q.get()).toBe('a/2');
    q.done('a/2');
    expect(await q.get()).toBe('a/1');
    q.done('a/1');
    expect(q.len()).toBe(1); // the stale entry of a/2, skipped when reached
    let got: string | undefined = 'none';
    void q.get().then((k) => (got = k));
    await Promise.resolve();
    expect(got).toBe('none');
    q.add('b/1');
    await Promise.resolve();
    expect(got).toBe('b/1');
  });

  it('an urgent add while the key is processed queues it urgently after done()', async () => {
    const q = new WorkQueue();
    q.add('a/1');
    expect(await q.get()).toBe('a/1');
    q.add('b/1');
    q.add('a/1', true);
    q.done('a/1');
    expect(await q.get()).toBe('a/1');
  });
});

describe('WorkQueue delayed and rate-limited adds', () => {
  it('delivers delayed keys in order of their ready time', async () => {
    const q = fakeClockQueue();
    q.addAfter('ns/a', 30);
    q.addAfter('ns/b', 10);
    q.addAfter('ns/c', 20);
    q.add('ns/now');
    expect(q.len()).toBe(1);
    await vi.advanceTimersByTimeAsync(9);
    expect(q.len()).toBe(1);
    await vi.advanceTimersByTimeAsync(21);
    expect(q.len()).toBe(4);
    expect([await q.get(), await q.get(), await q.get(), await q.get()]).toEqual(['ns/now', 'ns/b', 'ns/c', 'ns/a']);
  });

  it('keeps the earlier time when a waiting key is added again with a later one', async () => {
    const q = fakeClockQueue();
    q.addAfter('ns/a', 10);
    q.addAfter('ns/a', 100);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(10);
    expect(q.len()).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('moves a waiting key forward when it is added again with an earlier time', async () => {
    const q = fakeClockQueue();
    q.addAfter('ns/a', 100);
    q.addAfter('ns/a', 10);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(10);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('ns/a');
    q.done('ns/a');
    // The replaced 100 ms add must not deliver the key a second time.
    await vi.advanceTimersByTimeAsync(200);
    expect(q.len()).toBe(0);
  });

  it('serves any number of delayed keys with one timer, each delivered at its own time', async () => {
    const q = fakeClockQueue();
    const keys = Array.from({ length: 1000 }, (_, i) => `ns/k${i}`);
    // Scheduled in a scrambled order: key i is due at (i + 1) ms.
    for (let i = 0; i < keys.length; i++) {
      const j = (i * 7919) % keys.length;
      q.addAfter(keys[j] ?? '', j + 1);
    }
    expect(vi.getTimerCount()).toBe(1);
    for (const step of [1, 9, 90, 400, 500]) {
      const before = q.len();
      await vi.advanceTimersByTimeAsync(step);
      expect(q.len() - before).toBe(step);
    }
    const order: (string | undefined)[] = [];
    while (order.length < keys.length) order.push(await q.get());
    expect(order).toEqual(keys);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps delivering on time when keys keep being moved forward (superseded entries are dropped)', async () => {
    const q = fakeClockQueue();
    for (let round = 0; round < 50; round++) for (let i = 0; i < 20; i++) q.addAfter(`ns/k${i}`, 10_000 - round * 100 - i);
    expect(vi.getTimerCount()).toBe(1);
    // The last round put them at 5,081–5,100 ms; every earlier entry is superseded.
    await vi.advanceTimersByTimeAsync(5_080);
    expect(q.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(20);
    expect(q.len()).toBe(20);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(q.len()).toBe(20);
  });

  it('adds at once for a delay of zero or less', () => {
    const q = fakeClockQueue();
    q.addAfter('ns/a', 0);
    q.addAfter('ns/b', -5);
    expect(q.len()).toBe(2);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('backs off exponentially per key and forget() resets it', async () => {
    const q = fakeClockQueue();
    for (const expected of [5, 10, 20, 40, 80]) {
      q.addRateLimited('ns/a');
      await vi.advanceTimersByTimeAsync(expected - 1);
      expect(q.len()).toBe(0);
      await vi.advanceTimersByTimeAsync(1);
      expect(q.len()).toBe(1);
      expect(await q.get()).toBe('ns/a');
      q.done('ns/a');
    }
    q.forget('ns/a');
    q.addRateLimited('ns/a');
    await vi.advanceTimersByTimeAsync(5);
    expect(q.len()).toBe(1);
  });

  it('uses the injected rate limiter', () => {
    const when = vi.fn<(key: string) => number>(() => 0);
    const forget = vi.fn<(key: string) => undefined>(() => undefined);
    const q = new WorkQueue({ rateLimiter: { when, forget } });
    q.addRateLimited('ns/a');
    expect(when).toHaveBeenCalledWith('ns/a', undefined);
    expect(q.len()).toBe(1);
    q.forget('ns/a');
    expect(forget).toHaveBeenCalledWith('ns/a');
  });

  it('does not keep the event loop alive with a pending delayed add', () => {
    const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const q = new WorkQueue();
    const before = timeouts();
    q.addAfter('ns/a', 60_000);
    q.addRateLimited('ns/b');
    expect(timeouts()).toBe(before);
    q.shutDown();
  });
});

describe('WorkQueue shutdown', () => {
  it('shutDown resolves waiting get() calls with undefined and refuses further work', async () => {
    const q = new WorkQueue();
    const waiters = [q.get(), q.get()];
    q.shutDown();
    expect(await Promise.all(waiters)).toEqual([undefined, undefined]);
    q.add('ns/a');
    q.addAfter('ns/b', 0);
    expect(q.len()).toBe(0);
    expect(await q.get()).toBeUndefined();
    expect(q.isShuttingDown()).toBe(true);
  });

  it('shutDown stops handing out queued keys at once; in-flight keys can still finish', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    q.add('ns/b');
    expect(await q.get()).toBe('ns/a');
    q.add('ns/a');
    q.shutDown();
    expect(await q.get()).toBeUndefined();
    expect(q.len()).toBe(0);
    q.done('ns/a');
    expect(q.inFlight()).toBe(0);
    expect(await q.get()).toBeUndefined();
  });

  it('shutDown clears pending delayed adds so no timer is left', async () => {
    const q = fakeClockQueue();
    q.addAfter('ns/a', 1000);
    q.addRateLimited('ns/b');
    expect(vi.getTimerCount()).toBe(1);
    q.shutDown();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(2000);
    expect(q.len()).toBe(0);
  });

  it('shutDownWithDrain waits for in-flight keys and refuses new adds', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    expect(await q.get()).toBe('ns/a');
    const drained = track(q.shutDownWithDrain(1000));
    q.add('ns/b');
    q.addRateLimited('ns/c');
    expect(q.len()).toBe(0);
    await flush();
    expect(drained.settled).toBe(false);
    q.done('ns/a');
    await flush();
    expect(drained.value).toBe(true);
    expect(await q.get()).toBeUndefined();
  });

  it('shutDownWithDrain still hands out keys queued before it, and re-adds made before it', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    q.add('ns/b');
    expect(await q.get()).toBe('ns/a');
    q.add('ns/a');
    const drained = track(q.shutDownWithDrain(1000));
    expect(await q.get()).toBe('ns/b');
    const waiting = track(q.get());
    q.done('ns/b');
    await flush();
    expect(waiting.settled).toBe(false);
    q.done('ns/a');
    await flush();
    expect(waiting.value).toBe('ns/a');
    const last = track(q.get());
    await flush();
    // ns/a is in flight but not dirty: nothing can come any more.
    expect(last.settled).toBe(true);
    expect(last.value).toBeUndefined();
    expect(drained.settled).toBe(false);
    q.done('ns/a');
    await flush();
    expect(drained.value).toBe(true);
  });

  it('shutDownWithDrain resolves at once when idle and cancels delayed adds', async () => {
    const q = fakeClockQueue();
    q.addAfter('ns/a', 1000);
    expect(await q.shutDownWithDrain(5000)).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('shutDownWithDrain gives up after the timeout, resolves false and stops the queue', async () => {
    const q = fakeClockQueue();
    q.add('ns/a');
    q.add('ns/b');
    expect(await q.get()).toBe('ns/a');
    const drained = track(q.shutDownWithDrain(100));
    await vi.advanceTimersByTimeAsync(99);
    expect(drained.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(drained.value).toBe(false);
    expect(q.isShuttingDown()).toBe(true);
    expect(await q.get()).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
    q.done('ns/a');
    expect(q.inFlight()).toBe(0);
  });

  it('does not keep the event loop alive with the drain timeout', () => {
    const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const q = new WorkQueue();
    q.add('ns/a');
    void q.get();
    const before = timeouts();
    void q.shutDownWithDrain(60_000);
    expect(timeouts()).toBe(before);
    q.done('ns/a');
  });
});

describe('WorkQueue metrics', () => {
  it('reports adds, retries, depth, queue latency and work duration', async () => {
    let now = 0;
    const calls = {
      depth: [] as number[],
      add: 0,
      retry: 0,
      queueLatency: [] as number[],
      workDuration: [] as number[],
    };
    const metrics: WorkQueueMetrics = {
      depth: (n) => calls.depth.push(n),
      add: () => {
        calls.add += 1;
      },
      retry: () => {
        calls.retry += 1;
      },
      queueLatency: (s) => calls.queueLatency.push(s),
      workDuration: (s) => calls.workDuration.push(s),
    };
    const q = new WorkQueue({ metrics, now: () => now });

    q.add('ns/a');
    q.add('ns/a');
    q.add('ns/b');
    expect(calls.add).toBe(2);
    expect(calls.depth).toEqual([1, 2]);

    now = 250;
    expect(await q.get()).toBe('ns/a');
    expect(calls.queueLatency).toEqual([0.25]);
    expect(calls.depth.at(-1)).toBe(1);

    now = 1250;
    expect(await q.get()).toBe('ns/b');
    expect(calls.queueLatency.at(-1)).toBe(1.25);
    expect(q.unfinishedWorkSeconds()).toBe(1 + 0);
    expect(q.longestRunningProcessorSeconds()).toBe(1);

    now = 2250;
    q.done('ns/a');
    expect(calls.workDuration).toEqual([2]);
    expect(q.unfinishedWorkSeconds()).toBe(1);

    q.addAfter('ns/c', 0);
    q.addRateLimited('ns/d');
    expect(calls.retry).toBe(2);
    q.shutDown();
    expect(calls.depth.at(-1)).toBe(0);
    expect(q.longestRunningProcessorSeconds()).toBe(1);
  });

  it('works without any metrics hooks', async () => {
    const q = new WorkQueue({ metrics: {} });
    q.add('ns/a');
    expect(await q.get()).toBe('ns/a');
    q.done('ns/a');
    expect(q.unfinishedWorkSeconds()).toBe(0);
    expect(q.longestRunningProcessorSeconds()).toBe(0);
  });
});

describe('WorkQueue retries by class, with a floor', () => {
  it('passes the class to the rate limiter and never adds sooner than the floor', async () => {
    const q = fakeClockQueue();
    const when = vi.fn<(key: string, retryClass?: string) => number>(() => 10);
    const classed = new WorkQueue({ rateLimiter: { when, forget: () => undefined }, now: () => Date.now() });
    classed.addRateLimited('ns/a', 'persistent', 5_000);
    expect(when).toHaveBeenCalledWith('ns/a', 'persistent');
    await vi.advanceTimersByTimeAsync(4_999);
    expect(classed.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(classed.len()).toBe(1);
    // Without a floor the limiter's delay stands.
    q.addRateLimited('ns/b');
    await vi.advanceTimersByTimeAsync(5);
    expect(q.len()).toBe(1);
  });
});
