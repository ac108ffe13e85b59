import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION, ROTATION_HANDLED_ANNOTATION, ROTATION_PENDING_ANNOTATION, TOKEN_ISSUED_AT_ANNOTATION } from '../../src/api/constants.js';
import type { ObservedSecret } from '../../src/api/secret.js';
import type { UserGroupStatus } from '../../src/api/usergroup.js';
import { scheduledRotation } from '../../src/controller/policies/rotation.js';
import { harness, sealedSecret, syncedStatus, userGroup, type Harness, type Outcome, type World } from '../support/reconciler-harness.js';

/**
 * Scheduled rotation (spec.rotation.maxTokenAge) through the reconciler's ports: the same record-before-call
 * protocol as a requested rotation, its value named by the token it replaces, and the token's issue time sealed
 * on the Secret, so a crash at any step neither skips nor repeats the rotation. No I/O: fake apiserver and service.
 */

const HOUR = 3_600_000;
const ISSUED = '2026-11-20T00:00:00.000Z';
const VALUE = `scheduled:${ISSUED}`;
const UID = 'uid-acme';
/** When the harness's UserGroup (uid-acme) falls due with a 24 h maximum age. */
const DUE = scheduledRotation(ISSUED, 24 * HOUR, UID)?.dueAt ?? NaN;

async function world(
  init: { stored: ObservedSecret; serviceToken: string; now: number; maxTokenAge?: string; annotations?: Record<string, string> } & Partial<World>,
): Promise<Harness> {
  const ug = userGroup({
    maxTokenAge: init.maxTokenAge ?? '24h',
    status: await syncedStatus(),
    ...(init.annotations ? { annotations: init.annotations } : {}),
  });
  return harness({ ug, cached: init.stored, live: init.stored, otherKnown: false, ...init });
}

/** Timestamps as the operator writes them: whole seconds. */
const iso = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
/** A token's issue time is recorded to the millisecond: it names the token (restart targets follow it). */
const issued = (ms: number): string => new Date(ms).toISOString();

const posts = (h: Harness): number => h.calls.filter((c) => c === 'POST').length;

/** Nothing done but the status: no call, the Secret holding `token`, no Event, Ready `ready`. */
const quiet = (token: string, ready = 'Synced'): Outcome => ({ service: {}, secret: token, events: {}, ready });
/** A rotation found reached (the PUT returned a new token, `token`) or done here (`service` with its POST). */
const rotated = (token: string, service: Record<string, number>): Outcome => ({
  service,
  secret: token,
  events: { 'Normal TokenRotated': 1, 'Normal Synced': 1 },
  ready: 'Synced',
});

describe('scheduled rotation: once per token, through the ports', () => {
  it('not due: no call and no write; status shows when it falls due, and the reconcile comes back then', async () => {
    const now = DUE - 5 * 60_000;
    const h = await world({ stored: sealedSecret('tok-1', { issuedAt: ISSUED }), serviceToken: 'tok-1', now });
    const result = await h.reconcile();
    expect(h.outcome()).toEqual(quiet('tok-1'));
    expect(h.writes).toEqual([]);
    expect(h.statuses.at(-1)?.rotation).toMatchObject({ tokenIssuedTime: ISSUED, nextRotationTime: iso(DUE) });
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', 5 * 60_000]]);
  });

  it('due: the intent (pending, with the issue time) before the one POST, then the new token with a new issue time', async () => {
    const now = DUE + 1_000;
    const h = await world({ stored: sealedSecret('tok-1', { issuedAt: ISSUED, handled: 'r0' }), serviceToken: 'tok-1', now });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ service: { POST: 1 }, secret: 'tok-r1', events: { 'Normal TokenRotated': 1 }, ready: 'Synced' });
    expect(h.writes).toHaveLength(2);
    // Protocol: a slot of the global cap before the intent is written, the intent before the POST, the new token after it.
    expect(h.order('cap', 'replace Secret', 'POST')).toEqual(['cap', 'replace Secret', 'POST', 'replace Secret']);
    expect(h.writes[0]?.annotations).toMatchObject({ [ROTATION_PENDING_ANNOTATION]: VALUE, [TOKEN_ISSUED_AT_ANNOTATION]: ISSUED });
    const after = h.writes[1]?.annotations ?? {};
    expect(h.writes[1]?.token).toBe('tok-r1');
    expect(after[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
    // Only a requested value is remembered as handled: the earlier request stays recorded as it was.
    expect(after[ROTATION_HANDLED_ANNOTATION]).toBe('r0');
    expect(after[TOKEN_ISSUED_AT_ANNOTATION]).toBe(issued(now));
    const next = scheduledRotation(issued(now), 24 * HOUR, UID)?.dueAt ?? NaN;
    expect(h.statuses.at(-1)?.rotation).toMatchObject({ tokenIssuedTime: issued(now), nextRotationTime: iso(next) });
    expect(posts(h)).toBe(1);
  });

  it('a crash after the store, before the status: the Secret dates the new token, so nothing repeats', async () => {
    const now = DUE + 60_000;
    const h = await world({ stored: sealedSecret('tok-r1', { issuedAt: iso(DUE + 1_000) }), serviceToken: 'tok-r1', now });
    await h.reconcile();
    expect(h.outcome()).toEqual(quiet('tok-r1'));
    expect(h.writes).toEqual([]);
  });

  it('a crash after the POST: the pending value is recovered with a PUT, the new token stored, no second POST', async () => {
    const h = await world({ stored: sealedSecret('tok-1', { issuedAt: ISSUED, pending: VALUE }), serviceToken: 'tok-9', now: DUE + 60_000 });
    await h.reconcile();
    expect(h.outcome()).toEqual(rotated('tok-9', { PUT: 1 }));
    // Protocol: the pending mark is cleared only after the PUT has said whether the rotation reached the service.
    expect(h.order('PUT', 'replace Secret')).toEqual(['PUT', 'replace Secret']);
    expect(h.writes.at(-1)).toMatchObject({ token: 'tok-9' });
    expect(h.writes.at(-1)?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
  });

  it('a crash before the POST: the PUT returns the held token, so it rotates, once, without asking the cap again', async () => {
    const h = await world({ stored: sealedSecret('tok-1', { issuedAt: ISSUED, pending: VALUE }), serviceToken: 'tok-1', now: DUE + 60_000 });
    await h.reconcile();
    expect(h.calls).not.toContain('cap');
    expect(h.outcome()).toEqual(rotated('tok-r1', { PUT: 1, POST: 1 }));
    // No second intent write: one write (the new token) after the POST.
    expect(h.writes.map((w) => w.token)).toEqual(['tok-r1']);
    // Protocol: the PUT first (it tells whether the rotation reached the service), then the POST, then the store.
    expect(h.order('PUT', 'POST', 'replace Secret')).toEqual(['PUT', 'POST', 'replace Secret']);
    expect(h.writes.at(-1)).toMatchObject({ token: 'tok-r1' });
  });

  it('the global cap says wait: no call, no write, and the reconcile comes back when a slot is free', async () => {
    const h = await world({ stored: sealedSecret('tok-1', { issuedAt: ISSUED }), serviceToken: 'tok-1', now: DUE + 1_000, capWaitMs: 4_000 });
    const result = await h.reconcile();
    expect(h.outcome()).toEqual(quiet('tok-1'));
    expect(h.writes).toEqual([]);
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', 4_000]]);
  });

  it('a requested rotation first; it dates the new token, which moves the schedule on (no second rotation)', async () => {
    const now = DUE + 1_000;
    const h = await world({ stored: sealedSecret('tok-1', { issuedAt: ISSUED }), serviceToken: 'tok-1', now, annotations: { [ROTATE_ANNOTATION]: 'r1' } });
    await h.reconcile();
    expect(posts(h)).toBe(1);
    expect(h.calls).not.toContain('cap');
    expect(h.writes.at(-1)?.annotations).toMatchObject({ [ROTATION_HANDLED_ANNOTATION]: 'r1', [TOKEN_ISSUED_AT_ANNOTATION]: issued(now) });
  });

  it('a Secret from before issue times were recorded: the schedule counts from the status, else the creation', async () => {
    // userGroup() is created 2026-11-22T00:00:00Z; with 1 h it is long due by 2026-11-22T01:00 (the harness clock).
    const status: UserGroupStatus = { ...(await syncedStatus()), rotation: undefined };
    const stored = sealedSecret('tok-1');
    const ug = userGroup({ maxTokenAge: '1h', status });
    const h = harness({ ug, cached: stored, live: stored, otherKnown: false, serviceToken: 'tok-1', now: Date.parse('2026-11-22T01:00:00Z') });
    await h.reconcile();
    expect(posts(h)).toBe(1);
    expect(h.writes[0]?.annotations).toMatchObject({
      [ROTATION_PENDING_ANNOTATION]: 'scheduled:2026-11-22T00:00:00Z',
      [TOKEN_ISSUED_AT_ANNOTATION]: '2026-11-22T00:00:00Z',
    });
  });

  it("the operator's floor (--min-token-age) wins over a shorter maxTokenAge", async () => {
    // 1 s asked; the harness's floor is 1 s, so use a token 30 s old: due. A floor of 1 h is checked in config tests.
    const issued = new Date(Date.parse('2026-11-22T01:00:00Z') - 30_000).toISOString();
    const h = await world({
      stored: sealedSecret('tok-1', { issuedAt: issued }),
      serviceToken: 'tok-1',
      now: Date.parse('2026-11-22T01:00:00Z'),
      maxTokenAge: '1s',
    });
    await h.reconcile();
    expect(posts(h)).toBe(1);
  });

  it('suspended: no rotation, however overdue', async () => {
    const ug = userGroup({ maxTokenAge: '24h', suspend: true, status: await syncedStatus() });
    const stored = sealedSecret('tok-1', { issuedAt: ISSUED });
    const h = harness({ ug, cached: stored, live: stored, otherKnown: false, serviceToken: 'tok-1', now: DUE + 30 * HOUR });
    await h.reconcile();
    expect(h.outcome()).toEqual(quiet('tok-1', 'Suspended'));
    expect(h.writes).toEqual([]);
  });
  describe('a rotation begun before a crash and no longer asked for is settled: a PUT, never a POST', () => {
    async function unasked(pending: string, serviceToken: string): Promise<Harness> {
      // No annotation and no schedule: whatever began the rotation is gone.
      const ug = userGroup({ status: await syncedStatus() });
      const stored = sealedSecret('tok-1', { issuedAt: ISSUED, pending });
      return harness({ ug, cached: stored, live: stored, otherKnown: false, serviceToken, now: DUE + 60_000 });
    }

    it('the POST had reached the service: the new token is stored, the mark cleared, the value recorded as handled', async () => {
      const h = await unasked('r1', 'tok-9');
      await h.reconcile();
      expect(h.outcome()).toEqual(rotated('tok-9', { PUT: 1 }));
      // Protocol: the mark is cleared only after the PUT has said whether the rotation reached the service.
      expect(h.order('PUT', 'replace Secret')).toEqual(['PUT', 'replace Secret']);
      expect(h.writes.at(-1)).toMatchObject({ token: 'tok-9' });
      expect(h.writes.at(-1)?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
      expect(h.writes.at(-1)?.annotations[ROTATION_HANDLED_ANNOTATION]).toBe('r1');
      expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
    });

    it('it had not: the held token stays, only the mark is cleared, nothing is rotated', async () => {
      const h = await unasked('r1', 'tok-1');
      await h.reconcile();
      expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: 'tok-1', events: { 'Normal Synced': 1 }, ready: 'Synced' });
      // Protocol: as above, the PUT before the mark is cleared.
      expect(h.order('PUT', 'replace Secret')).toEqual(['PUT', 'replace Secret']);
      expect(h.writes.at(-1)).toMatchObject({ token: 'tok-1' });
      expect(h.writes.at(-1)?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
      expect(h.serviceToken()).toBe('tok-1');
    });

    it('a scheduled rotation whose schedule was taken out of the spec: the same, and no value is recorded as handled', async () => {
      const h = await unasked(VALUE, 'tok-9');
      await h.reconcile();
      expect(posts(h)).toBe(0);
      expect(h.writes.at(-1)).toMatchObject({ token: 'tok-9' });
      expect(h.writes.at(-1)?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
      expect(h.writes.at(-1)?.annotations[ROTATION_HANDLED_ANNOTATION]).toBeUndefined();
    });
  });
});
