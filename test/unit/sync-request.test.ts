import { describe, expect, it } from 'vitest';
import { SYNC_ANNOTATION } from '../../src/api/constants.js';
import { parseUserGroup } from '../../src/api/usergroup.js';
import { decideSyncRequest, handledSyncRequest } from '../../src/controller/sync-request.js';
import { SyncRequestBudget } from '../../src/controller/sync-request-budget.js';
import { relevantChange, userGroupTriggers } from '../../src/controller/triggers.js';
import { userGroup } from '../support/reconciler-harness.js';

describe('decideSyncRequest: does this annotation value ask for a PUT?', () => {
  it('no annotation: nothing, whether or not a PUT is planned', () => {
    expect(decideSyncRequest(undefined, undefined, false)).toEqual({ kind: 'none' });
    expect(decideSyncRequest(undefined, 'earlier', true)).toEqual({ kind: 'none' });
  });

  it('a value the status records as handled: nothing (the same value twice is one sync)', () => {
    expect(decideSyncRequest('2026-11-26T20:00:00Z', '2026-11-26T20:00:00Z', false)).toEqual({ kind: 'none' });
  });

  it('a new value and nothing else to PUT: a PUT of its own', () => {
    expect(decideSyncRequest('s2', 's1', false)).toEqual({ kind: 'put', value: 's2' });
    expect(decideSyncRequest('s1', undefined, false)).toEqual({ kind: 'put', value: 's1' });
  });

  it('a new value and a PUT planned anyway: that PUT answers it (no second call, no budget spent)', () => {
    expect(decideSyncRequest('s2', 's1', true)).toEqual({ kind: 'ride', value: 's2' });
  });

  it('handledSyncRequest: recorded only once a PUT went out; otherwise the previous value stays', () => {
    expect(handledSyncRequest({ kind: 'put', value: 's2' }, true, 's1')).toBe('s2');
    expect(handledSyncRequest({ kind: 'ride', value: 's2' }, true, 's1')).toBe('s2');
    expect(handledSyncRequest({ kind: 'put', value: 's2' }, false, 's1')).toBe('s1');
    expect(handledSyncRequest({ kind: 'none' }, true, 's1')).toBe('s1');
    expect(handledSyncRequest({ kind: 'none' }, true, undefined)).toBeUndefined();
  });
});

describe('the annotation at the edge and in the triggers', () => {
  it('is kept in the parsed metadata; an over-long value makes the spec invalid and is never kept', () => {
    expect(userGroup({ annotations: { [SYNC_ANNOTATION]: 's1' } }).metadata.annotations[SYNC_ANNOTATION]).toBe('s1');
    const raw = (value: string): unknown => ({
      metadata: { name: 'a', namespace: 'ns', uid: 'u', resourceVersion: '1', annotations: { [SYNC_ANNOTATION]: value } },
      spec: { userGroupId: 'a-1', name: 'A' },
    });
    const long = parseUserGroup(raw('x'.repeat(257)));
    if (!long.ok) throw new Error(long.error);
    expect(long.value.spec).toEqual({ ok: false, error: expect.stringContaining(SYNC_ANNOTATION) as unknown });
    expect(long.value.metadata.annotations[SYNC_ANNOTATION]).toMatch(/^\(over 256 characters\) sha256:/);
    const longer = parseUserGroup(raw('y'.repeat(300)));
    if (!longer.ok) throw new Error(longer.error);
    // A change to an over-long value is still a change the controller sees.
    expect(longer.value.metadata.annotations[SYNC_ANNOTATION]).not.toBe(long.value.metadata.annotations[SYNC_ANNOTATION]);
  });

  it('a changed value wakes the reconcile (the generation does not move), in the urgent lane', () => {
    const before = userGroup({ annotations: { [SYNC_ANNOTATION]: 's1' } });
    const after = userGroup({ annotations: { [SYNC_ANNOTATION]: 's2' } });
    expect(relevantChange(before, after)).toBe(true);
    expect(relevantChange(before, userGroup({ annotations: { [SYNC_ANNOTATION]: 's1' } }))).toBe(false);
    const view = { othersWithId: () => [], holdsClaim: () => false, defaultService: undefined };
    expect(userGroupTriggers('updated', after, before, view as never)).toEqual([{ key: 'ns/acme', urgent: true }]);
  });
});

describe('SyncRequestBudget: per namespace, a burst then a rate, a slot kept per waiting key', () => {
  const budget = (): { b: SyncRequestBudget; advance: (ms: number) => void } => {
    let now = 1_000_000;
    return { b: new SyncRequestBudget({ burst: 3, perMinute: 6 }, () => now), advance: (ms) => (now += ms) };
  };

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

  it('a PUT the account deferred (not spent) keeps its paid slot: asking again costs nothing more', () => {
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

  it('within a window of w ms, at most burst + w × rate PUTs go out in one namespace', () => {
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
});
