// The claim policy (policies/claim.ts): who may use a userGroupId on an account, decided from the claim as last seen.
import { describe, expect, it } from 'vitest';
import { claimName } from '../../../src/api/claim.js';
import { decideClaim, type ClaimInputs } from '../../../src/controller/policies/claim.js';
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
