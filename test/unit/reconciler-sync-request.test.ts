import { describe, expect, it } from 'vitest';
import { SYNC_ANNOTATION } from '../../src/api/constants.js';
import type { UserGroupStatus } from '../../src/api/usergroup.js';
import { harness, sealedSecret, syncedStatus, userGroup, type Harness } from '../support/reconciler-harness.js';
import type { RequestSlot } from '../../src/controller/request-budget.js';
import { ApiError } from '../../src/kube/api-error.js';

/**
 * Sync on demand through the reconciler's ports (fake apiserver and service, no I/O): a new value of
 * usergroup.dev/sync-requested-at costs one PUT of its own (and a slot of the namespace's budget) when nothing else
 * PUTs, rides on a PUT planned anyway, and is recorded in status.lastHandledSyncRequest; without the annotation a
 * synced group costs nothing at all.
 */

async function world(
  init: { request?: string; status?: UserGroupStatus; serviceToken?: string; syncSlot?: RequestSlot; suspend?: boolean; replaceRefusal?: ApiError } = {},
): Promise<Harness> {
  const status = init.status ?? (await syncedStatus());
  const ug = userGroup({
    annotations: init.request === undefined ? {} : { [SYNC_ANNOTATION]: init.request },
    status,
    ...(init.suspend !== undefined ? { suspend: init.suspend } : {}),
  });
  const stored = sealedSecret('tok-1');
  return harness({
    ug,
    cached: stored,
    live: stored,
    otherKnown: false,
    serviceToken: init.serviceToken ?? 'tok-1',
    ...(init.syncSlot ? { syncSlot: init.syncSlot } : {}),
    ...(init.replaceRefusal ? { secretReplaceRefusal: init.replaceRefusal } : {}),
  });
}

describe('sync on demand, through the ports', () => {
  it('no annotation on a synced group: no call, no budget asked, no status write', async () => {
    const h = await world();
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.calls).toEqual([]);
  });

  it('a new value: one PUT (a slot of the budget first), the same token kept, the value recorded', async () => {
    const h = await world({ request: '2026-11-26T20:00:00.000Z' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: 'tok-1', events: { 'Normal Synced': 1 }, ready: 'Synced' });
    // Protocol: the budget's slot is taken before the PUT and spent only once the PUT went out (a deferred PUT keeps it).
    expect(h.order('sync budget', 'PUT', 'sync budget spent')).toEqual(['sync budget', 'PUT', 'sync budget spent']);
    expect(h.writes).toEqual([]);
    expect(h.statuses.at(-1)?.lastHandledSyncRequest).toBe('2026-11-26T20:00:00.000Z');
  });

  it('the value already handled: nothing', async () => {
    const status = { ...(await syncedStatus()), lastHandledSyncRequest: 's1' };
    const h = await world({ request: 's1', status });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.calls).toEqual([]);
  });

  it('the PUT returns another token (the service may): it is stored like after any sync', async () => {
    const h = await world({ request: 's1', serviceToken: 'tok-new' });
    await h.reconcile();
    expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: 'tok-new', events: { 'Normal Synced': 1 }, ready: 'Synced' });
    // Protocol: the slot before the PUT, spent once it went out (as above).
    expect(h.order('sync budget', 'PUT', 'sync budget spent')).toEqual(['sync budget', 'PUT', 'sync budget spent']);
    expect(h.writes.at(-1)?.token).toBe('tok-new');
    expect(h.statuses.at(-1)?.lastHandledSyncRequest).toBe('s1');
  });

  it('…and its Secret write refused: the request stays open, no status ever says it handled', async () => {
    const refusal = new ApiError('PUT', '/api/v1/namespaces/ns/secrets/acme', 403, 'Forbidden', 'secrets "acme" is forbidden');
    const h = await world({ request: 's1', serviceToken: 'tok-new', replaceRefusal: refusal });
    await h.reconcile();
    expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: 'tok-1', events: { 'Warning SecretWriteFailed': 1 }, ready: 'SecretWriteFailed' });
    // Handled means its token is stored: a status saying so before the store (a crash between, a refusal) would
    // leave the token the PUT returned unstored with nothing left to ask for it again.
    expect(h.statuses.map((s) => s.lastHandledSyncRequest)).not.toContain('s1');
  });

  it('over the budget: no call, an Event says it waits (once per slot), the key comes back at its slot, status untouched', async () => {
    const h = await world({ request: 's1', syncSlot: { kind: 'wait', inMs: 6_000, first: true } });
    const result = await h.reconcile();
    expect(h.outcome()).toEqual({ service: {}, secret: 'tok-1', events: { 'Normal SyncRequestWaiting': 1 }, ready: 'Synced' });
    expect(h.kubeWrites()).toEqual({});
    expect(result).toMatchObject({ kind: 'done', wake: { slotInMs: [6_000] } });
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', 6_000]]);
    const again = await world({ request: 's1', syncSlot: { kind: 'wait', inMs: 3_000, first: false } });
    await again.reconcile();
    expect(again.outcome()).toEqual({ service: {}, secret: 'tok-1', events: {}, ready: 'Synced' });
    expect(again.kubeWrites()).toEqual({});
  });

  it('a PUT planned anyway (the spec changed) answers the request: one PUT, no budget spent', async () => {
    const status = { ...(await syncedStatus()), syncedHash: 'sha256:older-spec' };
    const h = await world({ request: 's1', status });
    await h.reconcile();
    expect(h.calls.filter((c) => c === 'PUT')).toHaveLength(1);
    expect(h.calls).not.toContain('sync budget');
    expect(h.statuses.at(-1)?.lastHandledSyncRequest).toBe('s1');
  });

  it('a suspended group: no call, the request stays pending', async () => {
    const h = await world({ request: 's1', suspend: true });
    await h.reconcile();
    expect(h.calls).not.toContain('PUT');
    expect(h.calls).not.toContain('sync budget');
    expect(h.statuses.at(-1)?.lastHandledSyncRequest).toBeUndefined();
  });
});
