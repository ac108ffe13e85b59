import { describe, expect, it } from 'vitest';
import { claimName } from '../../src/api/claim.js';
import { ROTATE_ON_DELETE_FINALIZER } from '../../src/api/constants.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import type { UserGroupStatus } from '../../src/api/usergroup.js';
import { desiredSecret } from '../../src/controller/policies/token-secret.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { clusterService, OTHER_SEAL, SEAL, storedSecret } from '../support/fixtures.js';
import { IMMEDIATE_RETRY_MS } from '../../src/controller/retry-policy.js';
import { ACCOUNT, claim, FIRST_SYNC, harness, userGroup, type Harness, type UserGroupInit } from '../support/reconciler-harness.js';

/**
 * spec.deletionPolicy through the reconciler's ports (fake apiserver and service, no I/O): which objects get the
 * rotate-on-delete finalizer, and what a deletion holding it calls. The real apiserver's side (finalizers, garbage
 * collection, namespace deletion) is in test/integration/deletion-policy.test.ts.
 */

const NOW = Date.parse('2026-11-22T01:00:00Z');
const DELETED_AT = '2026-11-22T00:59:00Z';

/** Our own token Secret, sealed with `seal`, holding `token`; `stored`: what its data really holds (a tenant's edit). */
function sealedSecret(token: string, opts: { finalized?: boolean; stored?: string; seal?: typeof SEAL; terminating?: boolean } = {}): ObservedSecret {
  const ug = userGroup();
  if (!ug.spec.ok) throw new Error(ug.spec.error);
  const desired = desiredSecret(ug.metadata, ug.spec.value, { token: new SecretValue(token), handled: undefined, pending: undefined }, opts.seal ?? SEAL);
  const raw = storedSecret(desired, '20') as { metadata: Record<string, unknown>; data: Record<string, string> };
  if (opts.finalized) raw.metadata['finalizers'] = [ROTATE_ON_DELETE_FINALIZER];
  if (opts.terminating) raw.metadata['deletionTimestamp'] = DELETED_AT;
  if (opts.stored !== undefined) raw.data = { token: Buffer.from(opts.stored).toString('base64') };
  const parsed = parseSecret(raw);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** The status a first sync leaves (so that no PUT is due), from a real first sync (with Rotate, after the pass that writes the finalizer). */
async function syncedStatus(init: UserGroupInit = {}): Promise<UserGroupStatus> {
  const h = harness({ ug: userGroup(init), cached: undefined, otherKnown: false, live: undefined });
  for (let pass = 0; pass < 2 && h.statuses.length === 0; pass++) await h.reconcile();
  const status = h.statuses.at(-1);
  if (!status) throw new Error('no status written');
  return status;
}

/**
 * The finalizer writes, in the order they were made. Protocol (finalize.ts, docs/architecture.md steps 0 and 11): when
 * both change in one pass, the token Secret's before the UserGroup's, added or removed, so a UserGroup whose deletion
 * begins finds the token kept. The UserGroup's alone goes on before a first PUT (step 4b).
 */
const finalizers = (h: Harness): string[] =>
  h.order('add Secret finalizer acme', 'remove Secret finalizer acme', 'add UserGroup finalizer', 'remove UserGroup finalizer');
const REMOVED = ['remove Secret finalizer acme', 'remove UserGroup finalizer'];
/** The two removals as the only apiserver requests: no read of the Secret, no status write. */
const REMOVALS_ONLY = { 'remove Secret finalizer acme': 1, 'remove UserGroup finalizer': 1 };

/** How a deletion holding the finalizer ended, as a user sees it: the service's calls, the Events, usergroup_delete_rotations_total. */
const ending = (h: Harness): { service: Record<string, number>; events: Record<string, number>; deletions: Record<string, number> } => ({
  service: h.serviceCalls(),
  events: h.events(),
  deletions: h.deletions(),
});
/** Let go without a call: counted as skipped, no Event. */
const SKIPPED = { service: {}, events: {}, deletions: { skipped: 1 } };
/** Rotated once, told, counted. */
const ROTATED = { service: { POST: 1 }, events: { 'Normal TokenRotatedOnDelete': 1 }, deletions: { rotated: 1 } };

/** Everything a pass could be seen doing: the service's calls, the apiserver's requests, the Events, the deletion metric. */
const seen = (h: Harness): Record<string, Record<string, number>> => ({ ...ending(h), kube: h.kubeRequests() });
const NOTHING = { service: {}, kube: {}, events: {}, deletions: {} };
/** A synced Rotate UserGroup's pass that only keeps its finalizers: no call, the token kept, still Synced, no Event. */
const SYNCED_QUIET = { service: {}, secret: 'tok-1', events: {}, ready: 'Synced' };

const deleting = (init: UserGroupInit = {}): UserGroupInit => ({
  deletionPolicy: 'Rotate',
  finalizers: [ROTATE_ON_DELETE_FINALIZER],
  deletionTimestamp: DELETED_AT,
  ...init,
});

describe('deletionPolicy: the finalizer on live UserGroups', () => {
  it('Retain (the default), synced: no finalizer write, no call of any kind', async () => {
    const stored = sealedSecret('tok-1');
    const h = harness({ ug: userGroup({ status: await syncedStatus() }), cached: stored, live: stored, now: NOW });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(seen(h)).toEqual(NOTHING);
  });

  it('Rotate with a token held: the Secret gets the finalizer first, then the UserGroup', async () => {
    const stored = sealedSecret('tok-1');
    const ug = userGroup({ deletionPolicy: 'Rotate', status: await syncedStatus({ deletionPolicy: 'Rotate' }) });
    const h = harness({ ug, cached: stored, live: stored, now: NOW });
    await h.reconcile();
    expect(h.outcome()).toEqual(SYNCED_QUIET);
    expect(h.kubeWrites()).toEqual({ 'add Secret finalizer acme': 1, 'add UserGroup finalizer': 1 });
    // Protocol: the Secret's first, so that a deletion that begins between the two writes finds the token kept.
    expect(finalizers(h)).toEqual(['add Secret finalizer acme', 'add UserGroup finalizer']);
  });

  it("Rotate, first sync: the UserGroup's finalizer is written before the first PUT, in a pass of its own", async () => {
    const h = harness({ ug: userGroup({ deletionPolicy: 'Rotate' }), cached: undefined, otherKnown: false, live: undefined, now: NOW });
    const first = await h.reconcile();
    expect(h.kubeWrites()).toEqual({ 'add UserGroup finalizer': 1 });
    expect(h.serviceCalls()).toEqual({});
    // It comes back at once, and goes on from the object that shows the finalizer.
    expect(h.requeue(first)).toEqual([['forget'], ['addAfter', IMMEDIATE_RETRY_MS]]);
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // Protocol: the finalizer is what makes a deletion rotate the token the first PUT hands out, so it is in place
    // before that PUT goes out (a deletion, or the controller stopping, right after the PUT still rotates it).
    expect(h.order('add UserGroup finalizer', 'PUT')).toEqual(['add UserGroup finalizer', 'PUT']);
    expect(h.outcome()).toEqual(FIRST_SYNC);
    expect(h.kubeWrites()).toMatchObject({ 'add UserGroup finalizer': 1 });
    expect(finalizers(h)).toEqual(['add UserGroup finalizer']);
  });

  it('Retain, first sync: no finalizer write, the calls of any first sync', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: undefined, now: NOW });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    expect(finalizers(h)).toEqual([]);
  });

  it('Rotate, its finalizer in place and no token held yet (the Secret missing): no finalizer write, the finalizer stays', async () => {
    const h = harness({
      ug: userGroup({ deletionPolicy: 'Rotate', finalizers: [ROTATE_ON_DELETE_FINALIZER] }),
      cached: undefined,
      otherKnown: false,
      live: undefined,
      now: NOW,
    });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    expect(finalizers(h)).toEqual([]);
  });

  it('Rotate, suspended: the finalizers it had go, nothing else', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const ug = userGroup({ deletionPolicy: 'Rotate', suspend: true, finalizers: [ROTATE_ON_DELETE_FINALIZER] });
    const h = harness({ ug, cached: stored, live: stored, now: NOW });
    await h.reconcile();
    expect(h.outcome()).toEqual({ service: {}, secret: 'tok-1', events: {}, ready: 'Suspended' });
    expect(h.kubeWrites()).toEqual({ status: 1, ...REMOVALS_ONLY });
    // Protocol: the UserGroup's last: with it gone (a deletion between the two) nothing would remove the Secret's.
    expect(finalizers(h)).toEqual(REMOVED);
  });
});

describe('deletionPolicy: a token Secret deleted while its UserGroup lives', () => {
  it('let go (a refusal revoked it, or a tenant deleted it): both finalizers go', async () => {
    const stored = sealedSecret('tok-1', { finalized: true, terminating: true });
    const ug = userGroup({ deletionPolicy: 'Rotate', finalizers: [ROTATE_ON_DELETE_FINALIZER], status: await syncedStatus({ deletionPolicy: 'Rotate' }) });
    const h = harness({ ug, cached: stored, live: stored, now: NOW });
    await h.reconcile();
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it("kept while its namespace is being deleted: the namespace controller deleted the Secret first, the UserGroup's deletion needs the token", async () => {
    const stored = sealedSecret('tok-1', { finalized: true, terminating: true });
    const ug = userGroup({ deletionPolicy: 'Rotate', finalizers: [ROTATE_ON_DELETE_FINALIZER], status: await syncedStatus({ deletionPolicy: 'Rotate' }) });
    const h = harness({ ug, cached: stored, live: stored, now: NOW, namespaceTerminating: true });
    await h.reconcile();
    expect(finalizers(h)).toEqual([]);
  });
});

describe('deletionPolicy: a deletion holding the finalizer', () => {
  it('Retain being deleted without a finalizer: nothing at all', async () => {
    const stored = sealedSecret('tok-1');
    const h = harness({ ug: userGroup({ deletionTimestamp: DELETED_AT }), cached: stored, live: stored, now: NOW });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(seen(h)).toEqual(NOTHING);
  });

  it('Rotate: one POST with the held token, the finalizers go, counted and told; the new token is not stored', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(ending(h)).toEqual(ROTATED);
    expect(finalizers(h)).toEqual(REMOVED);
    // Protocol: the finalizers hold the deletion until the token is rotated, so they go only after the POST, the Secret's first.
    expect(h.order('POST', ...REMOVED)).toEqual(['POST', ...REMOVED]);
    expect(h.serviceToken()).toBe('tok-r1');
    expect(h.writes).toEqual([]);
  });

  it('deleted between its first PUT and its Secret (no Secret yet): a PUT learns the token, one POST rotates it, nothing stored', async () => {
    const h = harness({ ug: userGroup(deleting()), cached: undefined, live: undefined, now: NOW, created: false });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(ending(h)).toEqual({ ...ROTATED, service: { PUT: 1, POST: 1 } });
    expect(finalizers(h)).toEqual(['remove UserGroup finalizer']);
    // Protocol: the service has no read; the PUT's token is the one the POST revokes.
    expect(h.order('PUT', 'POST', 'remove UserGroup finalizer')).toEqual(['PUT', 'POST', 'remove UserGroup finalizer']);
    expect(h.serviceToken()).toBe('tok-r1');
    expect(h.writes).toEqual([]);
  });

  it('…the service does not say whether the PUT created it: rotated all the same', async () => {
    const h = harness({ ug: userGroup(deleting()), cached: undefined, live: undefined, now: NOW, created: undefined });
    await h.reconcile();
    expect(ending(h)).toEqual({ ...ROTATED, service: { PUT: 1, POST: 1 } });
    expect(h.serviceToken()).toBe('tok-r1');
  });

  it('…the PUT created the group (no earlier PUT reached the service): no POST, its token dropped', async () => {
    const h = harness({ ug: userGroup(deleting()), cached: undefined, live: undefined, now: NOW, created: true });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(ending(h)).toEqual({ ...SKIPPED, service: { PUT: 1 } });
    expect(finalizers(h)).toEqual(['remove UserGroup finalizer']);
    expect(h.serviceToken()).toBe('tok-1');
    expect(h.writes).toEqual([]);
  });

  it("…adoption Refuse and a group that was there, never synced by this UserGroup: no POST (it may be someone else's)", async () => {
    const h = harness({ ug: userGroup(deleting()), cached: undefined, live: undefined, now: NOW, created: false, adoption: 'Refuse' });
    await h.reconcile();
    expect(ending(h)).toEqual({ ...SKIPPED, service: { PUT: 1 } });
    expect(finalizers(h)).toEqual(['remove UserGroup finalizer']);
    expect(h.serviceToken()).toBe('tok-1');
    // Synced by it before (its status says so), the group is its own: rotated.
    const synced = harness({
      ug: userGroup(deleting({ status: await syncedStatus() })),
      cached: undefined,
      live: undefined,
      now: NOW,
      created: false,
      adoption: 'Refuse',
    });
    await synced.reconcile();
    expect(ending(synced)).toEqual({ ...ROTATED, service: { PUT: 1, POST: 1 } });
    expect(synced.serviceToken()).toBe('tok-r1');
  });

  it('no claim, but rules that bind the id to the namespace (a controller seeing every namespace): it holds the id, one POST', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const bound = { claims: new Map(), clusterServices: [clusterService('shared', [{ namespaces: ['ns'], userGroupIds: { prefix: '' } }])] };
    const h = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW, ...bound, seesAllNamespaces: true });
    await h.reconcile();
    expect(ending(h)).toEqual(ROTATED);
    expect(h.serviceToken()).toBe('tok-r1');
    // A controller that sees part of the namespaces never held it without a claim: no call.
    const partial = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW, ...bound, seesAllNamespaces: false });
    await partial.reconcile();
    expect(ending(partial)).toEqual(SKIPPED);
    expect(partial.serviceToken()).toBe('tok-1');
  });

  it('the service says the held token is not current (already rotated, or a crash after the POST): done, one POST', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW, serviceToken: 'tok-r1' });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(ending(h)).toEqual(ROTATED);
    expect(finalizers(h)).toEqual(REMOVED);
    expect(h.serviceToken()).toBe('tok-r1');
  });

  it('suspended: no read, no call; the finalizers go', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({ ug: userGroup(deleting({ suspend: true })), cached: stored, live: stored, now: NOW });
    await h.reconcile();
    expect(ending(h)).toEqual(SKIPPED);
    expect(h.kubeRequests()).toEqual(REMOVALS_ONLY);
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it('a Secret whose token a tenant replaced (the sealed digest does not match): no call with it', async () => {
    const stored = sealedSecret('tok-1', { finalized: true, stored: 'someone-elses-token' });
    const h = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW, serviceToken: 'someone-elses-token' });
    await h.reconcile();
    expect(ending(h)).toEqual(SKIPPED);
    expect(h.serviceToken()).toBe('someone-elses-token');
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it('a record sealed under another account: no call', async () => {
    const stored = sealedSecret('tok-1', { finalized: true, seal: OTHER_SEAL });
    const h = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW });
    await h.reconcile();
    expect(ending(h)).toEqual(SKIPPED);
    expect(h.serviceToken()).toBe('tok-1');
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it("the id's claim is held by another UserGroup: no read of the Secret, no call", async () => {
    const ug = userGroup(deleting());
    const other = userGroup({ name: 'other', namespace: 'elsewhere', uid: 'uid-other' });
    const claims = new Map([[claimName(ACCOUNT, 'acme-1'), claim({ holder: other })]]);
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({ ug, cached: stored, live: stored, now: NOW, claims });
    await h.reconcile();
    expect(ending(h)).toEqual(SKIPPED);
    expect(h.kubeRequests()).toEqual(REMOVALS_ONLY);
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it('the tenant rules refuse it: no call', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({
      ug: userGroup(deleting()),
      cached: stored,
      live: stored,
      now: NOW,
      resolution: { ok: false, reason: 'NamespaceNotAllowed', message: 'not allowed' } as never,
    });
    await h.reconcile();
    expect(ending(h)).toEqual(SKIPPED);
    expect(h.kubeRequests()).toEqual(REMOVALS_ONLY);
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it('past the limit from the deletionTimestamp: no call, the finalizers go with a Warning', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({ ug: userGroup(deleting({ deletionTimestamp: '2026-11-22T00:50:00Z' })), cached: stored, live: stored, now: NOW });
    await h.reconcile();
    expect(ending(h)).toEqual({ service: {}, events: { 'Warning RotationOnDeleteAbandoned': 1 }, deletions: { abandoned: 1 } });
    expect(finalizers(h)).toEqual(REMOVED);
  });
});

describe('--rotate-on-delete=false (before a rollback below 0.3.0, or an uninstall): every finalizer goes, no call', () => {
  it('a live Rotate UserGroup holding a token: both finalizers removed, none added', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const ug = userGroup({ deletionPolicy: 'Rotate', finalizers: [ROTATE_ON_DELETE_FINALIZER], status: await syncedStatus({ deletionPolicy: 'Rotate' }) });
    const h = harness({ ug, cached: stored, live: stored, now: NOW, rotateOnDelete: false });
    await h.reconcile();
    expect(h.outcome()).toEqual(SYNCED_QUIET);
    expect(h.kubeWrites()).toEqual(REMOVALS_ONLY);
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it('a live Rotate UserGroup without them: nothing written', async () => {
    const stored = sealedSecret('tok-1');
    const ug = userGroup({ deletionPolicy: 'Rotate', status: await syncedStatus({ deletionPolicy: 'Rotate' }) });
    const h = harness({ ug, cached: stored, live: stored, now: NOW, rotateOnDelete: false });
    await h.reconcile();
    expect(seen(h)).toEqual(NOTHING);
  });

  it('…even while its namespace is being deleted (nothing may wait for an operator that will not rotate)', async () => {
    const stored = sealedSecret('tok-1', { finalized: true, terminating: true });
    const ug = userGroup({ deletionPolicy: 'Rotate', finalizers: [ROTATE_ON_DELETE_FINALIZER], status: await syncedStatus({ deletionPolicy: 'Rotate' }) });
    const h = harness({ ug, cached: stored, live: stored, now: NOW, namespaceTerminating: true, rotateOnDelete: false });
    await h.reconcile();
    expect(finalizers(h)).toEqual(REMOVED);
  });

  it('a deletion holding the finalizer: let go at once, no read, no call', async () => {
    const stored = sealedSecret('tok-1', { finalized: true });
    const h = harness({ ug: userGroup(deleting()), cached: stored, live: stored, now: NOW, rotateOnDelete: false });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(ending(h)).toEqual(SKIPPED);
    expect(h.kubeRequests()).toEqual(REMOVALS_ONLY);
    expect(finalizers(h)).toEqual(REMOVED);
  });
});
