// The usergroup.dev/sync-requested-at annotation at the edge (parsed, bounded) and in the triggers; what a value asks
// for is the sync policy's, tested in policies/sync.test.ts.
import { describe, expect, it } from 'vitest';
import { SYNC_ANNOTATION } from '../../src/api/constants.js';
import { parseUserGroup } from '../../src/api/usergroup.js';
import { relevantChange, userGroupTriggers } from '../../src/controller/triggers.js';
import { userGroup } from '../support/reconciler-harness.js';

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
