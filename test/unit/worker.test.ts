import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ReconcileRequest, ReconcileResult } from '../../src/controller/reconcile-contract.js';
import { Workers, type ReconcileVerdict } from '../../src/controller/worker.js';

/**
 * The workers: the one place a reconcile's outcome, a throw included, becomes what happens to its key. The
 * reconciles are stand-ins that record when they ran; the delays run on fake timers (the queue's clock and timers
 * are the globals), except where the event loop's own turns are the point.
 */

interface Run {
  readonly key: string;
  readonly at: number;
}

function workers(reconcile: (request: ReconcileRequest, runs: readonly Run[]) => Promise<ReconcileResult>) {
  const runs: Run[] = [];
  const verdicts: ReconcileVerdict[] = [];
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    }),
  );
  const started = performance.now();
  const w = new Workers({
    concurrency: 2,
    log,
    reconciled: (verdict) => verdicts.push(verdict),
    reconcile: (request) => {
      runs.push({ key: request.key, at: performance.now() - started });
      return reconcile(request, runs);
    },
  });
  return { w, runs, verdicts, lines };
}

/** Until `ok`, in 5 ms steps: of the fake clock when it is installed, else real ones. */
const until = async (what: string, ok: () => boolean, ms = 3_000): Promise<void> => {
  const deadline = performance.now() + ms;
  while (!ok()) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    if (vi.isFakeTimers()) await vi.advanceTimersByTimeAsync(5);
    else await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

/** `promise`, its timers run on the fake clock until it settles. */
async function settled<T>(promise: Promise<T>, ms = 10_000): Promise<T> {
  let done = false;
  const watched = promise.finally(() => {
    done = true;
  });
  await until('settled', () => done, ms);
  return watched;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('Workers', () => {
  it('reconciles that have nothing to wait for still leave the event loop its turns (timers, sockets, the Lease)', async () => {
    // A restart over synced UserGroups: every reconcile resolves from caches, without I/O.
    const { w, runs } = workers(async () => ({ kind: 'done' }));
    let reconciledWhenTimerFired = -1;
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        reconciledWhenTimerFired = runs.length;
        resolve();
      }, 0),
    );
    w.start(() => Array.from({ length: 20_000 }, (_, i) => `ns/ug-${i}`));
    await timer;
    await until('every key reconciled', () => runs.length === 20_000, 30_000);
    await w.stop(1_000);
    // Served in the same turns as the queue, not after the last of 20,000 reconciles.
    expect(reconciledWhenTimerFired).toBeGreaterThanOrEqual(0);
    expect(reconciledWhenTimerFired).toBeLessThan(1_000);
  });

  it('a reconcile that throws: logged once as "reconcile failed" with its key, and the key retried by the transient backoff', async () => {
    vi.useFakeTimers();
    const { w, runs, verdicts, lines } = workers(async (_request, done) => {
      if (done.length === 1) throw new Error('the apiserver went away');
      return { kind: 'done' };
    });
    w.start(() => ['ns/a']);
    await until('the retry', () => runs.length === 2);
    await settled(w.stop(1_000));
    expect(runs.map((r) => r.key)).toEqual(['ns/a', 'ns/a']);
    // 100 ms doubling, jittered to [d/2, d]: the first retry comes after 50 to 100 ms (the fake clock's 5 ms steps).
    expect((runs[1]?.at ?? 0) - (runs[0]?.at ?? 0)).toBeGreaterThanOrEqual(50);
    expect((runs[1]?.at ?? 0) - (runs[0]?.at ?? 0)).toBeLessThanOrEqual(105);
    expect(verdicts).toEqual(['error', 'success']);
    const failed = lines.filter((l) => l['msg'] === 'reconcile failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ usergroup: 'ns/a', err: 'the apiserver went away', level: 50 });
  });

  it('a result that says when: the key comes back then (a wait from the connection, a cap slot), and counts as a requeue', async () => {
    vi.useFakeTimers();
    const { w, runs, verdicts } = workers(async (_request, done) =>
      done.length === 1 ? { kind: 'wait', afterMs: 150 } : done.length === 2 ? { kind: 'done', wake: { dueAt: [], slotInMs: [120] } } : { kind: 'done' },
    );
    w.start(() => ['ns/a']);
    await until('three runs', () => runs.length === 3);
    await settled(w.stop(1_000));
    const [first, second, third] = runs.map((r) => r.at);
    expect((second ?? 0) - (first ?? 0)).toBeGreaterThanOrEqual(150);
    expect((third ?? 0) - (second ?? 0)).toBeGreaterThanOrEqual(120);
    expect(verdicts).toEqual(['error', 'requeue', 'success']);
  });

  it('abort: in-flight reconciles see their signal aborted at once; what they throw is "work withdrawn", not a failure', async () => {
    const { w, runs, lines } = workers(
      (request) =>
        new Promise((_resolve, reject) => {
          request.signal?.addEventListener('abort', () => reject(request.signal?.reason as Error));
        }),
    );
    w.start(() => ['ns/a', 'ns/b']);
    await until('both in flight', () => runs.length === 2);
    const began = performance.now();
    await w.abort();
    expect(performance.now() - began).toBeLessThan(500);
    expect(lines.filter((l) => l['msg'] === 'reconcile failed')).toEqual([]);
    expect(lines.filter((l) => typeof l['msg'] === 'string' && l['msg'].includes('work was withdrawn')).map((l) => l['usergroup'])).toEqual(
      expect.arrayContaining(['ns/a', 'ns/b']),
    );
    expect(w.active).toBe(false);
  });

  it('a start while a stop drains waits for it: two generations of workers never run side by side', async () => {
    vi.useFakeTimers();
    let inFlight = 0;
    let most = 0;
    const { w, runs } = workers(async () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 100));
      inFlight -= 1;
      return { kind: 'done' };
    });
    w.start(() => ['ns/a']);
    await until('the first run', () => runs.length === 1);
    const stopped = w.stop(5_000);
    w.start(() => ['ns/a']);
    expect(w.active).toBe(false);
    await settled(stopped);
    expect(w.active).toBe(true);
    await until('the second generation', () => runs.length === 2);
    await settled(w.stop(5_000));
    expect(most).toBe(1);
  });
});
