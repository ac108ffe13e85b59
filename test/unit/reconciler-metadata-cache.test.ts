import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { parseSecret, parseTokenSecretMeta, type ObservedSecret } from '../../src/api/secret.js';
import { harness, REQUESTED_ROTATION, userGroup, type World } from '../support/reconciler-harness.js';

/**
 * The token-Secret cache holds metadata only. The data is read when the held token is needed (a rotation)
 * or when the Secret's resourceVersion is not one the operator wrote or checked (someone else changed it);
 * a steady state costs no read at all. Pure reconcile logic: fake ports, no I/O.
 */

/** A first reconcile of a new UserGroup: the Secret it wrote, and the status it reported. */
async function synced(): Promise<{ world: World; live: ObservedSecret; cached: ObservedSecret }> {
  const first: World = { ug: userGroup(), cached: undefined, otherKnown: false, live: undefined };
  const h = harness(first);
  await h.reconcile();
  const live = first.live;
  if (!live) throw new Error('no Secret written');
  const partial = { metadata: { ...live.metadata, ownerReferences: live.metadata.ownerReferences.map((o) => ({ ...o })) } };
  const cached = parseTokenSecretMeta(partial);
  if (!cached) throw new Error('the cache would drop our own Secret');
  return { world: { ug: userGroup({ status: h.statuses.at(-1) }), cached, live, otherKnown: false }, live, cached };
}

describe('token Secrets cached as metadata only', () => {
  it('a synced UserGroup whose Secret is as the operator left it: no read, no call, no write', async () => {
    const { world } = await synced();
    const h = harness(world);
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.calls).toEqual([]);
  });

  it('a resourceVersion the operator did not write: the data is read; edited data is restored from a PUT', async () => {
    const { world, live } = await synced();
    const edited = parseSecret({
      metadata: { ...live.metadata, resourceVersion: '99', ownerReferences: live.metadata.ownerReferences },
      type: 'Opaque',
      data: { token: Buffer.from('edited-by-hand').toString('base64') },
    });
    if (!edited.ok) throw new Error(edited.error);
    const h = harness({
      ...world,
      live: edited.value,
      cached: { ...world.cached!, metadata: { ...world.cached!.metadata, resourceVersion: '99' } },
      verified: false,
    });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: h.serviceToken(), events: { 'Normal Synced': 1 }, ready: 'Synced' });
    expect(h.kubeRequests()).toMatchObject({ 'GET Secret': 1, 'replace Secret': 1 });
  });

  it('an unverified resourceVersion with intact data: one read, nothing else', async () => {
    const { world } = await synced();
    const h = harness({ ...world, verified: false });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // The request count is the point: a doubted resourceVersion costs one read and nothing more.
    expect(h.kubeRequests()).toEqual({ 'GET Secret': 1 });
    expect(h.outcome()).toEqual({ service: {}, secret: 'tok-1', events: {}, ready: 'Synced' });
  });

  it('a rotation reads the held token first, then rotates it exactly once', async () => {
    const { world } = await synced();
    const h = harness({ ...world, ug: userGroup({ status: world.ug.status, annotations: { [ROTATE_ANNOTATION]: 'r1' } }) });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    expect(h.kubeRequests()['GET Secret']).toBe(1);
    // Protocol: the POST sends the held token, which the cache does not have: it is read first; the intent before
    // the POST, the new token stored after it.
    expect(h.order('GET Secret', 'replace Secret', 'POST')).toEqual(['GET Secret', 'replace Secret', 'POST', 'replace Secret']);
    expect(h.writes.at(-1)?.annotations['usergroup.dev/rotation-handled']).toBe('r1');
    expect(h.writes.at(-1)?.token).toBe(h.serviceToken());
  });

  it('a rotation of a Secret this process wrote uses the token it remembers (checked against the seal): no read', async () => {
    const { world, live } = await synced();
    const token = Buffer.from(live.data?.['token'] ?? '', 'base64').toString('utf8');
    const h = harness({ ...world, heldToken: token, ug: userGroup({ status: world.ug.status, annotations: { [ROTATE_ANNOTATION]: 'r1' } }) });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    expect(h.calls).not.toContain('GET Secret');
    // Protocol: the intent before the POST, the new token stored after it.
    expect(h.order('replace Secret', 'POST')).toEqual(['replace Secret', 'POST', 'replace Secret']);
  });

  it('a remembered token that does not match the sealed digest is not used: the data is read', async () => {
    const { world } = await synced();
    const h = harness({ ...world, heldToken: 'not-the-token', ug: userGroup({ status: world.ug.status, annotations: { [ROTATE_ANNOTATION]: 'r1' } }) });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    expect(h.kubeRequests()['GET Secret']).toBe(1);
    // Protocol: the token the POST sends is read first (the remembered one is not believed); the intent before the POST.
    expect(h.order('GET Secret', 'replace Secret', 'POST')).toEqual(['GET Secret', 'replace Secret', 'POST', 'replace Secret']);
  });
});
