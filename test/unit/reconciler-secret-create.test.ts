import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { FIRST_SYNC, harness, REQUESTED_ROTATION, secret, userGroup } from '../support/reconciler-harness.js';

/**
 * The create-first Secret write: a UserGroup whose token Secret is in neither cache is written without a read,
 * and a create that meets AlreadyExists (a watch lagging behind a creation) is decided again from a live read —
 * before any rotation, and never touching a Secret that is not ours. Pure reconcile logic: fake ports, no I/O.
 */

const UID = 'uid-acme';

describe('token Secret: create first, read only when a name is known to be taken', () => {
  it('a new UserGroup whose Secret name no cache knows: PUT, create, status — no read', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: undefined });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // The point: a name no cache knows is created without a read first.
    expect(h.kubeRequests()).toMatchObject({ 'create Secret': 1 });
    expect(h.kubeRequests()).not.toHaveProperty('GET Secret');
  });

  it('a name the other-Secrets cache knows is read first; not ours → SecretConflict with no service call', async () => {
    const foreign = secret(undefined, 'someone-elses');
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: true, live: foreign });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'secret-taken' });
    expect(h.outcome()).toEqual({ service: {}, secret: 'someone-elses', events: { 'Warning SecretConflict': 1 }, ready: 'SecretConflict' });
    expect(h.kubeRequests()['GET Secret']).toBe(1);
    expect(h.writes).toEqual([]);
  });

  it('a foreign Secret no cache has seen yet: the create fails, a live read decides SecretConflict, nothing written', async () => {
    const foreign = secret(undefined, 'someone-elses');
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: foreign });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'secret-taken' });
    expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: 'someone-elses', events: { 'Warning SecretConflict': 1 }, ready: 'SecretConflict' });
    // The create was refused (AlreadyExists), and nothing else is written to the Secret.
    expect(h.secret()).toBe(foreign);
    expect(h.writes.map((w) => w.resourceVersion)).toEqual([undefined]);
  });

  it('our own Secret no cache has seen yet (unlabelled, or a lagging watch): decided again from the live read and replaced', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token') });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ ...FIRST_SYNC, service: { PUT: 2 } });
    expect(h.writes[1]?.resourceVersion).toBe('20');
  });

  it('a rotation whose intent write meets an unseen Secret rotates only after the live read, exactly once', async () => {
    const h = harness({
      ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' } }),
      cached: undefined,
      otherKnown: false,
      live: secret(UID, 'stale-token'),
    });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // Two passes: each PUTs and asks the budget (the second answered from the slot the first took).
    expect(h.outcome()).toEqual({ ...REQUESTED_ROTATION, service: { PUT: 2, POST: 1 } });
    // Protocol: the first pass's intent write is the create that fails, so no POST goes out before the live read has
    // found the Secret and an intent write has succeeded; the new token is stored after the POST.
    expect(h.order('create Secret', 'GET Secret', 'replace Secret', 'POST')).toEqual([
      'create Secret',
      'GET Secret',
      'replace Secret',
      'POST',
      'replace Secret',
    ]);
    expect(h.writes.at(-1)?.annotations['usergroup.dev/rotation-handled']).toBe('r1');
  });

  it('a Secret that keeps appearing and vanishing gives up this round and retries with backoff', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token'), vanishesOnRead: true });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'lost-race' });
    expect(h.calls.filter((c) => c === 'create Secret')).toHaveLength(2);
  });
});
