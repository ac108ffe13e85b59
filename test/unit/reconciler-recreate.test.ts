import { describe, expect, it } from 'vitest';
import { claimName } from '../../src/api/claim.js';
import { ROTATE_ANNOTATION, ROTATION_HANDLED_ANNOTATION, USERGROUP_UID_ANNOTATION } from '../../src/api/constants.js';
import type { OwnerReference } from '../../src/api/meta.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import type { UserGroup } from '../../src/api/usergroup.js';
import { desiredSecret } from '../../src/controller/policies/token-secret.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { clusterService, SEAL, storedSecret } from '../support/fixtures.js';
import { ACCOUNT, claim, harness, userGroup, type Outcome } from '../support/reconciler-harness.js';

/**
 * A UserGroup deleted under deletionPolicy Retain and applied again (GitOps: a prune and a re-sync, a replace, a
 * manifest moved between Applications): the token Secret the namespace kept is taken back with its token, no POST;
 * anything that is not this namespace's own history is adopted under the rules' policy as before.
 */

const CLAIM = claimName(ACCOUNT, 'acme-1');
const NAMESPACE: OwnerReference = { apiVersion: 'v1', kind: 'Namespace', name: 'ns', uid: 'uid-ns', controller: false };
/** The UserGroup that was deleted; `userGroup()` (uid-acme) is the one applied again under the same name. */
const former = (init: Parameters<typeof userGroup>[0] = {}): UserGroup => userGroup({ uid: 'uid-deleted', ...init });

/**
 * The Secret `owner` wrote with `token` (Retain: the namespace as its second owner), as the garbage collector leaves
 * it: `gc` done, the UserGroup's reference removed; not done yet, still there (pointing at a UserGroup that is gone).
 */
function keptSecret(owner: UserGroup, token: string, { gc = true, handled }: { gc?: boolean; handled?: string } = {}): ObservedSecret {
  if (!owner.spec.ok) throw new Error('bad spec');
  const desired = desiredSecret(owner.metadata, owner.spec.value, { token: new SecretValue(token), handled, pending: undefined }, SEAL, NAMESPACE);
  const stored = JSON.parse(JSON.stringify(storedSecret(desired, '20'))) as { metadata: Record<string, unknown> };
  if (gc) stored.metadata['ownerReferences'] = [NAMESPACE];
  const parsed = parseSecret(stored);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** The kept Secret taken back: one PUT, no POST, the same token kept in it, Synced. */
const RECLAIMED: Outcome = { service: { PUT: 1 }, secret: 'tok-1', events: { 'Normal TokenSecretReclaimed': 1 }, ready: 'Synced' };
/** A sync that meets the kept Secret, adopts the group with Rotate and stores the new token in it. */
const ADOPTED_WITH_ROTATION: Outcome = {
  service: { PUT: 1, POST: 1 },
  secret: 'tok-r1',
  events: { 'Normal Adopted': 1, 'Normal Synced': 1 },
  ready: 'Synced',
};
/** A SecretConflict found on the kept Secret: no service call, the Secret as it was (tok-1). */
const CONFLICT: Outcome = { service: {}, secret: 'tok-1', events: { 'Warning SecretConflict': 1 }, ready: 'SecretConflict' };

/** What the metadata-only cache holds of a Secret: no data. */
const metadataOnly = (s: ObservedSecret): ObservedSecret => ({ ...s, data: undefined });

/** The claim the deleted UserGroup wrote: it outlives it (Retain), naming this namespace. */
const claimOfFormer = (): Map<string, ReturnType<typeof claim>> => new Map([[CLAIM, claim({ holder: former() })]]);

describe('re-created after deletionPolicy Retain: the kept token Secret is taken back, no rotation', () => {
  it('after the garbage collector (the Secret known by name only): one PUT, the Secret replaced with the same token, owned anew', async () => {
    const world = {
      ug: userGroup(),
      claims: claimOfFormer(),
      otherKnown: true,
      live: keptSecret(former(), 'tok-1'),
      created: false,
      adoption: 'Rotate' as const,
      keeper: NAMESPACE,
    };
    const h = harness(world);
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(RECLAIMED);
    expect(h.claims.get(CLAIM)?.spec.userGroup.uid).toBe('uid-acme');
    // Protocol: the claim is taken over before the PUT (the apiserver decides who holds the id before the service hears of it).
    expect(h.order('replace Claim', 'PUT')).toEqual(['replace Claim', 'PUT']);
    expect(h.writes.map((w) => ({ token: w.token, resourceVersion: w.resourceVersion }))).toEqual([{ token: 'tok-1', resourceVersion: '20' }]);
    expect(h.serviceToken()).toBe('tok-1');
    expect(world.live.metadata.ownerReferences.map((o) => `${o.kind}/${o.uid}${o.controller ? ' (controller)' : ''}`)).toEqual([
      'UserGroup/uid-acme (controller)',
      'Namespace/uid-ns',
    ]);
    expect(world.live.metadata.annotations[USERGROUP_UID_ANNOTATION]).toBe('uid-acme');
    const status = h.statuses.at(-1);
    expect(status?.adoption).toBeUndefined();
    expect(status?.syncedHash).toBeDefined();
  });

  it('before the garbage collector (the cache still shows the deleted UserGroup as controller): the same', async () => {
    const kept = keptSecret(former(), 'tok-1', { gc: false });
    const h = harness({
      ug: userGroup(),
      claims: claimOfFormer(),
      cached: metadataOnly(kept),
      live: kept,
      created: false,
      adoption: 'Rotate',
      keeper: NAMESPACE,
    });
    await h.reconcile();
    expect(h.outcome()).toEqual(RECLAIMED);
    expect(h.claims.get(CLAIM)?.spec.userGroup.uid).toBe('uid-acme');
    // Protocol: the claim taken over before the PUT.
    expect(h.order('replace Claim', 'PUT')).toEqual(['replace Claim', 'PUT']);
    expect(h.serviceToken()).toBe('tok-1');
  });

  it('under another name (a manifest renamed, same id and Secret): taken back too', async () => {
    const ug = userGroup({ name: 'acme-renamed' });
    if (!ug.spec.ok) throw new Error('bad spec');
    const h = harness({
      ug,
      claims: claimOfFormer(),
      otherKnown: true,
      live: keptSecret(former(), 'tok-1'),
      created: false,
      adoption: 'Rotate',
      keeper: NAMESPACE,
    });
    await h.reconcile();
    expect(h.calls.filter((c) => c === 'POST')).toEqual([]);
    expect(h.calls).toContain('Event Normal TokenSecretReclaimed');
  });

  it('a re-applied manifest with the rotation request it carried before: the kept record says handled, no POST', async () => {
    const ug = userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' } });
    const h = harness({
      ug,
      claims: claimOfFormer(),
      otherKnown: true,
      live: keptSecret(former(), 'tok-1', { handled: 'r1' }),
      created: false,
      adoption: 'Rotate',
    });
    await h.reconcile();
    expect(h.calls.filter((c) => c === 'POST')).toEqual([]);
    expect(h.writes.at(-1)?.annotations[ROTATION_HANDLED_ANNOTATION]).toBe('r1');
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
  });

  it('an id the rules bind to this namespace (no claim at all): the rules held it before, taken back', async () => {
    const rules = clusterService('shared', [{ namespaces: ['ns'], userGroupIds: { prefix: 'acme-' } }]);
    const h = harness({
      ug: userGroup(),
      claims: new Map(),
      clusterServices: [rules],
      seesAllNamespaces: true,
      otherKnown: true,
      live: keptSecret(former(), 'tok-1'),
      created: false,
      adoption: 'Rotate',
    });
    await h.reconcile();
    expect(h.outcome()).toEqual(RECLAIMED);
    expect(h.claims.size).toBe(0);
  });
});

describe('not this namespace’s own history: adopted under the rules’ policy, as before', () => {
  it('the token moved on since the Secret was kept (rotated elsewhere): Rotate adopts, one POST', async () => {
    const h = harness({
      ug: userGroup(),
      claims: claimOfFormer(),
      otherKnown: true,
      live: keptSecret(former(), 'tok-old'),
      serviceToken: 'tok-1',
      created: false,
      adoption: 'Rotate',
    });
    await h.reconcile();
    expect(h.outcome()).toEqual(ADOPTED_WITH_ROTATION);
    expect(h.claims.get(CLAIM)?.spec.userGroup.uid).toBe('uid-acme');
    // Protocol: the claim taken over before the PUT; the adoption's POST before anything is stored (a crash in
    // between repeats the adoption, never skips its rotation).
    expect(h.order('replace Claim', 'PUT', 'POST', 'replace Secret')).toEqual(['replace Claim', 'PUT', 'POST', 'replace Secret']);
    expect(h.writes.map((w) => w.token)).toEqual(['tok-r1']);
    expect(h.statuses.at(-1)?.adoption).toEqual({ adoptedAt: '2026-11-22T01:00:00Z', tokenRotated: true });
  });

  it('the id was claimed just now (a cluster admin released it since the Secret was kept): Rotate adopts, one POST', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), otherKnown: true, live: keptSecret(former(), 'tok-1'), created: false, adoption: 'Rotate' });
    await h.reconcile();
    expect(h.outcome()).toEqual(ADOPTED_WITH_ROTATION);
    expect(h.claims.get(CLAIM)?.spec.userGroup.uid).toBe('uid-acme');
    // Protocol: the claim created before the PUT; the adoption's POST before anything is stored.
    expect(h.order('create Claim', 'PUT', 'POST', 'replace Secret')).toEqual(['create Claim', 'PUT', 'POST', 'replace Secret']);
  });

  it('a Secret kept for another userGroupId: SecretConflict, no call', async () => {
    const h = harness({
      ug: userGroup(),
      claims: claimOfFormer(),
      otherKnown: true,
      live: keptSecret(former({ userGroupId: 'acme-2' }), 'tok-1'),
      created: false,
      adoption: 'Rotate',
    });
    await h.reconcile();
    expect(h.outcome()).toEqual(CONFLICT);
    expect(h.writes).toEqual([]);
  });

  it("another namespace's kept Secret copied here (labels, annotations, token): SecretConflict, no call", async () => {
    const elsewhere = keptSecret(former({ namespace: 'team-b' }), 'tok-1');
    const copied = { ...elsewhere, metadata: { ...elsewhere.metadata, namespace: 'ns' } };
    const h = harness({ ug: userGroup(), claims: claimOfFormer(), otherKnown: true, live: copied, created: false, adoption: 'Rotate' });
    await h.reconcile();
    expect(h.outcome()).toEqual(CONFLICT);
    expect(h.writes).toEqual([]);
  });

  it('a forged record (the uid annotation pointed at this UserGroup, the MAC copied): SecretConflict, no call', async () => {
    const real = keptSecret(former(), 'tok-1');
    const forged = { ...real, metadata: { ...real.metadata, annotations: { ...real.metadata.annotations, [USERGROUP_UID_ANNOTATION]: 'uid-other' } } };
    const h = harness({ ug: userGroup(), claims: claimOfFormer(), otherKnown: true, live: forged, created: false, adoption: 'Rotate' });
    await h.reconcile();
    expect(h.outcome()).toEqual(CONFLICT);
    expect(h.writes).toEqual([]);
  });
});
