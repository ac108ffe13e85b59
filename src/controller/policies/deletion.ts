// Deletion policy: spec.deletionPolicy's finalizers and what a deletion does (pure; the step is usergroup/finalize.ts).
import type { Adoption } from '../../api/clusterusergroupservice.js';
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
 * suspended. The UserGroup gets it before its first service call (finalizerBeforeCall), or here once a token is held
 * (its Secret exists and carries a record); the Secret gets it once it holds the token. Everything else loses it.
 * The UserGroup keeps it while no token is held yet: a PUT may have handed one out that no Secret keeps
 * (finalizeDeletion then learns it). A Secret deleted while its UserGroup lives (a refusal revoked it, a tenant
 * deleted it) is let go, and the UserGroup's with it, unless its namespace is going: then the UserGroup's deletion
 * is on its way and needs the token. With policy Retain and no finalizer anywhere (the default) nothing changes: no
 * write.
 */
export function decideLiveFinalizers(input: LiveFinalizerInputs): LiveFinalizers {
  const wants = wantsFinalizer(input.policy, input.disabled);
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
  const letGo = !wants || current?.terminating === true;
  const userGroup: FinalizerChange = held && !input.userGroupFinalized ? 'add' : letGo && input.userGroupFinalized && !keepForNamespace ? 'remove' : undefined;
  return { userGroup, currentSecret, staleSecrets: input.staleFinalized > 0 ? 'remove' : undefined };
}

export interface BeforeCallInputs {
  readonly policy: PolicyView | undefined;
  readonly userGroupFinalized: boolean;
  /** This reconcile's plan calls the service (a PUT, or a POST with the held token). */
  readonly callsService: boolean;
  /** --rotate-on-delete=false. */
  readonly disabled?: boolean;
}

/**
 * For a UserGroup that is not being deleted, before this reconcile's first service call: whether the UserGroup's
 * finalizer must be written first. A PUT hands out a token (a first one creates the group), and the finalizer is
 * what makes a deletion rotate it: in place before the call, a deletion at any moment after it (the answer on its
 * way, the controller down before the Secret is written) still rotates. Read from the cache: no request once it is
 * there, none for Retain.
 */
export function finalizerBeforeCall(input: BeforeCallInputs): boolean {
  return input.callsService && !input.userGroupFinalized && wantsFinalizer(input.policy, input.disabled);
}

function wantsFinalizer(policy: PolicyView | undefined, disabled: boolean | undefined): boolean {
  return policy?.policy === 'Rotate' && !policy.suspend && disabled !== true;
}

/** Why a deletion lets go without a call (or, after a learning PUT, without the POST). */
export type SkipReason =
  'retain' | 'disabled' | 'suspended' | 'invalid-spec' | 'refused' | 'not-claimed' | 'no-token' | 'follower' | 'never-created' | 'not-adopted';

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
  /**
   * No token record of ours at all: the token Secret is missing, or holds no record. The
   * UserGroup's finalizer went on before its first PUT, so that PUT may have handed out a token no Secret keeps.
   */
  readonly unrecorded?: boolean;
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
  /** No token held: one PUT /api/user to learn the current one (the service has no read), then afterDeletionLearn. */
  | { readonly kind: 'learn'; readonly remainingMs: number }
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
  // A record that does not vouch for the data (a tenant's edit, another account's seal) is no reason to call.
  if (!input.trustedToken && input.unrecorded !== true) return { kind: 'skip', why: 'no-token' };
  const remainingMs = input.limitMs - input.elapsedMs;
  if (remainingMs <= 0) return { kind: 'abandon', why: 'timeout' };
  return input.trustedToken ? { kind: 'rotate', remainingMs } : { kind: 'learn', remainingMs };
}

export interface LearnedInputs {
  /** The learning PUT's created indicator (undefined: the service did not say). */
  readonly created: boolean | undefined;
  /** The connection's adoption rules for a group already there. */
  readonly adoption: Adoption;
  /** Status records this very request as synced on this connection: the group is this UserGroup's. */
  readonly syncedBefore: boolean;
}

/**
 * After the deletion's learning PUT. A group that PUT created did not exist before it: no PUT of ours reached the
 * service, no token of it left that call, and the one it returned is dropped unread, so there is nothing to revoke
 * (the group stays: the service has no delete). A group already there is rotated once, unless the rules refuse to
 * adopt a group already there and nothing shows it is ours: it may be someone else's, whose token a POST would take
 * away.
 */
export function afterDeletionLearn(input: LearnedInputs): { readonly kind: 'rotate' } | { readonly kind: 'skip'; readonly why: SkipReason } {
  if (input.created === true) return { kind: 'skip', why: 'never-created' };
  if (input.adoption === 'Refuse' && !input.syncedBefore) return { kind: 'skip', why: 'not-adopted' };
  return { kind: 'rotate' };
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
  return { kind: 'retry', afterMs: deletionRetryAfter(remainingMs, answer === 'deferred' ? deferredForMs : undefined) };
}

/** When a deletion's failed call (or one the connection deferred for `deferredForMs`) goes again: within what is left of the limit. */
export function deletionRetryAfter(remainingMs: number, deferredForMs?: number): number {
  return Math.max(IMMEDIATE_RETRY_MS, Math.min(deferredForMs ?? DELETION_RETRY_MS, remainingMs));
}
