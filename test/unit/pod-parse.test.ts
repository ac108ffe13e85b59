// The consenting Pods of a PartialObjectMetadataList (src/api/pod.ts), as the apiserver sends them.
import { describe, expect, it } from 'vitest';
import { parseConsentingPods } from '../../src/api/pod.js';

describe('parseConsentingPods', () => {
  it("names and the UserGroup's own prompt mark only; Pods being deleted left out", () => {
    const list = {
      kind: 'PartialObjectMetadataList',
      items: [
        { metadata: { name: 'a', annotations: { 'refreshed.usergroup.dev/acme': '2026-12-03T00:00:00.000Z', 'refreshed.usergroup.dev/other': 'x' } } },
        { metadata: { name: 'b' } },
        { metadata: { name: 'c', deletionTimestamp: '2026-12-03T00:00:00Z' } },
      ],
    };
    expect(parseConsentingPods(list, 'acme')).toEqual({
      ok: true,
      value: [
        { name: 'a', promptedFor: '2026-12-03T00:00:00.000Z' },
        { name: 'b', promptedFor: undefined },
      ],
    });
  });

  it('an empty list comes without items: no Pods, not an error', () => {
    expect(parseConsentingPods({ kind: 'PartialObjectMetadataList', metadata: { resourceVersion: '7' } }, 'acme')).toEqual({ ok: true, value: [] });
  });

  it('what is not a list of named Pods is an error', () => {
    expect(parseConsentingPods('nope', 'acme').ok).toBe(false);
    expect(parseConsentingPods({ items: 'nope' }, 'acme').ok).toBe(false);
    expect(parseConsentingPods({ items: [{ metadata: {} }] }, 'acme').ok).toBe(false);
  });
});
