// The claim policy (policies/claim.ts): who may use a userGroupId on an account, decided from the claim as last seen.
import { describe, expect, it } from 'vitest';
import { claimName } from '../../../src/api/claim.js';
import { claimHolderAlive, decideClaim, holderByRules, holdsBefore, mayHoldId, onRulesSide, type ClaimInputs } from '../../../src/controller/policies/claim.js';
import { ACCOUNT, claim, userGroup } from '../../support/reconciler-harness.js';

const me = userGroup();
const { namespace, name, uid } = me.metadata;
const inputs = (over: Partial<ClaimInputs> = {}): ClaimInputs => ({
  claim: undefined,
  me: me.metadata,
  userGroupId: 'acme-1',
  account: ACCOUNT,
  holderAlive: false,
  syncedSibling: undefined,
  ...over,
});
const MY_SPEC = { userGroupId: 'acme-1', account: ACCOUNT, namespace, userGroup: { name, uid } };

describe('decideClaim', () => {
  it('no claim yet: this UserGroup creates it', () => {
    expect(decideClaim(inputs())).toEqual({ kind: 'create', spec: MY_SPEC });
  });

  it('no claim, but a UserGroup of this namespace synced the id already (an install older than claims): it claims first', () => {
    expect(decideClaim(inputs({ syncedSibling: `${namespace}/older` }))).toEqual({ kind: 'duplicate', holder: `${namespace}/older` });
  });

  it('the claim names this UserGroup (by uid): held', () => {
    const held = claim({ holder: me });
    expect(decideClaim(inputs({ claim: held }))).toEqual({ kind: 'held', claim: held });
  });

  it('another UserGroup of this namespace holds it: a duplicate while it lives, taken over once it is gone', () => {
    const other = claim({ holder: userGroup({ name: 'other' }) });
    expect(decideClaim(inputs({ claim: other, holderAlive: true }))).toEqual({ kind: 'duplicate', holder: `${namespace}/other` });
    expect(decideClaim(inputs({ claim: other, holderAlive: false }))).toEqual({ kind: 'take-over', claim: other, spec: MY_SPEC });
  });

  it('another namespace holds the id on this account: refused, whether its holder lives or not', () => {
    const elsewhere = claim({ holder: userGroup({ namespace: 'team-b' }) });
    for (const holderAlive of [true, false]) {
      expect(decideClaim(inputs({ claim: elsewhere, holderAlive }))).toEqual({ kind: 'claimed-elsewhere', claimName: claimName(ACCOUNT, 'acme-1') });
    }
  });

  it('a claim whose spec names another id or account is never taken for this one', () => {
    for (const other of [claim({ holder: me, userGroupId: 'acme-2' }), claim({ holder: me, account: 'account-b' })]) {
      expect(decideClaim(inputs({ claim: other }))).toEqual({ kind: 'claimed-elsewhere', claimName: claimName(ACCOUNT, 'acme-1') });
    }
  });
});

describe('who may hold an id without a claim', () => {
  const synced = { syncedHash: 'h' };
  it('a suspended UserGroup holds the id only if it synced; a deleted or invalid one, or me, never', () => {
    expect(mayHoldId(userGroup({ name: 'other' }), me.metadata)).toBe(true);
    expect(mayHoldId(userGroup({ name: 'other', suspend: true }), me.metadata)).toBe(false);
    expect(mayHoldId(userGroup({ name: 'other', suspend: true, status: synced }), me.metadata)).toBe(true);
    expect(mayHoldId(userGroup({ name: 'other', deletionTimestamp: '2026-11-23T00:00:00Z' }), me.metadata)).toBe(false);
    expect(mayHoldId(me, me.metadata)).toBe(false);
  });

  it("a claim's holder is alive while the same uid exists, not being deleted", () => {
    const held = claim({ holder: me });
    expect(claimHolderAlive(held, me)).toBe(true);
    expect(claimHolderAlive(held, undefined)).toBe(false);
    expect(claimHolderAlive(held, userGroup({ uid: 'uid-recreated' }))).toBe(false);
    expect(claimHolderAlive(held, userGroup({ deletionTimestamp: '2026-11-23T00:00:00Z' }))).toBe(false);
  });

  it('the one that synced holds first, then the oldest, then by key', () => {
    const older = userGroup({ name: 'older', creationTimestamp: '2026-11-01T00:00:00Z' });
    const syncedNewer = userGroup({ name: 'zz', creationTimestamp: '2026-11-30T00:00:00Z', status: synced });
    const sameAge = userGroup({ name: 'aa' });
    expect([me, older, syncedNewer, sameAge].sort(holdsBefore).map((u) => u.metadata.name)).toEqual(['zz', 'older', 'aa', 'acme']);
  });

  it('bound: the first of my namespace holds; not bound: the first of the other namespaces', () => {
    const mine = userGroup({ name: 'first', creationTimestamp: '2026-11-01T00:00:00Z' });
    const elsewhere = userGroup({ name: 'first', namespace: 'other-ns', creationTimestamp: '2026-11-01T00:00:00Z' });
    expect(onRulesSide(mine, me, true)).toBe(true);
    expect(onRulesSide(elsewhere, me, true)).toBe(false);
    expect(onRulesSide(elsewhere, me, false)).toBe(true);
    expect(holderByRules(me, true, [mine])).toEqual({ bound: true, holder: mine });
    expect(holderByRules(me, false, [elsewhere])).toEqual({ bound: false, holder: elsewhere });
    expect(holderByRules(me, true, [])).toEqual({ bound: true, holder: undefined });
    expect(holderByRules(me, true, [userGroup({ name: 'young', creationTimestamp: '2026-12-01T00:00:00Z' })]).holder).toBeUndefined();
  });
});
