import { describe, expect, it } from 'vitest';
import { SYNC_ANNOTATION } from '../../src/api/constants.js';
import { parseUserGroup } from '../../src/api/usergroup.js';
import { decideSyncRequest, handledSyncRequest } from '../../src/controller/policies/sync.js';
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
