import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION, ROTATION_HANDLED_ANNOTATION } from '../../src/api/constants.js';
import type { RequestSlot } from '../../src/controller/request-budget.js';
import { harness, REQUESTED_ROTATION, sealedSecret, syncedStatus, userGroup, type Harness } from '../support/reconciler-harness.js';

/**
 * Requested rotations and their namespace's budget, through the reconciler's ports (fake apiserver and service, no
 * I/O): a new usergroup.dev/rotate-requested-at value takes a slot of the namespace's rotation-request budget before
 * its intent is written; over the budget it waits (no call, no write, an Event once), the reconcile otherwise
 * converges, and the key comes back at its slot. Work already begun and adoptions never ask; no request, no cost.
 */

async function world(
  init: { request?: string; stored?: ReturnType<typeof sealedSecret>; serviceToken?: string; rotationSlot?: RequestSlot } = {},
): Promise<Harness> {
  const ug = userGroup({ annotations: init.request === undefined ? {} : { [ROTATE_ANNOTATION]: init.request }, status: await syncedStatus() });
  const stored = init.stored ?? sealedSecret('tok-1');
  return harness({
    ug,
    cached: stored,
    live: stored,
    otherKnown: false,
    serviceToken: init.serviceToken ?? 'tok-1',
    ...(init.rotationSlot ? { rotationSlot: init.rotationSlot } : {}),
  });
}

describe('requested rotations and the namespace budget, through the ports', () => {
  it('a slot now: taken before the intent, spent once the intent is written, then the protocol as always', async () => {
    const h = await world({ request: 'r1' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    // Protocol: the slot is taken before the intent is written and spent only once it is (an intent write that
    // fails comes back to the same slot), and before the POST: from the intent on, the rotation is work begun that
    // a recovery finishes without asking the budget again, so a spend after the POST would be skipped by a POST that
    // fails or a stop before it, leaving the key a paid slot for its next request. The intent before the POST, the
    // new token stored after it.
    expect(h.order('rotation budget', 'replace Secret', 'rotation budget spent', 'POST')).toEqual([
      'rotation budget',
      'replace Secret',
      'rotation budget spent',
      'POST',
      'replace Secret',
    ]);
    expect(h.order('replace Secret', 'POST')).toEqual(['replace Secret', 'POST', 'replace Secret']);
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
  });

  it('over the budget: no call, no write, an Event says it waits; the key comes back at its slot, the request still pending', async () => {
    const h = await world({ request: 'r1', rotationSlot: { kind: 'wait', inMs: 6_000, first: true } });
    const result = await h.reconcile();
    expect(h.outcome()).toEqual({ service: {}, secret: 'tok-1', events: { 'Normal RotationRequestWaiting': 1 }, ready: 'Synced' });
    expect(h.kubeWrites()).toEqual({});
    expect(h.serviceToken()).toBe('tok-1');
    expect(result).toMatchObject({ kind: 'done', wake: { slotInMs: [6_000] } });
    expect(h.requeue(result)).toEqual([['forget'], ['addAfter', 6_000]]);
    // Asked again before the slot (another reconcile): the same slot, not said again.
    const again = await world({ request: 'r1', rotationSlot: { kind: 'wait', inMs: 2_000, first: false } });
    await again.reconcile();
    expect(again.outcome()).toEqual({ service: {}, secret: 'tok-1', events: {}, ready: 'Synced' });
    expect(again.kubeWrites()).toEqual({});
  });

  it('an intent write that meets an unseen Secret comes back to the same slot: one slot for one rotation', async () => {
    const h = harness({ ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' } }), cached: undefined, otherKnown: false, live: sealedSecret('tok-1') });
    await h.reconcile();
    expect(h.calls.filter((c) => c === 'POST')).toHaveLength(1);
    // Asked on both passes (the second one answered from the slot the first one took), spent once.
    expect(h.calls.filter((c) => c === 'rotation budget spent')).toHaveLength(1);
  });

  it('work already begun never waits: a pending mark is recovered without asking the budget', async () => {
    const h = await world({ request: 'r1', stored: sealedSecret('tok-1', { pending: 'r1' }), serviceToken: 'tok-9' });
    await h.reconcile();
    expect(h.calls).not.toContain('rotation budget');
    expect(h.writes.at(-1)?.annotations[ROTATION_HANDLED_ANNOTATION]).toBe('r1');
  });

  it('a rotation begun and no longer asked for (settle): a PUT, no budget', async () => {
    const h = await world({ stored: sealedSecret('tok-1', { pending: 'r1' }), serviceToken: 'tok-9' });
    await h.reconcile();
    expect(h.calls).not.toContain('rotation budget');
    expect(h.calls).toContain('PUT');
  });

  it('a value already handled, and no annotation at all: nothing asked, no call, no write', async () => {
    const handled = await world({ request: 'r1', stored: sealedSecret('tok-r1', { handled: 'r1' }), serviceToken: 'tok-r1' });
    await handled.reconcile();
    expect(handled.calls).not.toContain('rotation budget');
    const none = await world();
    await none.reconcile();
    expect(none.calls).toEqual([]);
  });

  it("an adoption's rotation satisfies a pending request: one POST, no budget asked", async () => {
    const h = harness({
      ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' } }),
      created: false,
      adoption: 'Rotate',
      rotationSlot: { kind: 'wait', inMs: 9_000, first: true },
    });
    await h.reconcile();
    expect(h.calls).not.toContain('rotation budget');
    expect(h.calls.filter((c) => c === 'POST')).toHaveLength(1);
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
  });
});
