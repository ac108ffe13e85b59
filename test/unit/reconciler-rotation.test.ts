import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION, ROTATION_HANDLED_ANNOTATION, ROTATION_PENDING_ANNOTATION } from '../../src/api/constants.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import type { UserGroupStatus } from '../../src/api/usergroup.js';
import { desiredSecret } from '../../src/controller/policies/token-secret.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { SEAL, storedSecret } from '../support/fixtures.js';
import { harness, REQUESTED_ROTATION, userGroup, type Harness } from '../support/reconciler-harness.js';

/**
 * The exactly-once rotation protocol through the reconciler's ports (fake apiserver and service, no I/O):
 * the request is recorded as pending on the Secret before the POST; a value the Secret records as handled is
 * never rotated again; a pending value found after a crash is settled by a PUT; a POST refused because the held
 * token is not current stores the current one. In every case the service sees at most one rotation per value.
 */

/** The status a first sync leaves (so that no PUT is due), from a real first reconcile. */
async function syncedStatus(): Promise<UserGroupStatus> {
  const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: undefined });
  await h.reconcile();
  const status = h.statuses.at(-1);
  if (!status) throw new Error('no status written');
  return status;
}

/** Our own token Secret, sealed, holding `token` with the given rotation bookkeeping. */
function sealedSecret(token: string, book: { handled?: string; pending?: string } = {}): ObservedSecret {
  const ug = userGroup();
  if (!ug.spec.ok) throw new Error(ug.spec.error);
  const desired = desiredSecret(ug.metadata, ug.spec.value, { token: new SecretValue(token), handled: book.handled, pending: book.pending }, SEAL);
  const parsed = parseSecret(storedSecret(desired, '20'));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

async function rotationWorld(init: { stored: ObservedSecret; serviceToken: string; request?: string }): Promise<Harness> {
  const ug = userGroup({ annotations: { [ROTATE_ANNOTATION]: init.request ?? 'r1' }, status: await syncedStatus() });
  return harness({ ug, cached: init.stored, live: init.stored, otherKnown: false, serviceToken: init.serviceToken });
}

const posts = (h: Harness): number => h.calls.filter((c) => c === 'POST').length;

describe('rotation: exactly once, through the ports', () => {
  it('rotate: the intent is recorded on the Secret before the one POST, then the new token as handled', async () => {
    const h = await rotationWorld({ stored: sealedSecret('tok-1'), serviceToken: 'tok-1' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // A requested rotation first takes a slot of its namespace's budget (reconciler-rotation-request.test.ts).
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    // Protocol: the slot before the intent, spent once the intent is written; the intent before the POST, the new
    // token after it (a crash in between is found pending, never rotated twice).
    expect(h.order('rotation budget', 'replace Secret', 'rotation budget spent')).toEqual([
      'rotation budget',
      'replace Secret',
      'rotation budget spent',
      'replace Secret',
    ]);
    expect(h.order('replace Secret', 'POST')).toEqual(['replace Secret', 'POST', 'replace Secret']);
    expect(h.writes[0]).toMatchObject({ token: 'tok-1', annotations: { [ROTATION_PENDING_ANNOTATION]: 'r1' } });
    expect(h.writes[1]?.token).toBe('tok-r1');
    expect(h.writes[1]?.annotations[ROTATION_HANDLED_ANNOTATION]).toBe('r1');
    expect(h.writes[1]?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
    expect(h.serviceToken()).toBe('tok-r1');
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
  });

  it('record: the Secret already says the value was handled (status lagged): no call, status catches up', async () => {
    const h = await rotationWorld({ stored: sealedSecret('tok-r1', { handled: 'r1' }), serviceToken: 'tok-r1' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ service: {}, secret: 'tok-r1', events: {}, ready: 'Synced' });
    expect(h.writes).toEqual([]);
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
  });

  it('recover after a crash after the POST: the PUT returns the new token, which is stored as handled — no second POST', async () => {
    const h = await rotationWorld({ stored: sealedSecret('tok-1', { pending: 'r1' }), serviceToken: 'tok-9' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(posts(h)).toBe(0);
    expect(h.outcome()).toEqual({ ...REQUESTED_ROTATION, service: { PUT: 1 }, secret: 'tok-9' });
    // Protocol: the pending mark is cleared only after the PUT has said whether the rotation reached the service.
    expect(h.order('PUT', 'replace Secret')).toEqual(['PUT', 'replace Secret']);
    expect(h.writes.at(-1)?.token).toBe('tok-9');
    expect(h.writes.at(-1)?.annotations[ROTATION_HANDLED_ANNOTATION]).toBe('r1');
    expect(h.writes.at(-1)?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
  });

  it('recover after a crash before the POST: the PUT returns the held token, so it rotates, once', async () => {
    const h = await rotationWorld({ stored: sealedSecret('tok-1', { pending: 'r1' }), serviceToken: 'tok-1' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(posts(h)).toBe(1);
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    // The intent is on the Secret already: no second intent write before the POST, one write (the new token) after it.
    expect(h.writes.map((w) => w.token)).toEqual(['tok-r1']);
    // Protocol: the PUT first (it tells whether the rotation reached the service), then the POST, then the store.
    expect(h.order('PUT', 'POST', 'replace Secret')).toEqual(['PUT', 'POST', 'replace Secret']);
    expect(h.writes.at(-1)).toMatchObject({ token: 'tok-r1', annotations: { [ROTATION_HANDLED_ANNOTATION]: 'r1' } });
    expect(h.serviceToken()).toBe('tok-r1');
  });

  it('a held token rotated behind the operator: the PUT after the request reads the current token, and that one is rotated', async () => {
    // The token leaked and someone else's rotation left the Secret behind: the request must still revoke the token
    // the service holds now, not end on a refused POST with the leaked token alive.
    const h = await rotationWorld({ stored: sealedSecret('tok-old'), serviceToken: 'tok-1' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(posts(h)).toBe(1);
    // Protocol: the current token is read before the intent that carries it, and POSTed after it.
    expect(h.order('PUT', 'replace Secret', 'POST')).toEqual(['PUT', 'replace Secret', 'POST', 'replace Secret']);
    expect(h.writes[0]).toMatchObject({ token: 'tok-1', annotations: { [ROTATION_PENDING_ANNOTATION]: 'r1' } });
    expect(h.serviceToken()).toBe('tok-r1');
    expect(h.writes.at(-1)).toMatchObject({ token: 'tok-r1', annotations: { [ROTATION_HANDLED_ANNOTATION]: 'r1' } });
    expect(h.statuses.at(-1)?.rotation).toMatchObject({
      lastHandledRequest: 'r1',
      lastRevoked: { request: 'r1', by: 'ThisController', currentAt: '2026-11-22T01:00:00Z', revokedAt: '2026-11-22T01:00:00Z' },
    });
  });

  it('rotated elsewhere after the request (its POST refused): the current token is stored, the request handled, no second rotation', async () => {
    const h = harness({
      ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' }, status: await syncedStatus() }),
      cached: sealedSecret('tok-1'),
      live: sealedSecret('tok-1'),
      otherKnown: false,
      serviceToken: 'tok-1',
      rotatedElsewhereBeforePost: 'tok-elsewhere',
    });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // One POST, refused: the service's token is the other holder's rotation, not ours.
    expect(posts(h)).toBe(1);
    expect(h.serviceToken()).toBe('tok-elsewhere');
    expect(h.writes.at(-1)).toMatchObject({ token: 'tok-elsewhere', annotations: { [ROTATION_HANDLED_ANNOTATION]: 'r1' } });
    expect(h.writes.at(-1)?.annotations[ROTATION_PENDING_ANNOTATION]).toBeUndefined();
    expect(h.calls).toContain('Event Normal TokenRotatedElsewhere');
    expect(h.calls).not.toContain('Event Normal TokenRotated');
    expect(h.statuses.at(-1)?.rotation).toMatchObject({ lastHandledRequest: 'r1', lastRevoked: { request: 'r1', by: 'AnotherHolder' } });
  });

  it('a value handled before is never rotated again, whatever the Secret says now', async () => {
    const status = { ...(await syncedStatus()), rotation: { lastHandledRequest: 'r1' } };
    const stored = sealedSecret('tok-1');
    const h = harness({
      ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' }, status }),
      cached: stored,
      live: stored,
      otherKnown: false,
      serviceToken: 'tok-1',
    });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(posts(h)).toBe(0);
  });

  it('running the same reconcile again after a rotation changes nothing (idempotent)', async () => {
    const first = await rotationWorld({ stored: sealedSecret('tok-1'), serviceToken: 'tok-1' });
    await first.reconcile();
    const stored = sealedSecret('tok-r1', { handled: 'r1' });
    const again = harness({
      ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' }, status: first.statuses.at(-1) }),
      cached: stored,
      live: stored,
      otherKnown: false,
      serviceToken: 'tok-r1',
    });
    expect(await again.reconcile()).toMatchObject({ kind: 'done' });
    expect(again.calls).toEqual([]);
  });
});
