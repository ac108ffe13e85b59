// The rotation policy (policies/rotation.ts): which rotation a reconcile makes, when a token falls due, which slot it needs.
import { describe, expect, it } from 'vitest';
import {
  decideRotation,
  FOLLOW_DELAY_MS,
  FOLLOW_MAX_INTERVAL_MS,
  fleetScheduledRotation,
  followInstead,
  nextFollowLook,
  rotationGate,
  scheduledRotation,
  type RotationDecision,
} from '../../../src/controller/policies/rotation.js';
import { MISSING_SECRET as MISSING, ownedInspection as owned } from '../../support/fixtures.js';

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

describe('fleetScheduledRotation: the schedule every cluster of a fleet derives alike from the id', () => {
  const DAY = 86_400_000;
  it('is the same in every cluster for the same id and age, whenever each obtained the token within one period', () => {
    const a = fleetScheduledRotation('2026-12-01T10:00:00.000Z', 30 * DAY, 'acme-1');
    const b = fleetScheduledRotation('2026-12-01T10:00:07.412Z', 30 * DAY, 'acme-1');
    expect(a).toBeDefined();
    // Unless the two issue times straddle one of the id's rotation times (then they are a period apart).
    expect(b).toEqual(a);
    expect(a?.value).toBe(`scheduled:${new Date(a?.dueAt ?? 0).toISOString()}`);
  });

  it('falls due within maxAge of the issue time, never at or before it, at times maxAge apart', () => {
    for (let i = 0; i < 500; i++) {
      const issued = Date.parse('2026-01-01T00:00:00Z') + i * 3_600_017;
      const due = fleetScheduledRotation(new Date(issued).toISOString(), 7 * DAY, `id-${i % 13}`)?.dueAt ?? NaN;
      expect(due).toBeGreaterThan(issued);
      expect(due - issued).toBeLessThanOrEqual(7 * DAY);
      // The token obtained at the due time falls due one period later.
      expect(fleetScheduledRotation(new Date(due).toISOString(), 7 * DAY, `id-${i % 13}`)?.dueAt).toBe(due + 7 * DAY);
    }
  });

  it("spreads the account's ids over the period", () => {
    const issued = '2026-12-01T00:00:00.000Z';
    const dues = Array.from({ length: 1_000 }, (_, i) => fleetScheduledRotation(issued, 30 * DAY, `customer-${i}`)?.dueAt ?? NaN);
    const days = new Set(dues.map((d) => Math.floor((d - Date.parse(issued)) / DAY)));
    expect(days.size).toBe(30);
    expect(fleetScheduledRotation('not a time', 30 * DAY, 'x')).toBeUndefined();
  });
});

describe("followInstead: a fleet follower's rotation is one to follow with PUTs, never a POST", () => {
  const asked = Date.parse('2026-12-03T10:00:00Z');
  const rotate: RotationDecision = { kind: 'rotate', value: '2026-12-03T10:00:00Z', scheduled: false };

  it('looks FOLLOW_DELAY_MS after it first saw the request, then ever less often, a quarter of the time since, at most every 5 minutes', () => {
    expect(nextFollowLook(asked, undefined)).toBe(asked + FOLLOW_DELAY_MS);
    // A PUT before the request (a resync) is no look for it.
    expect(nextFollowLook(asked, asked - 60_000)).toBe(asked + FOLLOW_DELAY_MS);
    expect(nextFollowLook(asked, asked + 5_000)).toBe(asked + 10_000);
    expect(nextFollowLook(asked, asked + 60_000)).toBe(asked + 75_000);
    expect(nextFollowLook(asked, asked + 3_600_000)).toBe(asked + 3_600_000 + FOLLOW_MAX_INTERVAL_MS);
  });

  it('turns rotate and recover into follow (look now or later); everything else as decided', () => {
    expect(followInstead(rotate, { since: asked, lastLookAt: asked - 1_000, now: asked + 1_000 })).toEqual({
      kind: 'follow',
      value: rotate.value,
      scheduled: false,
      since: asked,
      look: false,
      nextLookAt: asked + FOLLOW_DELAY_MS,
    });
    expect(
      followInstead({ kind: 'recover', value: 'scheduled:x', scheduled: true }, { since: asked, lastLookAt: undefined, now: asked + 6_000 }),
    ).toMatchObject({
      kind: 'follow',
      look: true,
    });
    for (const decision of [{ kind: 'none' }, { kind: 'record', value: 'v' }, { kind: 'settle', value: 'v', scheduled: false }] as const) {
      expect(followInstead(decision, { since: asked, lastLookAt: undefined, now: asked })).toEqual(decision);
    }
  });

  it('needs no slot: it spends no rotation budget', () => {
    expect(rotationGate(followInstead(rotate, { since: asked, lastLookAt: undefined, now: asked + 10_000 }), false)).toBe('none');
  });
});
