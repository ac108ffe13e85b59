import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { harness, secret, userGroup } from '../support/reconciler-harness.js';

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
    expect(h.calls).toEqual(['PUT', 'create Secret', 'Event Normal Synced', 'status Synced']);
  });

  it('a name the other-Secrets cache knows is read first; not ours → SecretConflict with no service call', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: true, live: secret(undefined, 'someone-elses') });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'secret-taken' });
    expect(h.calls).toEqual(['GET Secret', 'status SecretConflict', 'Event Warning SecretConflict']);
    expect(h.writes).toEqual([]);
  });

  it('a foreign Secret no cache has seen yet: the create fails, a live read decides SecretConflict, nothing written', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(undefined, 'someone-elses') });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'secret-taken' });
    expect(h.calls).toEqual(['PUT', 'create Secret', 'GET Secret', 'status SecretConflict', 'Event Warning SecretConflict']);
  });

  it('our own Secret no cache has seen yet (unlabelled, or a lagging watch): decided again from the live read and replaced', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token') });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.calls).toEqual(['PUT', 'create Secret', 'GET Secret', 'PUT', 'replace Secret', 'Event Normal Synced', 'status Synced']);
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
    // The first pass's intent write is the create that fails: no POST happens before the Secret is known.
    expect(h.calls.filter((c) => !c.includes('budget')).slice(0, 3)).toEqual(['PUT', 'create Secret', 'GET Secret']);
    expect(h.calls.filter((c) => c === 'POST')).toHaveLength(1);
    expect(h.calls.indexOf('POST')).toBeGreaterThan(h.calls.indexOf('GET Secret'));
    expect(h.writes.at(-1)?.annotations['usergroup.dev/rotation-handled']).toBe('r1');
  });

  it('a Secret that keeps appearing and vanishing gives up this round and retries with backoff', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token'), vanishesOnRead: true });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'lost-race' });
    expect(h.calls.filter((c) => c === 'create Secret')).toHaveLength(2);
  });
});
