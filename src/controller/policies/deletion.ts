// Deletion policy: spec.deletionPolicy's finalizers and what a deletion does (pure; the step is usergroup/finalize.ts).
import type { DeletionPolicy } from '../../api/usergroup.js';
import { DELETION_RETRY_MS, IMMEDIATE_RETRY_MS } from '../retry-policy.js';

/**
 * spec.deletionPolicy as pure decisions, tested without I/O (test/unit/policies/deletion.test.ts): which objects
 * carry the rotate-on-delete finalizer while they live, and what a deletion holding it does. The step that acts on
 * them is controller/usergroup/finalize.ts.
 */

/** The UserGroup's wish, as far as finalizers go: undefined when its spec is invalid. */
export interface PolicyView {
  readonly policy: DeletionPolicy;
  readonly suspend: boolean;
}

/** A token Secret of the UserGroup, as the metadata-only cache shows it. */
export interface SecretFinalizerView {
  /** It carries the operator's finalizer. */
  readonly finalized: boolean;
  /** It has a deletionTimestamp. */
  readonly terminating: boolean;
  /** It carries a token record (the seal itself is checked when the token is used, at deletion). */
  readonly recorded: boolean;
}

export interface LiveFinalizerInputs {
  readonly policy: PolicyView | undefined;
  readonly userGroupFinalized: boolean;
  /** The Secret spec.tokenSecret.name names, if the cache has it. */
  readonly current: SecretFinalizerView | undefined;
  /** Other token Secrets this UserGroup controls (an earlier spec.tokenSecret.name) that carry the finalizer. */
  readonly staleFinalized: number;
  /** The namespace is being deleted: its Secrets' finalizers are kept for the UserGroup's own deletion. */
  readonly namespaceTerminating: boolean;
  /**
   * The operator runs with --rotate-on-delete=false (before a rollback to a release that does not know the
   * finalizer, or an uninstall): no object keeps it, whatever its policy.
   */
  readonly disabled?: boolean;
}

export type FinalizerChange = 'add' | 'remove' | undefined;

export interface LiveFinalizers {
  readonly userGroup: FinalizerChange;
  readonly currentSecret: FinalizerChange;
  readonly staleSecrets: 'remove' | undefined;
}

/**
 * For a UserGroup that is not being deleted. The finalizer goes only on objects that ask for it: policy Rotate, not
 * suspended, and a token held (its Secret exists and carries a record); the Secret gets it first, so the UserGroup
 * never waits for a token that its Secret does not keep. Everything else loses it. A Secret deleted while its
 * UserGroup lives (a refusal revoked it, a tenant deleted it) is let go, unless its namespace is going: then the
 * UserGroup's deletion is on its way and needs the token. With policy Retain and no finalizer anywhere (the default)
 * nothing changes: no write.
 */
export function decideLiveFinalizers(input: LiveFinalizerInputs): LiveFinalizers {
  const wants = input.policy?.policy === 'Rotate' && !input.policy.suspend && input.disabled !== true;
  const current = input.current;
  const held = wants && current !== undefined && !current.terminating && current.recorded;
  let currentSecret: FinalizerChange;
  if (current?.finalized) {
    const keepForNamespace = current.terminating && input.namespaceTerminating && wants;
    if (!(held || keepForNamespace)) currentSecret = 'remove';
  } else if (held) {
    currentSecret = 'add';
  }
  // A namespace on its way out keeps the UserGroup's finalizer for its own deletion, unless the operator gives them all up.
  const keepForNamespace = input.namespaceTerminating && input.disabled !== true;
  const userGroup: FinalizerChange = held && !input.userGroupFinalized ? 'add' : !held && input.userGroupFinalized && !keepForNamespace ? 'remove' : undefined;
  return { userGroup, currentSecret, staleSecrets: input.staleFinalized > 0 ? 'remove' : undefined };
}

/** Why a deletion lets go without a call. */
export type SkipReason = 'retain' | 'disabled' | 'suspended' | 'invalid-spec' | 'refused' | 'not-claimed' | 'no-token' | 'follower';

/** Why a deletion gave up on its rotation. */
export type AbandonReason = 'timeout' | 'connection-unresolved';

export interface DeletionInputs {
  readonly policy: PolicyView | undefined;
  /** How the connection resolved: the tenant rules refused it, it cannot be resolved, or it can be called. */
  readonly connection: 'refused' | 'unresolved' | 'resolved';
  /** This UserGroup (by uid) holds the UserGroupClaim of its id on that account. */
  readonly claimHeld: boolean;
  /** The token Secret's token under a record this connection sealed. */
  readonly trustedToken: boolean;
  /** Since metadata.deletionTimestamp. */
  readonly elapsedMs: number;
  readonly limitMs: number;
  /** The operator runs with --rotate-on-delete=false: every deletion lets go without a call. */
  readonly disabled?: boolean;
  /**
   * This cluster is a fleet's follower (ClusterUserGroupService spec.fleet.role Follower): the token it holds is the
   * one every other cluster of the account serves, so its deletion here (a cluster drained or decommissioned)
   * leaves the token alone.
   */
  readonly follower?: boolean;
}

export type DeletionDecision =
  /** Remove the finalizers, no call: nothing to rotate or not ours to rotate. */
  | { readonly kind: 'skip'; readonly why: SkipReason }
  /** One POST /api/user with the held token, then remove the finalizers. */
  | { readonly kind: 'rotate'; readonly remainingMs: number }
  /** Remove the finalizers without the rotation: a Warning Event says why. */
  | { readonly kind: 'abandon'; readonly why: AbandonReason };

/**
 * For a UserGroup being deleted that holds the finalizer. Decided before the token is read when the answer does not
 * need it (the caller passes trustedToken false until it has read it: skip reasons other than no-token come first).
 * The limit is measured from the deletionTimestamp, so a restart or a requeue never extends it.
 */
export function decideDeletion(input: DeletionInputs): DeletionDecision {
  if (!input.policy) return { kind: 'skip', why: 'invalid-spec' };
  if (input.policy.policy !== 'Rotate') return { kind: 'skip', why: 'retain' };
  if (input.disabled === true) return { kind: 'skip', why: 'disabled' };
  if (input.policy.suspend) return { kind: 'skip', why: 'suspended' };
  if (input.connection === 'refused') return { kind: 'skip', why: 'refused' };
  if (input.connection === 'unresolved') return { kind: 'abandon', why: 'connection-unresolved' };
  if (input.follower === true) return { kind: 'skip', why: 'follower' };
  if (!input.claimHeld) return { kind: 'skip', why: 'not-claimed' };
  if (!input.trustedToken) return { kind: 'skip', why: 'no-token' };
  const remainingMs = input.limitMs - input.elapsedMs;
  return remainingMs <= 0 ? { kind: 'abandon', why: 'timeout' } : { kind: 'rotate', remainingMs };
}

/** What the service's answer to the deletion's POST means. */
export type RotationAnswer = 'rotated' | 'not-current' | 'failed' | 'deferred';

/**
 * After the POST: rotated, or the service says the held token is not current (it is already dead: done); otherwise
 * come back within what is left of the limit — then the next decideDeletion gives up.
 */
export function afterDeletionRotation(
  answer: RotationAnswer,
  remainingMs: number,
  deferredForMs?: number,
): { readonly kind: 'release'; readonly rotated: 'now' | 'already-invalid' } | { readonly kind: 'retry'; readonly afterMs: number } {
  if (answer === 'rotated') return { kind: 'release', rotated: 'now' };
  if (answer === 'not-current') return { kind: 'release', rotated: 'already-invalid' };
  const wait = answer === 'deferred' ? (deferredForMs ?? DELETION_RETRY_MS) : DELETION_RETRY_MS;
  return { kind: 'retry', afterMs: Math.max(IMMEDIATE_RETRY_MS, Math.min(wait, remainingMs)) };
}
