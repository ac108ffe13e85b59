import { describe, expect, it } from 'vitest';
import { RequestBudget, requestBudgets } from '../../src/controller/request-budget.js';
import {
  budgetAnnotations,
  decodeDebts,
  encodeDebts,
  MAX_RECORDED_NAMESPACES,
  REQUEST_BUDGETS_ANNOTATION,
  takeOverDebts,
} from '../../src/controller/request-budget-record.js';

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

describe('RequestBudget: what it owes, and taking on what another process spent', () => {
  it('a full budget owes nothing; a spent burst owes one refill (3 at 6 a minute: 30 s), less as time passes', () => {
    const { b, advance } = budget();
    expect(b.owed()).toEqual(new Map());
    for (const k of ['a', 'b', 'c']) {
      b.take('ns', `ns/${k}`);
      b.spent('ns', `ns/${k}`);
    }
    expect(b.owed()).toEqual(new Map([['ns', 30_000]]));
    advance(12_000);
    expect(b.owed()).toEqual(new Map([['ns', 18_000]]));
    advance(18_000);
    expect(b.owed()).toEqual(new Map());
  });

  it('counts only what was spent: slots kept for waiting or deferred keys are handed back (they reserve again elsewhere)', () => {
    const { b } = budget();
    b.take('ns', 'ns/a');
    b.spent('ns', 'ns/a');
    // Taken and deferred (not spent), and two waiting for their slots: none of them made a call.
    b.take('ns', 'ns/b');
    b.take('ns', 'ns/c');
    b.take('ns', 'ns/d');
    b.take('ns', 'ns/e');
    expect(b.owed()).toEqual(new Map([['ns', 10_000]]));
  });

  it('a budget that takes on a debt starts there: the other process spent the burst, so the next request waits', () => {
    const { b, advance } = budget();
    b.owe('ns', 30_000);
    expect(b.take('ns', 'ns/a')).toEqual({ kind: 'wait', inMs: 10_000, first: true });
    advance(10_000);
    expect(b.take('ns', 'ns/a')).toEqual({ kind: 'now' });
    // Another namespace is untouched.
    expect(b.take('other', 'other/a')).toEqual({ kind: 'now' });
  });

  it('keeps the larger of two debts, never believes more than one refill, ignores what is already paid off', () => {
    const { b } = budget();
    b.owe('ns', 25_000);
    b.owe('ns', 5_000);
    expect(b.owed().get('ns')).toBe(25_000);
    b.owe('ns', 3_600_000);
    expect(b.owed().get('ns')).toBe(30_000);
    b.owe('paid', 0);
    b.owe('paid', -5);
    expect(b.owed().has('paid')).toBe(false);
  });

  it('slots already kept for waiting keys stay theirs when a debt is taken on', () => {
    const { b } = budget();
    for (const k of ['a', 'b', 'c']) b.take('ns', `ns/${k}`);
    expect(b.take('ns', 'ns/d')).toEqual({ kind: 'wait', inMs: 10_000, first: true });
    // Nothing spent yet here (a, b, c not spent) and another process says the burst is gone: waiting keys keep
    // their slots and new requests queue behind both.
    b.owe('ns', 30_000);
    expect(b.take('ns', 'ns/d')).toEqual({ kind: 'wait', inMs: 10_000, first: false });
    expect(b.take('ns', 'ns/e').kind).toBe('wait');
  });

  it('across a hand-over (owed → owe) a namespace flooding both processes gets no more than burst + rate × window', () => {
    let now = 5_000_000;
    const clock = (): number => now;
    const first = new RequestBudget({ burst: 3, perMinute: 6 }, clock);
    let went = 0;
    const flood = (b: RequestBudget, seconds: number): void => {
      for (let s = 0; s < seconds; s++) {
        for (let i = 0; i < 20; i++) {
          if (b.take('ns', `ns/g${i}`).kind !== 'now') continue;
          went++;
          b.spent('ns', `ns/g${i}`);
        }
        now += 1_000;
      }
    };
    flood(first, 20);
    const second = new RequestBudget({ burst: 3, perMinute: 6 }, clock);
    for (const [ns, ms] of first.owed()) second.owe(ns, ms);
    flood(second, 40);
    // 60 s: 3 + 6, as one process would have allowed; without the hand-over the second would start with 3 more.
    expect(went).toBeLessThanOrEqual(3 + 6);
  });
});

describe('the budgets on a Lease: request-budget-record.ts', () => {
  const now = Date.parse('2026-11-28T12:00:00.250Z');
  const debts = (sync: [string, number][], rotation: [string, number][] = []): Parameters<typeof encodeDebts>[0] => ({
    sync: new Map(sync),
    rotation: new Map(rotation),
  });

  it('compact: per kind and namespace, seconds after the time written, rounded up (never a fuller bucket than it is)', () => {
    const text = encodeDebts(debts([['team-a', 41_200]], [['team-b', 6_000]]), now);
    expect(JSON.parse(text ?? '')).toEqual({ v: 1, at: Math.floor(now / 1000), sync: { 'team-a': 42 }, rotation: { 'team-b': 7 } });
    const back = decodeDebts(text, now);
    expect(back.sync.get('team-a')).toBe(41_750);
    expect(back.rotation.get('team-b')).toBe(6_750);
    // Read later by another process: what is left of the debt.
    expect(decodeDebts(text, now + 40_000).sync.get('team-a')).toBe(1_750);
    expect(decodeDebts(text, now + 45_000).sync.has('team-a')).toBe(false);
  });

  it('nothing owed: no annotation at all', () => {
    expect(encodeDebts(debts([]), now)).toBeUndefined();
    expect(budgetAnnotations(requestBudgets({ sync: { burst: 1, perMinute: 1 }, rotation: { burst: 1, perMinute: 1 } }), now)).toEqual({});
  });

  it(`bounded: the ${MAX_RECORDED_NAMESPACES} most indebted namespaces per kind, within the apiserver's 256 KiB of annotations`, () => {
    const many = Array.from({ length: 3000 }, (_, i): [string, number] => [`${'n'.repeat(56)}-${String(i).padStart(6, '0')}`, 1_000 + i * 1_000]);
    const text = encodeDebts(debts(many, many), now) ?? '';
    const back = decodeDebts(text, now);
    expect(back.sync.size).toBe(MAX_RECORDED_NAMESPACES);
    expect(back.rotation.size).toBe(MAX_RECORDED_NAMESPACES);
    // The most indebted are kept: the last 1,000 of the list owe the longest.
    expect(back.sync.has(many[2999]?.[0] ?? '')).toBe(true);
    expect(back.sync.has(many[0]?.[0] ?? '')).toBe(false);
    expect(Buffer.byteLength(text) + REQUEST_BUDGETS_ANNOTATION.length).toBeLessThan(256 * 1024);
  });

  it.each([
    ['not JSON', '{'],
    ['another version', JSON.stringify({ v: 2, at: 1, sync: { a: 5 } })],
    ['no time', JSON.stringify({ v: 1, sync: { a: 5 } })],
    ['a kind that is not an object', JSON.stringify({ v: 1, at: Math.floor(now / 1000), sync: [5] })],
  ])('what it cannot read is no debt: %s', (_what, text) => {
    const back = decodeDebts(text, now);
    expect(back.sync.size + back.rotation.size).toBe(0);
  });

  it('entries that are not namespace names or sane whole seconds are skipped, the rest kept', () => {
    const at = Math.floor(now / 1000);
    const text = JSON.stringify({ v: 1, at, sync: { 'Bad Name': 5, ['x'.repeat(64)]: 5, neg: -5, frac: 1.5, huge: 1e12, str: '5', ok: 5 } });
    expect([...decodeDebts(text, now).sync.keys()]).toEqual(['ok']);
  });

  it('takeOverDebts: the namespaces the controller owns take on what the Lease records; budgetAnnotations writes it back', () => {
    let mono = 0;
    const budgets = requestBudgets({ sync: { burst: 10, perMinute: 10 }, rotation: { burst: 10, perMinute: 10 } }, () => mono);
    const annotations = {
      [REQUEST_BUDGETS_ANNOTATION]:
        encodeDebts(
          debts(
            [
              ['mine', 60_000],
              ['theirs', 60_000],
            ],
            [['mine', 6_000]],
          ),
          now,
        ) ?? '',
    };
    takeOverDebts(budgets, annotations, now, (ns) => ns === 'mine');
    // Ten at once spent by the last owner a moment ago: the next sync request of "mine" waits about a slot.
    expect(budgets.sync.take('mine', 'mine/a').kind).toBe('wait');
    expect(budgets.sync.take('theirs', 'theirs/a')).toEqual({ kind: 'now' });
    expect(budgets.rotation.owed().get('mine')).toBeGreaterThan(6_000);
    mono += 7_000;
    const written = decodeDebts(budgetAnnotations(budgets, now + 7_000)[REQUEST_BUDGETS_ANNOTATION], now + 7_000);
    expect(written.rotation.has('mine')).toBe(false);
    // The waiting key's slot is not counted as spent: what remains is the taken-on debt.
    expect(written.sync.get('mine')).toBeGreaterThan(50_000);
    // Not this controller's: nothing taken on (and its one request here went out unspent, so it owes nothing either).
    expect(written.sync.has('theirs')).toBe(false);
  });
});
