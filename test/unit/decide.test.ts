import { describe, expect, it } from 'vitest';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import type { Condition, UserGroupSpec, UserGroupStatus } from '../../src/api/usergroup.js';
import { nextReadyCondition, Reason } from '../../src/controller/policies/conditions.js';
import { decideRotation, decideSync, nextResyncAt, scheduledRotation, syncHash, upsertRequestFor } from '../../src/controller/decide.js';
import { canonicalJson, sha256Hex } from '../../src/controller/hash.js';
import { desiredSecret, inspectSecret, type SecretInspection } from '../../src/controller/policies/token-secret.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { OWNER, SEAL, storedSecret, userGroupSpec } from '../support/fixtures.js';

const spec = userGroupSpec;

/** An observed Secret as the apiserver would return it after the operator wrote desiredSecret(..., SEAL). */
function writtenSecret(content: { token: string; handled?: string; pending?: string }, s: UserGroupSpec = spec()): ObservedSecret {
  const desired = desiredSecret(OWNER, s, { token: new SecretValue(content.token), handled: content.handled, pending: content.pending }, SEAL);
  const parsed = parseSecret(storedSecret(desired, '77'));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

function owned(content: { token: string; handled?: string; pending?: string }): SecretInspection {
  return inspectSecret(writtenSecret(content), OWNER, spec(), SEAL);
}

const MISSING: SecretInspection = { state: 'missing' };

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

describe('decideRotation', () => {
  it('does nothing without the annotation, but settles a rotation begun before a crash and no longer asked for', () => {
    expect(decideRotation(undefined, owned({ token: 't' }), undefined)).toEqual({ kind: 'none' });
    expect(decideRotation(undefined, MISSING, 'v1')).toEqual({ kind: 'none' });
    // The annotation was removed while "x" was pending: a PUT tells whether the POST happened; never a POST.
    expect(decideRotation(undefined, owned({ token: 't', pending: 'x' }), undefined)).toEqual({ kind: 'settle', value: 'x', scheduled: false });
    // The same for a scheduled rotation whose schedule was taken out of the spec.
    const pending = 'scheduled:2026-11-01T00:00:00Z';
    expect(decideRotation(undefined, owned({ token: 't', pending }), undefined)).toEqual({ kind: 'settle', value: pending, scheduled: true });
    expect(decideRotation('r1', owned({ token: 't', pending, handled: 'r1' }), 'r1')).toEqual({ kind: 'settle', value: pending, scheduled: true });
  });

  it('does nothing when the value equals the handled value in status', () => {
    expect(decideRotation('v1', owned({ token: 't', handled: 'v1' }), 'v1')).toEqual({ kind: 'none' });
    // even if the Secret still says it is pending or knows nothing of it
    expect(decideRotation('v1', owned({ token: 't', pending: 'v1' }), 'v1')).toEqual({ kind: 'none' });
    expect(decideRotation('v1', MISSING, 'v1')).toEqual({ kind: 'none' });
  });

  it('records when the Secret says handled but status lags', () => {
    expect(decideRotation('v2', owned({ token: 't', handled: 'v2' }), 'v1')).toEqual({ kind: 'record', value: 'v2' });
    expect(decideRotation('v2', owned({ token: 't', handled: 'v2' }), undefined)).toEqual({ kind: 'record', value: 'v2' });
  });

  it('recovers when a rotation for this value may be in flight', () => {
    expect(decideRotation('v2', owned({ token: 't', handled: 'v1', pending: 'v2' }), 'v1')).toEqual({ kind: 'recover', value: 'v2', scheduled: false });
  });

  it('rotates otherwise', () => {
    expect(decideRotation('v1', owned({ token: 't' }), undefined)).toEqual({ kind: 'rotate', value: 'v1', scheduled: false });
    expect(decideRotation('v1', MISSING, undefined)).toEqual({ kind: 'rotate', value: 'v1', scheduled: false });
    expect(decideRotation('v2', owned({ token: 't', pending: 'v0' }), undefined)).toEqual({ kind: 'rotate', value: 'v2', scheduled: false });
  });

  it('rotates again for a new value after an earlier one was handled', () => {
    expect(decideRotation('v2', owned({ token: 't', handled: 'v1' }), 'v1')).toEqual({ kind: 'rotate', value: 'v2', scheduled: false });
  });

  it('treats an empty annotation value as a value', () => {
    expect(decideRotation('', owned({ token: 't' }), undefined)).toEqual({ kind: 'rotate', value: '', scheduled: false });
    expect(decideRotation('', owned({ token: 't' }), '')).toEqual({ kind: 'none' });
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

describe('nextReadyCondition', () => {
  const t0 = '2025-01-01T00:00:00Z';
  const t1 = '2025-01-02T00:00:00Z';

  it('builds a Ready condition', () => {
    expect(nextReadyCondition(undefined, 'True', Reason.Synced, 'ok', 3, t0)).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Synced',
      message: 'ok',
      lastTransitionTime: t0,
      observedGeneration: 3,
    });
  });

  it('keeps lastTransitionTime while the status stays the same', () => {
    const prev: Condition = { type: 'Ready', status: 'False', reason: 'Rejected', message: 'a', lastTransitionTime: t0 };
    const next = nextReadyCondition(prev, 'False', Reason.ServiceUnavailable, 'b', 2, t1);
    expect(next.lastTransitionTime).toBe(t0);
    expect(next.reason).toBe('ServiceUnavailable');
    expect(next.message).toBe('b');
  });

  it('moves lastTransitionTime when the status flips', () => {
    const prev: Condition = { type: 'Ready', status: 'False', reason: 'Rejected', message: 'a', lastTransitionTime: t0 };
    expect(nextReadyCondition(prev, 'True', Reason.Synced, 'ok', 2, t1).lastTransitionTime).toBe(t1);
    expect(nextReadyCondition({ ...prev, status: 'True' }, 'Unknown', Reason.Synced, 'x', 2, t1).lastTransitionTime).toBe(t1);
  });

  it('uses now when the previous condition has no lastTransitionTime', () => {
    const prev: Condition = { type: 'Ready', status: 'True', reason: 'Synced', message: '', lastTransitionTime: '' };
    expect(nextReadyCondition(prev, 'True', Reason.Synced, 'ok', 1, t1).lastTransitionTime).toBe(t1);
  });

  it('truncates the message to 32768 characters', () => {
    const c = nextReadyCondition(undefined, 'False', Reason.Rejected, 'x'.repeat(40_000), 1, t0);
    expect(c.message).toHaveLength(32_768);
    expect(nextReadyCondition(undefined, 'False', Reason.Rejected, 'y'.repeat(32_768), 1, t0).message).toHaveLength(32_768);
  });
});

describe('canonicalJson', () => {
  it('is independent of key order at every level', () => {
    const a = { b: 1, a: { d: [1, { z: 1, y: 2 }], c: 'x' } };
    const b = { a: { c: 'x', d: [1, { y: 2, z: 1 }] }, b: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"c":"x","d":[1,{"y":2,"z":1}]},"b":1}');
  });

  it('keeps array order', () => {
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  it('drops undefined properties, as JSON does', () => {
    expect(canonicalJson({ a: 1, b: undefined })).toBe('{"a":1}');
    expect(canonicalJson({ a: 1, b: undefined })).toBe(canonicalJson({ a: 1 }));
    expect(canonicalJson([undefined, 1])).toBe('[null,1]');
  });

  it('round-trips as JSON equal to the input', () => {
    const v = { s: 'q"\\\n', n: -1.5, t: true, f: false, z: null, arr: [], obj: {}, 'weird key"': 1 };
    expect(JSON.parse(canonicalJson(v))).toEqual(v);
  });

  it('handles scalars', () => {
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson('x')).toBe('"x"');
    expect(canonicalJson(3)).toBe('3');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('sha256Hex is the hex digest', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });
});

describe('scheduledRotation (spec.rotation.maxTokenAge)', () => {
  const DAY = 86_400_000;
  const issued = '2026-11-01T00:00:00.000Z';

  it('falls due within [issued + 0.9 × maxAge, issued + maxAge], fixed per uid, and is named by the token it replaces', () => {
    const at = Date.parse(issued);
    const dues = Array.from({ length: 2_000 }, (_, i) => scheduledRotation(issued, 30 * DAY, `uid-${i}`)?.dueAt ?? NaN);
    for (const due of dues) {
      expect(due).toBeGreaterThanOrEqual(at + 27 * DAY);
      expect(due).toBeLessThanOrEqual(at + 30 * DAY);
    }
    // Spread: 2,000 tokens obtained together fall due over the whole window, not in one burst.
    const buckets = new Set(dues.map((d) => Math.floor((d - at - 27 * DAY) / (DAY / 4))));
    expect(buckets.size).toBe(12);
    expect(scheduledRotation(issued, 30 * DAY, 'uid-7')).toEqual(scheduledRotation(issued, 30 * DAY, 'uid-7'));
    expect(scheduledRotation(issued, 30 * DAY, 'uid-7')?.value).toBe(`scheduled:${issued}`);
    expect(scheduledRotation('not a time', 30 * DAY, 'uid-7')).toBeUndefined();
  });

  it('a requested rotation comes first; a scheduled one when due, or when its intent is recorded (recover, due or not)', () => {
    const value = `scheduled:${issued}`;
    expect(decideRotation(undefined, owned({ token: 't' }), undefined, { value, due: false })).toEqual({ kind: 'none' });
    expect(decideRotation(undefined, owned({ token: 't' }), undefined, { value, due: true })).toEqual({ kind: 'rotate', value, scheduled: true });
    expect(decideRotation('r1', owned({ token: 't' }), undefined, { value, due: true })).toEqual({ kind: 'rotate', value: 'r1', scheduled: false });
    // A handled request does not hide the schedule.
    expect(decideRotation('r1', owned({ token: 't', handled: 'r1' }), 'r1', { value, due: true })).toEqual({ kind: 'rotate', value, scheduled: true });
    expect(decideRotation(undefined, owned({ token: 't', pending: value }), undefined, { value, due: false })).toEqual({
      kind: 'recover',
      value,
      scheduled: true,
    });
    // A pending mark for another token (an older schedule) is not this rotation's: it is settled (a PUT, never a POST).
    expect(decideRotation(undefined, owned({ token: 't', pending: 'scheduled:2026-01-01T00:00:00.000Z' }), undefined, { value, due: false })).toEqual({
      kind: 'settle',
      value: 'scheduled:2026-01-01T00:00:00.000Z',
      scheduled: true,
    });
  });
});
