// The sync policy (policies/sync.ts): what the PUT carries, whether one is needed, and what a sync request asks for.
import { describe, expect, it } from 'vitest';
import type { UserGroupSpec, UserGroupStatus } from '../../../src/api/usergroup.js';
import { inspectSecret } from '../../../src/controller/policies/token-secret.js';
import { decideSync, decideSyncRequest, handledSyncRequest, nextResyncAt, syncHash, upsertRequestFor } from '../../../src/controller/policies/sync.js';
import { MISSING_SECRET as MISSING, OWNER, ownedInspection as owned, SEAL, userGroupSpec, writtenSecret } from '../../support/fixtures.js';

const spec = userGroupSpec;

describe('upsertRequestFor', () => {
  it('omits mapping and properties when the spec has none', () => {
    const req = upsertRequestFor(spec());
    expect(req).toEqual({ userGroupId: 'acme-1', name: 'Acme' });
    expect('mapping' in req).toBe(false);
    expect('properties' in req).toBe(false);
  });

  it('carries mapping and properties when set', () => {
    const req = upsertRequestFor(spec({ mapping: { schema: 'ds1' }, properties: { tier: 'gold', n: 3 } }));
    expect(req).toEqual({ userGroupId: 'acme-1', name: 'Acme', mapping: { schema: 'ds1' }, properties: { tier: 'gold', n: 3 } });
  });

  it('keeps an empty mapping (set but empty is not absent)', () => {
    expect(upsertRequestFor(spec({ mapping: {} }))).toEqual({ userGroupId: 'acme-1', name: 'Acme', mapping: {} });
  });
});

describe('syncHash', () => {
  const base = upsertRequestFor(spec({ mapping: { a: '1', b: '2' }, properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 3 }] } } }));

  it('is a sha256 tag', () => {
    expect(syncHash(base, 'default')).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('is stable across key order of properties and mapping', () => {
    const reordered = upsertRequestFor(spec({ mapping: { b: '2', a: '1' }, properties: { nested: { q: [1, { s: 3, r: 2 }], p: 1 }, x: 1 } }));
    expect(syncHash(reordered, 'default')).toBe(syncHash(base, 'default'));
  });

  it('changes with the connection id', () => {
    expect(syncHash(base, 'ns/svc')).not.toBe(syncHash(base, 'default'));
  });

  it.each<[string, UserGroupSpec]>([
    ['userGroupId', spec({ userGroupId: 'acme-2', mapping: { a: '1', b: '2' }, properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 3 }] } } })],
    ['name', spec({ name: 'Acme Inc', mapping: { a: '1', b: '2' }, properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 3 }] } } })],
    ['a mapping value', spec({ mapping: { a: '1', b: '3' }, properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 3 }] } } })],
    ['a mapping key', spec({ mapping: { a: '1', c: '2' }, properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 3 }] } } })],
    ['mapping removed', spec({ properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 3 }] } } })],
    ['a nested property', spec({ mapping: { a: '1', b: '2' }, properties: { x: 1, nested: { p: 1, q: [1, { r: 2, s: 4 }] } } })],
    ['array order in properties', spec({ mapping: { a: '1', b: '2' }, properties: { x: 1, nested: { p: 1, q: [{ r: 2, s: 3 }, 1] } } })],
    ['properties removed', spec({ mapping: { a: '1', b: '2' } })],
  ])('changes when %s changes', (_what, changed) => {
    expect(syncHash(upsertRequestFor(changed), 'default')).not.toBe(syncHash(base, 'default'));
  });

  it('distinguishes an empty mapping from no mapping', () => {
    expect(syncHash(upsertRequestFor(spec({ mapping: {} })), 'c')).not.toBe(syncHash(upsertRequestFor(spec()), 'c'));
  });
});

describe('decideSync', () => {
  const hash = 'sha256:current';
  const synced: UserGroupStatus = { syncedHash: hash, lastSyncTime: '2025-01-01T00:00:00Z' };
  const intact = owned({ token: 'tok-1' });

  it('upserts a group never synced', () => {
    expect(decideSync({ status: {}, desiredHash: hash, secret: intact, resyncDue: false })).toEqual({ kind: 'upsert', why: 'never-synced' });
    expect(decideSync({ status: {}, desiredHash: hash, secret: MISSING, resyncDue: true })).toEqual({ kind: 'upsert', why: 'never-synced' });
  });

  it('upserts when the request hash differs', () => {
    expect(decideSync({ status: { syncedHash: 'sha256:old' }, desiredHash: hash, secret: intact, resyncDue: false })).toEqual({
      kind: 'upsert',
      why: 'request-changed',
    });
  });

  it('upserts when the Secret is missing', () => {
    expect(decideSync({ status: synced, desiredHash: hash, secret: MISSING, resyncDue: false })).toEqual({ kind: 'upsert', why: 'secret-missing' });
  });

  it('upserts when the owned Secret cannot vouch for the token', () => {
    const unreadable = inspectSecret({ ...writtenSecret({ token: 'tok-1' }), data: { token: Buffer.from('edited').toString('base64') } }, OWNER, spec(), SEAL);
    expect(unreadable.state === 'owned' && unreadable.token).toBe(undefined);
    expect(decideSync({ status: synced, desiredHash: hash, secret: unreadable, resyncDue: false })).toEqual({ kind: 'upsert', why: 'secret-unreadable' });
  });

  it('upserts when a resync is due', () => {
    expect(decideSync({ status: synced, desiredHash: hash, secret: intact, resyncDue: true })).toEqual({ kind: 'upsert', why: 'resync' });
  });

  it('skips when synced, unchanged, the Secret intact and no resync due', () => {
    expect(decideSync({ status: synced, desiredHash: hash, secret: intact, resyncDue: false })).toEqual({ kind: 'skip' });
  });
});

describe('nextResyncAt', () => {
  const period = 10 * 3_600_000;
  const last = '2025-03-01T12:00:00Z';
  const lastMs = Date.parse(last);

  it('is undefined without a (valid) lastSyncTime', () => {
    expect(nextResyncAt(undefined, 'u', period)).toBeUndefined();
    expect(nextResyncAt('', 'u', period)).toBeUndefined();
    expect(nextResyncAt('not a time', 'u', period)).toBeUndefined();
  });

  it('falls within [last + period, last + 1.1 × period] for many uids', () => {
    for (let i = 0; i < 500; i++) {
      const at = nextResyncAt(last, `uid-${i}`, period)!;
      expect(at).toBeGreaterThanOrEqual(lastMs + period);
      expect(at).toBeLessThanOrEqual(lastMs + 1.1 * period);
    }
  });

  it('is deterministic per uid and differs between uids', () => {
    expect(nextResyncAt(last, 'uid-a', period)).toBe(nextResyncAt(last, 'uid-a', period));
    expect(nextResyncAt(last, 'uid-a', period)).not.toBe(nextResyncAt(last, 'uid-b', period));
    const spread = new Set(Array.from({ length: 100 }, (_, i) => nextResyncAt(last, `uid-${i}`, period)));
    expect(spread.size).toBeGreaterThan(90);
  });

  it('moves with lastSyncTime by exactly the same amount', () => {
    const later = new Date(lastMs + 12_345).toISOString();
    expect(nextResyncAt(later, 'uid-a', period)! - nextResyncAt(last, 'uid-a', period)!).toBe(12_345);
  });
});

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
