import { describe, expect, it } from 'vitest';
import type { RotationDecision } from '../../src/controller/decide.js';
import { RequestBudget, requestBudgets } from '../../src/controller/request-budget.js';
import { rotationGate } from '../../src/controller/usergroup/rotation-slot.js';

/** A budget of 3 at once, then 6 a minute (a slot every 10 s), on a fake monotonic clock. */
function budget(): { b: RequestBudget; advance: (ms: number) => void } {
  let now = 1_000_000;
  return { b: new RequestBudget({ burst: 3, perMinute: 6 }, () => now), advance: (ms) => (now += ms) };
}

describe('RequestBudget: per namespace, a burst then a rate, a slot kept per waiting key', () => {
  it('the burst goes at once; the next key waits for its own slot, 10 s apart at 6 a minute', () => {
    const { b } = budget();
    for (const k of ['a', 'b', 'c']) expect(b.take('ns', `ns/${k}`)).toEqual({ kind: 'now' });
    expect(b.take('ns', 'ns/d')).toEqual({ kind: 'wait', inMs: 10_000, first: true });
    expect(b.take('ns', 'ns/e')).toEqual({ kind: 'wait', inMs: 20_000, first: true });
    // Asking again before the slot: the same slot, not a new one (and not said again).
    expect(b.take('ns', 'ns/d')).toEqual({ kind: 'wait', inMs: 10_000, first: false });
  });

  it('a key that comes back at its slot goes; once spent, its next request pays again', () => {
    const { b, advance } = budget();
    for (const k of ['a', 'b', 'c']) b.take('ns', `ns/${k}`);
    expect(b.take('ns', 'ns/d').kind).toBe('wait');
    advance(10_000);
    expect(b.take('ns', 'ns/d')).toEqual({ kind: 'now' });
    b.spent('ns', 'ns/d');
    // Another request of the same key later: a new slot after the debt.
    expect(b.take('ns', 'ns/d')).toEqual({ kind: 'wait', inMs: 10_000, first: true });
  });

  it('a call the account deferred (not spent) keeps its paid slot: asking again costs nothing more', () => {
    const { b } = budget();
    expect(b.take('ns', 'ns/a')).toEqual({ kind: 'now' });
    // Deferred by the account's rate limit: the key comes back, several times.
    for (let i = 0; i < 5; i++) expect(b.take('ns', 'ns/a')).toEqual({ kind: 'now' });
    b.spent('ns', 'ns/a');
    // Two tokens of the burst are left, as if a single request had been made.
    expect(b.take('ns', 'ns/b')).toEqual({ kind: 'now' });
    expect(b.take('ns', 'ns/c')).toEqual({ kind: 'now' });
    expect(b.take('ns', 'ns/d').kind).toBe('wait');
  });

  it('another namespace has its own budget: a flood in one does not delay the other', () => {
    const { b } = budget();
    for (let i = 0; i < 50; i++) b.take('flood', `flood/g${i}`);
    expect(b.take('quiet', 'quiet/a')).toEqual({ kind: 'now' });
  });

  it('within a window of w ms, at most burst + w × rate calls go out in one namespace', () => {
    const { b, advance } = budget();
    let went = 0;
    // 100 keys asking every second for 60 s (each retrying at its slot or at once, each with a new request once answered).
    for (let s = 0; s < 60; s++) {
      for (let i = 0; i < 100; i++) {
        if (b.take('ns', `ns/g${i}`).kind !== 'now') continue;
        went++;
        b.spent('ns', `ns/g${i}`);
      }
      advance(1_000);
    }
    expect(went).toBeLessThanOrEqual(3 + 6);
    expect(went).toBeGreaterThanOrEqual(3 + 5);
  });

  it('one instance per kind: sync requests do not spend the rotation budget', () => {
    const budgets = requestBudgets({ sync: { burst: 1, perMinute: 1 }, rotation: { burst: 1, perMinute: 1 } }, () => 0);
    expect(budgets.sync.take('ns', 'ns/a')).toEqual({ kind: 'now' });
    expect(budgets.sync.take('ns', 'ns/b').kind).toBe('wait');
    expect(budgets.rotation.take('ns', 'ns/b')).toEqual({ kind: 'now' });
  });
});

describe('rotationGate: which slot a rotation needs before its intent is written', () => {
  const rotate = (scheduled: boolean): RotationDecision => ({ kind: 'rotate', value: scheduled ? 'scheduled:2026-11-01T00:00:00Z' : 'r1', scheduled });

  it('a requested rotation: a slot of its namespace budget; a due scheduled one: the global cap', () => {
    expect(rotationGate(rotate(false), false)).toBe('request-budget');
    expect(rotationGate(rotate(true), false)).toBe('scheduled-cap');
  });

  it('never for work already begun, a value only to record, or nothing to do', () => {
    expect(rotationGate({ kind: 'recover', value: 'r1', scheduled: false }, false)).toBe('none');
    expect(rotationGate({ kind: 'settle', value: 'r1', scheduled: false }, false)).toBe('none');
    expect(rotationGate({ kind: 'record', value: 'r1' }, false)).toBe('none');
    expect(rotationGate({ kind: 'none' }, false)).toBe('none');
  });

  it("never for a request an adoption's rotation already satisfied (no call is made for it)", () => {
    expect(rotationGate(rotate(false), true)).toBe('none');
    expect(rotationGate(rotate(true), true)).toBe('none');
  });
});
