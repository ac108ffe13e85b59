import { describe, expect, it } from 'vitest';
import { claimName } from '../../src/api/claim.js';
import { ROTATE_ANNOTATION, ROTATION_HANDLED_ANNOTATION, TOKEN_RECORD_ANNOTATION, TOKEN_SHA256_ANNOTATION } from '../../src/api/constants.js';
import type { ObservedSecret } from '../../src/api/secret.js';
import { Reason } from '../../src/controller/policies/conditions.js';
import { syncHash, upsertRequestFor } from '../../src/controller/policies/sync.js';
import { sha256Hex } from '../../src/controller/hash.js';
import { desiredSecret } from '../../src/controller/policies/token-secret.js';
import { parseSecret } from '../../src/api/secret.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { clusterService, SEAL, storedSecret } from '../support/fixtures.js';
import { ACCOUNT, claim, FIRST_SYNC, harness, REQUESTED_ROTATION, secret, userGroup, type Outcome } from '../support/reconciler-harness.js';

/**
 * The tenancy steps of a reconcile, through the reconciler's ports (no I/O): what the tenant rules, the
 * UserGroupClaim and the sealed token record let through, and which calls a refused object makes (none).
 */

/** A refused UserGroup: no service call, no token Secret left, a Warning and Ready saying `reason`. */
const refused = (reason: string): Outcome => ({ service: {}, secret: undefined, events: { [`Warning ${reason}`]: 1 }, ready: reason });

const ID = 'acme-1';
const CLAIM = claimName(ACCOUNT, ID);
const ready = (h: {
  statuses: { conditions?: readonly { type: string; reason: string; message: string }[] }[];
}): { reason: string; message: string } | undefined => h.statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready');

/** The Secret the operator wrote for `ug` with `token`, as the apiserver returns it (sealed record included). */
function sealedSecret(ug: ReturnType<typeof userGroup>, token: string, handled?: string): ObservedSecret {
  if (!ug.spec.ok) throw new Error('bad spec');
  const desired = desiredSecret(ug.metadata, ug.spec.value, { token: new SecretValue(token), handled, pending: undefined }, SEAL);
  const parsed = parseSecret(JSON.parse(JSON.stringify(storedSecret(desired, '20'))));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

function syncedHashOf(ug: ReturnType<typeof userGroup>): string {
  if (!ug.spec.ok) throw new Error('bad spec');
  return syncHash(upsertRequestFor(ug.spec.value), 'conn-1');
}

describe('tenant rules: a refused UserGroup makes no call and keeps no token', () => {
  it.each([Reason.NamespaceNotAllowed, Reason.UserGroupIdNotAllowed])('%s: status and Event, no claim, no PUT', async (reason) => {
    const ug = userGroup();
    const h = harness({ ug, claims: new Map(), resolution: { ok: false, reason, message: 'the rules say no' } });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.outcome()).toEqual(refused(reason));
    expect(h.claims.size).toBe(0);
  });

  it('deletes the token Secret the UserGroup got while the rules still admitted it', async () => {
    const ug = userGroup();
    const held = sealedSecret(ug, 'tok-1');
    const h = harness({ ug, cached: held, live: held, resolution: { ok: false, reason: Reason.NamespaceNotAllowed, message: 'no longer admitted' } });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.NamespaceNotAllowed));
    expect(h.deleted).toEqual(['acme']);
    expect(ready(h)?.message).toMatch(/deleted token Secret acme$/);
  });

  it('finds its token Secret even when the tenant stripped the label the owned-Secret cache selects by', async () => {
    const ug = userGroup();
    const h = harness({
      ug,
      cached: undefined,
      otherKnown: true,
      live: sealedSecret(ug, 'tok-1'),
      resolution: { ok: false, reason: Reason.UserGroupIdNotAllowed, message: 'not your id' },
    });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdNotAllowed));
    expect(h.deleted).toEqual(['acme']);
  });
});

describe('claims: which namespace holds an id on an account', () => {
  it('the first UserGroup creates the claim before its first call', async () => {
    const h = harness({ ug: userGroup(), claims: new Map() });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
    expect(h.claims.get(CLAIM)?.spec).toEqual({ userGroupId: ID, account: ACCOUNT, namespace: 'ns', userGroup: { name: 'acme', uid: 'uid-acme' } });
  });

  it('another namespace holds the id: UserGroupIdClaimed, no call, and its token Secret from before is deleted', async () => {
    const ug = userGroup();
    const elsewhere = userGroup({ namespace: 'team-b', uid: 'uid-b' });
    const held = sealedSecret(ug, 'tok-1');
    const h = harness({ ug, cached: held, live: held, claims: new Map([[CLAIM, claim({ holder: elsewhere })]]) });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdClaimed));
    expect(h.deleted).toEqual(['acme']);
    expect(ready(h)?.message).toContain(CLAIM);
    expect(ready(h)?.message).not.toContain('team-b');
  });

  it('...even when the holder in the other namespace was deleted (the sleeper does not wake up)', async () => {
    const ug = userGroup();
    const gone = userGroup({ namespace: 'team-b', uid: 'uid-gone' });
    const h = harness({ ug, claims: new Map([[CLAIM, claim({ holder: gone })]]) });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdClaimed));
    expect(h.claims.get(CLAIM)?.spec.namespace).toBe('team-b');
  });

  it('a live UserGroup of the same namespace holds it: DuplicateUserGroupId, no call', async () => {
    const ug = userGroup();
    const older = userGroup({ name: 'acme-old', uid: 'uid-old' });
    const h = harness({ ug, others: [older], claims: new Map([[CLAIM, claim({ holder: older })]]) });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.outcome()).toEqual(refused(Reason.DuplicateUserGroupId));
    expect(ready(h)?.message).toContain('ns/acme-old');
  });

  it('the holder of the same namespace is gone: this UserGroup takes the claim over and syncs', async () => {
    const ug = userGroup();
    const gone = userGroup({ name: 'acme-old', uid: 'uid-old' });
    const h = harness({ ug, claims: new Map([[CLAIM, claim({ holder: gone })]]) });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // Protocol: the claim taken over before the first call (of two takers, the apiserver lets one win).
    expect(h.order('replace Claim', 'PUT')).toEqual(['replace Claim', 'PUT']);
    expect(h.claims.get(CLAIM)?.spec.userGroup).toEqual({ name: 'acme', uid: 'uid-acme' });
  });

  it('a claim race lost to another namespace (the create meets AlreadyExists): decided again on the winner, no call', async () => {
    const winner = claim({ holder: userGroup({ namespace: 'team-b', uid: 'uid-b' }) });
    const h = harness({ ug: userGroup(), claims: new Map([[CLAIM, winner]]), claimCache: new Map() });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdClaimed));
    expect(h.claims.get(CLAIM)).toBe(winner);
  });

  it('an install older than claims: a never-synced duplicate waits for the synced UserGroup of its namespace to claim', async () => {
    const ug = userGroup();
    const synced = userGroup({ name: 'acme-old', uid: 'uid-old', status: { syncedHash: 'sha256:x' } });
    const h = harness({ ug, others: [synced], claims: new Map() });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.DuplicateUserGroupId));
    expect(h.claims.size).toBe(0);
  });
});

describe('adoption: the first sync finds the group already at the service', () => {
  it('created: no adoption', async () => {
    const h = harness({ ug: userGroup(), created: true, adoption: 'Refuse' });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    expect(h.statuses.at(-1)?.adoption).toBeUndefined();
  });

  it('Rotate: adopted, and the token rotated before anything is stored', async () => {
    const h = harness({ ug: userGroup(), created: false, adoption: 'Rotate' });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ service: { PUT: 1, POST: 1 }, secret: 'tok-r1', events: { 'Normal Synced': 1, 'Normal Adopted': 1 }, ready: 'Synced' });
    // Protocol: Rotate rotates before anything is stored, so a crash in between repeats the adoption, never skips its rotation.
    expect(h.order('POST', 'create Secret')).toEqual(['POST', 'create Secret']);
    expect(h.writes.map((w) => w.token)).toEqual([h.serviceToken()]);
    expect(h.serviceToken()).toBe('tok-r1');
    expect(h.statuses.at(-1)?.adoption).toEqual({ adoptedAt: '2026-11-22T01:00:00Z', tokenRotated: true });
  });

  it('Rotate with a rotation request pending: one rotation serves both, the request is marked handled', async () => {
    const h = harness({ ug: userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' } }), created: false, adoption: 'Rotate' });
    await h.reconcile();
    expect(h.calls.filter((c) => c === 'POST')).toHaveLength(1);
    expect(h.writes.at(-1)?.annotations[ROTATION_HANDLED_ANNOTATION]).toBe('r1');
    expect(h.statuses.at(-1)?.rotation?.lastHandledRequest).toBe('r1');
  });

  it('Keep: adopted with its token', async () => {
    const h = harness({ ug: userGroup(), created: false, adoption: 'Keep' });
    await h.reconcile();
    expect(h.outcome()).toEqual({ ...FIRST_SYNC, events: { 'Normal Synced': 1, 'Normal Adopted': 1 } });
    expect(h.statuses.at(-1)?.adoption).toEqual({ adoptedAt: '2026-11-22T01:00:00Z', tokenRotated: false });
  });

  // Issue 31: "no indicator" used to count as "already there", which made every new group an adoption against a
  // service that names the field otherwise. Unknown is now neither: no adoption, and the policy keeps its safe side.
  it('no readable created indicator, Keep: not an adoption, a Warning says so, the token stored', async () => {
    const h = harness({ ug: userGroup(), created: undefined, adoption: 'Keep' });
    await h.reconcile();
    expect(h.outcome()).toEqual({ ...FIRST_SYNC, events: { 'Normal Synced': 1, 'Warning CreatedIndicatorUnknown': 1 } });
    expect(h.statuses.at(-1)?.adoption).toBeUndefined();
  });

  it('no readable created indicator, Rotate: rotated before anything is stored (the group may have existed), not an adoption', async () => {
    const h = harness({ ug: userGroup(), created: undefined, adoption: 'Rotate' });
    await h.reconcile();
    expect(h.outcome()).toEqual({
      service: { PUT: 1, POST: 1 },
      secret: 'tok-r1',
      events: { 'Normal Synced': 1, 'Warning CreatedIndicatorUnknown': 1 },
      ready: 'Synced',
    });
    // Protocol: rotated before anything is stored (as an adoption with Rotate).
    expect(h.order('POST', 'create Secret')).toEqual(['POST', 'create Secret']);
    expect(h.writes.map((w) => w.token)).toEqual(['tok-r1']);
    expect(h.statuses.at(-1)?.adoption).toBeUndefined();
  });

  it('no readable created indicator, Refuse: refused like an adoption (it cannot be ruled out), the message says why', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), created: undefined, adoption: 'Refuse' });
    await h.reconcile();
    expect(h.outcome()).toEqual({ ...refused(Reason.AdoptionRefused), service: { PUT: 1 } });
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
    expect(h.writes).toEqual([]);
    expect(h.claims.size).toBe(0);
    expect(h.statuses.at(-1)?.conditions?.[0]?.message).toContain('no created indicator the operator can read');
  });

  it('Refuse: no token stored, the claim released, AdoptionRefused', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), created: false, adoption: 'Refuse' });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.outcome()).toEqual({ ...refused(Reason.AdoptionRefused), service: { PUT: 1 } });
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
    expect(h.writes).toEqual([]);
    expect(h.claims.size).toBe(0);
  });

  it('Refuse, already refused for this generation: no claim and no call again (a restart does not repeat the PUT)', async () => {
    const refused = {
      observedGeneration: 1,
      conditions: [
        {
          type: 'Ready',
          status: 'False' as const,
          reason: Reason.AdoptionRefused,
          message: 'refused',
          lastTransitionTime: '2026-11-22T00:30:00Z',
          observedGeneration: 1,
        },
      ],
    };
    const h = harness({ ug: userGroup({ status: refused }), claims: new Map(), created: false, adoption: 'Refuse' });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.calls).toEqual([]);
  });

  it('not an adoption when this UserGroup synced this request on this account before (a Secret of an earlier version, without a record)', async () => {
    const ug = userGroup({ status: { syncedHash: syncedHashOf(userGroup()), lastSyncTime: '2026-11-22T00:00:00Z' } });
    const legacy = secret('uid-acme', 'tok-1');
    const h = harness({ ug, cached: legacy, live: legacy, created: false, adoption: 'Refuse' });
    await h.reconcile();
    // Unsealed: re-read with a PUT (never a POST with it), then sealed; no adoption, nothing refused.
    expect(h.outcome()).toEqual({ service: { PUT: 1 }, secret: 'tok-1', events: { 'Normal Synced': 1 }, ready: 'Synced' });
    expect(h.secret()?.metadata.annotations[TOKEN_RECORD_ANNOTATION]).toBeDefined();
    expect(h.status()?.adoption).toBeUndefined();
  });

  it("not an adoption when a Secret it owns carries this account's record (a crash before the status write)", async () => {
    const ug = userGroup();
    const h = harness({ ug, cached: sealedSecret(ug, 'tok-1'), live: sealedSecret(ug, 'tok-1'), created: false, adoption: 'Refuse' });
    await h.reconcile();
    expect(h.calls).not.toContain('status AdoptionRefused');
  });
});

describe('the token record: nothing a tenant writes into its Secret is believed', () => {
  it('a planted token with its sha256 annotation "fixed" is never sent: PUT for the own id, then POST with that token', async () => {
    const ug = userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' }, status: { syncedHash: syncedHashOf(userGroup()) } });
    const real = sealedSecret(ug, 'tok-1');
    const victim = 'tok-victim';
    const planted: ObservedSecret = {
      ...real,
      data: { token: Buffer.from(victim).toString('base64') },
      metadata: { ...real.metadata, annotations: { ...real.metadata.annotations, [TOKEN_SHA256_ANNOTATION]: sha256Hex(victim) } },
    };
    const h = harness({ ug, cached: planted, live: planted });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // The fake service rejects a POST with any token but the group's own current one: a POST with the victim's would show as a failure.
    expect(h.outcome()).toEqual(REQUESTED_ROTATION);
    // Protocol: the planted token is not believed, so the token to rotate comes from the PUT; the rotation's slot
    // before its intent, spent once the intent is written; the intent before the POST, the new token after it.
    expect(h.order('PUT', 'replace Secret', 'POST')).toEqual(['PUT', 'replace Secret', 'POST', 'replace Secret']);
    expect(h.order('rotation budget', 'replace Secret', 'rotation budget spent')).toEqual([
      'rotation budget',
      'replace Secret',
      'rotation budget spent',
      'replace Secret',
    ]);
    expect(h.serviceToken()).toBe('tok-r1');
    expect(h.writes.map((w) => w.token)).not.toContain(victim);
    expect(h.writes.at(-1)?.token).toBe('tok-r1');
  });

  it('a forged rotation-handled mark does not suppress a requested rotation', async () => {
    const ug = userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' }, status: { syncedHash: syncedHashOf(userGroup()) } });
    const real = sealedSecret(ug, 'tok-1');
    const forged: ObservedSecret = {
      ...real,
      metadata: { ...real.metadata, annotations: { ...real.metadata.annotations, [ROTATION_HANDLED_ANNOTATION]: 'r1' } },
    };
    const h = harness({ ug, cached: forged, live: forged });
    await h.reconcile();
    expect(h.calls).toContain('POST');
    expect(h.serviceToken()).toBe('tok-r1');
  });

  it('an intact record: a restart makes no call at all', async () => {
    const ug = userGroup({
      status: {
        syncedHash: syncedHashOf(userGroup()),
        lastSyncTime: '2026-11-22T00:59:00Z',
        observedGeneration: 1,
        tokenSecretName: 'acme',
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Synced',
            message: 'user group synced; token in Secret acme',
            lastTransitionTime: '2026-11-22T00:59:00Z',
            observedGeneration: 1,
          },
        ],
      },
    });
    const h = harness({ ug, cached: sealedSecret(ug, 'tok-1'), live: sealedSecret(ug, 'tok-1') });
    await h.reconcile();
    expect(h.calls).toEqual([]);
  });
});

describe('an id the rules bind to one namespace: held without a claim', () => {
  /** The benchmark's kind of rule: namespace "ns" by name, any id; and one for team-b's own ids. */
  const BINDING = [
    clusterService('shared', [{ namespaces: ['ns'], userGroupIds: { prefix: '' } }]),
    clusterService('b', [{ namespaces: ['team-b'], userGroupIds: { prefix: 'b.' } }]),
  ];
  /** An admin's later rule that also gives ID to team-b. */
  const WIDENED = [...BINDING, clusterService('wide', [{ namespaces: ['team-b'], userGroupIds: { prefix: '' } }])];

  it('a controller that sees every namespace syncs with no claim written: the PUT is the first effect', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), clusterServices: BINDING, seesAllNamespaces: true });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual(FIRST_SYNC);
    expect(h.claims.size).toBe(0);
    expect(ready(h)?.reason).toBe('Synced');
  });

  it('a controller that sees part of the namespaces (--namespaces or sharding) claims, rules or not', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), clusterServices: BINDING, seesAllNamespaces: false });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
  });

  it("a namespace's own UserGroupService claims (no rule binds its account's ids)", async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), clusterServices: BINDING, seesAllNamespaces: true, ownAccount: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
  });

  it('rules that give the id to two namespaces: claimed as before', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), clusterServices: WIDENED, seesAllNamespaces: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
  });

  it('a claim from before still decides: held by another namespace, UserGroupIdClaimed, no call', async () => {
    const claims = new Map([[CLAIM, claim({ holder: userGroup({ namespace: 'team-b', uid: 'uid-b' }) })]]);
    const h = harness({ ug: userGroup(), claims, clusterServices: BINDING, seesAllNamespaces: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdClaimed));
    expect(h.claims.get(CLAIM)?.spec.namespace).toBe('team-b');
  });

  it('two UserGroups of the namespace with the id: the one that synced holds it, the other is a duplicate, no call, no claim', async () => {
    const synced = userGroup({ name: 'acme-z', uid: 'uid-z', creationTimestamp: '2026-11-22T00:30:00Z', status: { syncedHash: 'sha256:x' } });
    const h = harness({ ug: userGroup(), others: [synced], claims: new Map(), clusterServices: BINDING, seesAllNamespaces: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.DuplicateUserGroupId));
    expect(ready(h)?.message).toContain('ns/acme-z');
    expect(h.claims.size).toBe(0);
  });

  it('...neither synced: the older holds it (creation, then name)', async () => {
    const older = userGroup({ name: 'acme-z', uid: 'uid-z', creationTimestamp: '2026-11-21T00:00:00Z' });
    const h = harness({ ug: userGroup(), others: [older], claims: new Map(), clusterServices: BINDING, seesAllNamespaces: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.DuplicateUserGroupId));
    const younger = userGroup({ name: 'acme-z', uid: 'uid-z', creationTimestamp: '2026-11-23T00:00:00Z' });
    const h2 = harness({ ug: userGroup(), others: [younger], claims: new Map(), clusterServices: BINDING, seesAllNamespaces: true });
    await h2.reconcile();
    expect(h2.outcome()).toEqual(FIRST_SYNC);
  });

  it('the rules widened to team-b while ns holds the id by the old ones: team-b writes the claim for ns, then UserGroupIdClaimed, no call', async () => {
    const holder = userGroup({ status: { syncedHash: 'sha256:x' } });
    const ug = userGroup({ namespace: 'team-b', name: 'thief', uid: 'uid-thief', creationTimestamp: '2026-11-21T00:00:00Z' });
    const h = harness({ ug, others: [holder], claims: new Map(), clusterServices: WIDENED, seesAllNamespaces: true });
    expect(await h.reconcile()).toEqual({ kind: 'done' });
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdClaimed));
    expect(h.claims.get(CLAIM)?.spec).toEqual({ userGroupId: ID, account: ACCOUNT, namespace: 'ns', userGroup: { name: 'acme', uid: 'uid-acme' } });
  });

  it('...also when the holder is suspended (its Secret still has the token)', async () => {
    const holder = userGroup({ suspend: true, status: { syncedHash: 'sha256:x' } });
    const ug = userGroup({ namespace: 'team-b', name: 'thief', uid: 'uid-thief' });
    const h = harness({ ug, others: [holder], claims: new Map(), clusterServices: WIDENED, seesAllNamespaces: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(refused(Reason.UserGroupIdClaimed));
    expect(h.claims.get(CLAIM)?.spec.namespace).toBe('ns');
  });

  it('...and the holder itself, reconciled after the widening, claims for itself and syncs', async () => {
    const h = harness({ ug: userGroup(), claims: new Map(), clusterServices: WIDENED, seesAllNamespaces: true });
    await h.reconcile();
    expect(h.outcome()).toEqual(FIRST_SYNC);
    // Protocol: the claim before the first call, so the apiserver decides which namespace holds the id before the service hears of it.
    expect(h.order('create Claim', 'PUT')).toEqual(['create Claim', 'PUT']);
    expect(h.claims.get(CLAIM)?.spec.namespace).toBe('ns');
  });
});
