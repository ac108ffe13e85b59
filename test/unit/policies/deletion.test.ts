// The deletion policy (policies/deletion.ts): which objects keep the rotate-on-delete finalizer, and what a deletion does.
import { describe, expect, it } from 'vitest';
import {
  afterDeletionLearn,
  afterDeletionRotation,
  decideDeletion,
  decideLiveFinalizers,
  finalizerBeforeCall,
  type DeletionInputs,
  type LiveFinalizerInputs,
} from '../../../src/controller/policies/deletion.js';
import { DELETION_RETRY_MS } from '../../../src/controller/retry-policy.js';

const ROTATE = { policy: 'Rotate', suspend: false } as const;
const RETAIN = { policy: 'Retain', suspend: false } as const;
const HELD = { finalized: false, terminating: false, recorded: true } as const;

const live = (over: Partial<LiveFinalizerInputs>): LiveFinalizerInputs => ({
  policy: ROTATE,
  userGroupFinalized: false,
  current: HELD,
  staleFinalized: 0,
  namespaceTerminating: false,
  ...over,
});

describe('decideLiveFinalizers', () => {
  it('Retain with no finalizer anywhere (the default): no write at all', () => {
    expect(decideLiveFinalizers(live({ policy: RETAIN }))).toEqual({ userGroup: undefined, currentSecret: undefined, staleSecrets: undefined });
    expect(decideLiveFinalizers(live({ policy: RETAIN, current: undefined }))).toEqual({
      userGroup: undefined,
      currentSecret: undefined,
      staleSecrets: undefined,
    });
  });

  it('Rotate with a token held: the Secret and the UserGroup get it', () => {
    expect(decideLiveFinalizers(live({}))).toEqual({ userGroup: 'add', currentSecret: 'add', staleSecrets: undefined });
  });

  it('Rotate, both already finalized: nothing to do', () => {
    expect(decideLiveFinalizers(live({ userGroupFinalized: true, current: { ...HELD, finalized: true } }))).toEqual({
      userGroup: undefined,
      currentSecret: undefined,
      staleSecrets: undefined,
    });
  });

  it('Rotate without a token held (no Secret yet, or one without a record): no finalizer', () => {
    expect(decideLiveFinalizers(live({ current: undefined }))).toEqual({ userGroup: undefined, currentSecret: undefined, staleSecrets: undefined });
    expect(decideLiveFinalizers(live({ current: { ...HELD, recorded: false } }))).toEqual({
      userGroup: undefined,
      currentSecret: undefined,
      staleSecrets: undefined,
    });
  });

  it('Rotate, finalized before its first PUT and no token held yet (no Secret, or one without a record): the UserGroup keeps it', () => {
    for (const current of [undefined, { ...HELD, recorded: false }]) {
      expect(decideLiveFinalizers(live({ userGroupFinalized: true, current }))).toEqual({
        userGroup: undefined,
        currentSecret: undefined,
        staleSecrets: undefined,
      });
    }
  });

  it('back to Retain, suspended or an invalid spec: both lose it', () => {
    for (const policy of [RETAIN, { ...ROTATE, suspend: true }, undefined]) {
      expect(decideLiveFinalizers(live({ policy, userGroupFinalized: true, current: { ...HELD, finalized: true } }))).toEqual({
        userGroup: 'remove',
        currentSecret: 'remove',
        staleSecrets: undefined,
      });
    }
  });

  it('a tenant put the finalizer on a Retain UserGroup: removed', () => {
    expect(decideLiveFinalizers(live({ policy: RETAIN, userGroupFinalized: true, current: HELD })).userGroup).toBe('remove');
  });

  it("a Secret deleted while its UserGroup lives (a refusal revoked it) is let go; the UserGroup's finalizer too", () => {
    expect(decideLiveFinalizers(live({ userGroupFinalized: true, current: { ...HELD, finalized: true, terminating: true } }))).toEqual({
      userGroup: 'remove',
      currentSecret: 'remove',
      staleSecrets: undefined,
    });
  });

  it("in a namespace being deleted, both keep it: the UserGroup's own deletion needs the token", () => {
    expect(
      decideLiveFinalizers(live({ userGroupFinalized: true, current: { ...HELD, finalized: true, terminating: true }, namespaceTerminating: true })),
    ).toEqual({ userGroup: undefined, currentSecret: undefined, staleSecrets: undefined });
  });

  it('Secrets of an earlier spec.tokenSecret.name lose it', () => {
    expect(decideLiveFinalizers(live({ userGroupFinalized: true, current: { ...HELD, finalized: true }, staleFinalized: 2 })).staleSecrets).toBe('remove');
  });
});

describe('finalizerBeforeCall', () => {
  it('Rotate, about to call the service without the finalizer: written first', () => {
    expect(finalizerBeforeCall({ policy: ROTATE, userGroupFinalized: false, callsService: true })).toBe(true);
  });

  it('no write: already there (the cache shows it), no call planned, Retain, suspended, an invalid spec, or --rotate-on-delete=false', () => {
    expect(finalizerBeforeCall({ policy: ROTATE, userGroupFinalized: true, callsService: true })).toBe(false);
    expect(finalizerBeforeCall({ policy: ROTATE, userGroupFinalized: false, callsService: false })).toBe(false);
    expect(finalizerBeforeCall({ policy: RETAIN, userGroupFinalized: false, callsService: true })).toBe(false);
    expect(finalizerBeforeCall({ policy: { ...ROTATE, suspend: true }, userGroupFinalized: false, callsService: true })).toBe(false);
    expect(finalizerBeforeCall({ policy: undefined, userGroupFinalized: false, callsService: true })).toBe(false);
    expect(finalizerBeforeCall({ policy: ROTATE, userGroupFinalized: false, callsService: true, disabled: true })).toBe(false);
  });
});

const deleting = (over: Partial<DeletionInputs>): DeletionInputs => ({
  policy: ROTATE,
  connection: 'resolved',
  claimHeld: true,
  trustedToken: true,
  elapsedMs: 1_000,
  limitMs: 300_000,
  ...over,
});

describe('decideDeletion', () => {
  it('rotates a Rotate UserGroup that holds its claim and a trusted token, with what is left of the limit', () => {
    expect(decideDeletion(deleting({}))).toEqual({ kind: 'rotate', remainingMs: 299_000 });
  });

  it('lets go without a call: Retain, suspended, invalid spec, refused by the rules, a claim held elsewhere, no trusted token', () => {
    expect(decideDeletion(deleting({ policy: RETAIN }))).toEqual({ kind: 'skip', why: 'retain' });
    expect(decideDeletion(deleting({ policy: { ...ROTATE, suspend: true } }))).toEqual({ kind: 'skip', why: 'suspended' });
    expect(decideDeletion(deleting({ policy: undefined }))).toEqual({ kind: 'skip', why: 'invalid-spec' });
    expect(decideDeletion(deleting({ connection: 'refused' }))).toEqual({ kind: 'skip', why: 'refused' });
    expect(decideDeletion(deleting({ claimHeld: false }))).toEqual({ kind: 'skip', why: 'not-claimed' });
    expect(decideDeletion(deleting({ trustedToken: false }))).toEqual({ kind: 'skip', why: 'no-token' });
  });

  it('no token record at all (the deletion came between the first PUT and the Secret): learn the token with a PUT, within the limit', () => {
    expect(decideDeletion(deleting({ trustedToken: false, unrecorded: true }))).toEqual({ kind: 'learn', remainingMs: 299_000 });
    expect(decideDeletion(deleting({ trustedToken: false, unrecorded: true, elapsedMs: 300_000 }))).toEqual({ kind: 'abandon', why: 'timeout' });
    // Whoever holds the claim, follows a primary, or is suspended learns nothing either.
    expect(decideDeletion(deleting({ trustedToken: false, unrecorded: true, claimHeld: false }))).toEqual({ kind: 'skip', why: 'not-claimed' });
    expect(decideDeletion(deleting({ trustedToken: false, unrecorded: true, follower: true }))).toEqual({ kind: 'skip', why: 'follower' });
    expect(decideDeletion(deleting({ trustedToken: false, unrecorded: true, policy: { ...ROTATE, suspend: true } }))).toEqual({
      kind: 'skip',
      why: 'suspended',
    });
    // A trusted token held is rotated as it is: no PUT.
    expect(decideDeletion(deleting({ unrecorded: false }))).toEqual({ kind: 'rotate', remainingMs: 299_000 });
  });

  it("a fleet's follower lets a Rotate UserGroup go without a call: the other clusters of the account serve its token", () => {
    expect(decideDeletion(deleting({ follower: true }))).toEqual({ kind: 'skip', why: 'follower' });
    expect(decideDeletion(deleting({ follower: true, elapsedMs: 10_000_000 }))).toEqual({ kind: 'skip', why: 'follower' });
    expect(decideDeletion(deleting({ follower: false }))).toEqual({ kind: 'rotate', remainingMs: 299_000 });
  });

  it('skip reasons win over the limit: no Warning for what needed no call', () => {
    expect(decideDeletion(deleting({ policy: { ...ROTATE, suspend: true }, elapsedMs: 10_000_000 }))).toEqual({ kind: 'skip', why: 'suspended' });
    expect(decideDeletion(deleting({ trustedToken: false, elapsedMs: 10_000_000 }))).toEqual({ kind: 'skip', why: 'no-token' });
  });

  it('gives up once the limit from the deletionTimestamp has passed, or when the connection cannot be resolved', () => {
    expect(decideDeletion(deleting({ elapsedMs: 300_000 }))).toEqual({ kind: 'abandon', why: 'timeout' });
    expect(decideDeletion(deleting({ connection: 'unresolved' }))).toEqual({ kind: 'abandon', why: 'connection-unresolved' });
  });
});

describe('afterDeletionRotation', () => {
  it('rotated, or the token is no longer current (already dead): done', () => {
    expect(afterDeletionRotation('rotated', 1_000)).toEqual({ kind: 'release', rotated: 'now' });
    expect(afterDeletionRotation('not-current', 1_000)).toEqual({ kind: 'release', rotated: 'already-invalid' });
  });

  it('a failure or a deferral comes back within what is left of the limit, never after it', () => {
    expect(afterDeletionRotation('failed', 60_000)).toEqual({ kind: 'retry', afterMs: DELETION_RETRY_MS });
    expect(afterDeletionRotation('failed', 1_200)).toEqual({ kind: 'retry', afterMs: 1_200 });
    expect(afterDeletionRotation('deferred', 60_000, 30_000)).toEqual({ kind: 'retry', afterMs: 30_000 });
    expect(afterDeletionRotation('deferred', 2_000, 30_000)).toEqual({ kind: 'retry', afterMs: 2_000 });
  });
});

describe('afterDeletionLearn', () => {
  it('a group that was there: rotated once', () => {
    for (const created of [false, undefined]) {
      expect(afterDeletionLearn({ created, adoption: 'Keep', syncedBefore: false })).toEqual({ kind: 'rotate' });
      expect(afterDeletionLearn({ created, adoption: 'Rotate', syncedBefore: false })).toEqual({ kind: 'rotate' });
      expect(afterDeletionLearn({ created, adoption: 'Refuse', syncedBefore: true })).toEqual({ kind: 'rotate' });
    }
  });

  it('the PUT created it (no earlier PUT reached the service): nothing to revoke', () => {
    expect(afterDeletionLearn({ created: true, adoption: 'Keep', syncedBefore: false })).toEqual({ kind: 'skip', why: 'never-created' });
  });

  it("Refuse, and nothing shows the group that was there is ours: not rotated (it may be someone else's)", () => {
    for (const created of [false, undefined]) {
      expect(afterDeletionLearn({ created, adoption: 'Refuse', syncedBefore: false })).toEqual({ kind: 'skip', why: 'not-adopted' });
    }
  });
});

describe('--rotate-on-delete=false', () => {
  it('no object keeps the finalizer, whatever its policy, its namespace going or not', () => {
    const finalized = { ...HELD, finalized: true };
    for (const namespaceTerminating of [false, true]) {
      expect(decideLiveFinalizers(live({ disabled: true, userGroupFinalized: true, current: finalized, namespaceTerminating }))).toEqual({
        userGroup: 'remove',
        currentSecret: 'remove',
        staleSecrets: undefined,
      });
    }
    expect(decideLiveFinalizers(live({ disabled: true }))).toEqual({ userGroup: undefined, currentSecret: undefined, staleSecrets: undefined });
  });

  it('a deletion lets go without a call', () => {
    expect(decideDeletion(deleting({ disabled: true }))).toEqual({ kind: 'skip', why: 'disabled' });
  });
});
