// A fleet's clusters through the reconciler's ports: the follower never POSTs (requested, scheduled, on deletion); it
// follows the primary's rotations with PUTs; the primary rotates as a single cluster does.
import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION, ROTATE_ON_DELETE_FINALIZER, ROTATION_HANDLED_ANNOTATION } from '../../src/api/constants.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import { fleetScheduledRotation, FOLLOW_DELAY_MS } from '../../src/controller/policies/rotation.js';
import { desiredSecret } from '../../src/controller/policies/token-secret.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { SEAL, storedSecret } from '../support/fixtures.js';
import { harness, REQUESTED_ROTATION, sealedSecret, syncedStatus, userGroup, type Harness } from '../support/reconciler-harness.js';

const NOW = Date.parse('2026-11-22T01:00:00Z');
const posts = (h: Harness): number => h.calls.filter((c) => c === 'POST').length;
const puts = (h: Harness): number => h.calls.filter((c) => c === 'PUT').length;

/** A synced UserGroup whose last PUT was an hour ago, asked to rotate with `request`; a follower saw it `seenAgoMs` ago. */
async function asked(request: string, seenAgoMs?: number): Promise<ReturnType<typeof userGroup>> {
  const synced = await syncedStatus();
  const following = seenAgoMs === undefined ? {} : { rotation: { ...synced.rotation, following: { request, since: new Date(NOW - seenAgoMs).toISOString() } } };
  const status = { ...synced, lastSyncTime: new Date(NOW - 3_600_000).toISOString(), ...following };
  return userGroup({ annotations: { [ROTATE_ANNOTATION]: request }, status });
}

describe('a requested rotation on a follower: followed with PUTs, never a POST', () => {
  it('first sight: no call yet; status says since when it follows, an Event that the primary rotates, back in FOLLOW_DELAY_MS', async () => {
    const stored = sealedSecret('tok-1');
    const h = harness({ ug: await asked('r1'), cached: stored, live: stored, otherKnown: false, serviceToken: 'tok-1', fleet: 'Follower', now: NOW });
    const result = await h.reconcile();
    expect(puts(h) + posts(h)).toBe(0);
    expect(h.calls).toContain('Event Normal RotationLeftToPrimary');
    expect(h.statuses.at(-1)?.rotation?.following).toEqual({ request: 'r1', since: '2026-11-22T01:00:00Z' });
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', FOLLOW_DELAY_MS]]);
  });

  it('the primary has not rotated yet: one PUT, no POST, nothing handled, and the key comes back to look again', async () => {
    const stored = sealedSecret('tok-1');
    const h = harness({ ug: await asked('r1', 10_000), cached: stored, live: stored, otherKnown: false, serviceToken: 'tok-1', fleet: 'Follower', now: NOW });
    const result = await h.reconcile();
    expect(puts(h)).toBe(1);
    expect(posts(h)).toBe(0);
    expect(h.serviceToken()).toBe('tok-1');
    expect(h.calls).toContain('Event Normal RotationLeftToPrimary');
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBeUndefined();
    expect(h.statuses.at(-1)?.rotation?.following?.request).toBe('r1');
    // Ready says so: the token is current, the rotation not done here.
    const ready = h.statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(ready?.message).toMatch(/rotation request "r1" is left to the fleet's primary cluster/);
    // Seen 10 s ago, looked now: next a quarter of that later, at least FOLLOW_MIN_INTERVAL_MS.
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', 5_000]]);
  });

  it('the primary rotated: the PUT returns its token, stored and the request handled, by AnotherHolder, without a POST', async () => {
    const stored = sealedSecret('tok-1');
    const h = harness({
      ug: await asked('r1', 10_000),
      cached: stored,
      live: stored,
      otherKnown: false,
      serviceToken: 'tok-primary',
      fleet: 'Follower',
      now: NOW,
    });
    await h.reconcile();
    expect(posts(h)).toBe(0);
    expect(h.statuses.at(-1)?.rotation?.following).toBeUndefined();
    expect(h.statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready')?.message).not.toMatch(/primary/);
    expect(h.writes.at(-1)).toMatchObject({ token: 'tok-primary', annotations: { [ROTATION_HANDLED_ANNOTATION]: 'r1' } });
    expect(h.calls).toContain('Event Normal TokenRotatedElsewhere');
    expect(h.statuses.at(-1)?.rotation).toMatchObject({ lastHandledRequest: 'r1', lastRevoked: { request: 'r1', by: 'AnotherHolder' } });
  });

  it('the same world on the primary (or without a fleet) rotates: the PUT after the request, the intent, one POST', async () => {
    for (const fleet of ['Primary', undefined] as const) {
      const stored = sealedSecret('tok-1');
      const h = harness({
        ug: await asked('r1'),
        cached: stored,
        live: stored,
        otherKnown: false,
        serviceToken: 'tok-1',
        now: NOW,
        ...(fleet ? { fleet } : {}),
      });
      await h.reconcile();
      expect(h.outcome()).toEqual(REQUESTED_ROTATION);
      expect(h.serviceToken()).toBe('tok-r1');
    }
  });
});

describe('a scheduled rotation in a fleet: at the time every cluster derives from the id', () => {
  const ISSUED = '2026-11-20T00:00:00.000Z';
  const DUE = fleetScheduledRotation(ISSUED, 24 * 3_600_000, 'acme-1')?.dueAt ?? NaN;
  const world = async (fleet: 'Primary' | 'Follower', now: number, serviceToken: string, lastSyncTime = ISSUED): Promise<Harness> => {
    const stored = sealedSecret('tok-1', { issuedAt: ISSUED });
    const status = { ...(await syncedStatus()), lastSyncTime };
    return harness({ ug: userGroup({ maxTokenAge: '24h', status }), cached: stored, live: stored, otherKnown: false, serviceToken, fleet, now });
  };

  it('both roles show the same next rotation time, the fleet schedule', async () => {
    for (const fleet of ['Primary', 'Follower'] as const) {
      const h = await world(fleet, DUE - 60_000, 'tok-1', new Date(DUE - 120_000).toISOString());
      await h.reconcile();
      expect(h.calls.filter((c) => c === 'PUT' || c === 'POST')).toEqual([]);
      expect(Date.parse(h.statuses.at(-1)?.rotation?.nextRotationTime ?? '')).toBe(Math.floor(DUE / 1000) * 1000);
    }
  });

  it('due: the primary POSTs once; the follower PUTs and stores what the primary made, never a POST', async () => {
    const primary = await world('Primary', DUE + 1_000, 'tok-1');
    await primary.reconcile();
    expect(posts(primary)).toBe(1);
    const follower = await world('Follower', DUE + FOLLOW_DELAY_MS, primary.serviceToken());
    await follower.reconcile();
    expect(posts(follower)).toBe(0);
    expect(puts(follower)).toBe(1);
    expect(follower.writes.at(-1)?.token).toBe(primary.serviceToken());
  });

  it('due, the primary late: the follower looks, finds the token unchanged, and comes back later without rotating', async () => {
    const h = await world('Follower', DUE + FOLLOW_DELAY_MS, 'tok-1');
    const result = await h.reconcile();
    expect(posts(h)).toBe(0);
    expect(h.calls).toContain('Event Normal RotationLeftToPrimary');
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', 5_000]]);
  });
});

describe('deletionPolicy Rotate on a follower: the token stays, the others still serve it', () => {
  it('no call; the finalizers go, with an Event that says why', async () => {
    const ug = userGroup();
    if (!ug.spec.ok) throw new Error(ug.spec.error);
    const raw = storedSecret(
      desiredSecret(ug.metadata, ug.spec.value, { token: new SecretValue('tok-1'), handled: undefined, pending: undefined }, SEAL),
      '20',
    ) as { metadata: Record<string, unknown> };
    raw.metadata['finalizers'] = [ROTATE_ON_DELETE_FINALIZER];
    const parsed = parseSecret(raw);
    if (!parsed.ok) throw new Error(parsed.error);
    const stored: ObservedSecret = parsed.value;
    const deleting = userGroup({ deletionPolicy: 'Rotate', finalizers: [ROTATE_ON_DELETE_FINALIZER], deletionTimestamp: '2026-11-22T00:59:00Z' });
    const h = harness({ ug: deleting, cached: stored, live: stored, serviceToken: 'tok-1', fleet: 'Follower', now: NOW });
    await h.reconcile();
    expect(posts(h) + puts(h)).toBe(0);
    expect(h.serviceToken()).toBe('tok-1');
    expect(h.calls).toContain('Event Normal DeletionRotationSkipped');
    expect(h.calls).toContain('remove UserGroup finalizer');
  });
});
