// Claim policy: who may use a userGroupId on an account (pure; the step that acts on it is usergroup/claim.ts).
import { claimName, type ClaimSpec, type UserGroupClaim } from '../../api/claim.js';
import { objectKey, type ObjectMeta } from '../../api/meta.js';
import type { UserGroup } from '../../api/usergroup.js';

export interface ClaimInputs {
  /** The claim for (account, userGroupId), as last seen. */
  readonly claim: UserGroupClaim | undefined;
  readonly me: Pick<ObjectMeta, 'namespace' | 'name' | 'uid'>;
  readonly userGroupId: string;
  readonly account: string;
  /** Whether the claim's holder still exists (same namespace, same uid, not being deleted). */
  readonly holderAlive: boolean;
  /**
   * Another UserGroup of this namespace, with the same id on the same account, that has synced already while
   * this one has not ("namespace/name"). Only from installs older than claims: it should claim first.
   */
  readonly syncedSibling: string | undefined;
}

export type ClaimDecision =
  /** This UserGroup holds the claim. */
  | { readonly kind: 'held'; readonly claim: UserGroupClaim }
  | { readonly kind: 'create'; readonly spec: ClaimSpec }
  /** The namespace's earlier holder is gone: this UserGroup of the same namespace takes the id over. */
  | { readonly kind: 'take-over'; readonly claim: UserGroupClaim; readonly spec: ClaimSpec }
  /** Another live UserGroup of the same namespace holds it (or should): this one waits. */
  | { readonly kind: 'duplicate'; readonly holder: string }
  /** Another namespace holds the id on this account: refused, however its UserGroups come and go. */
  | { readonly kind: 'claimed-elsewhere'; readonly claimName: string };

/**
 * Who may use a userGroupId on an account. The first namespace to claim it keeps it until a cluster admin
 * deletes the claim: neither deleting and re-creating the holder, nor the order of objects, nor which
 * deployment sees which namespace, nor the URL spelling moves an id to another namespace.
 */
export function decideClaim(inputs: ClaimInputs): ClaimDecision {
  const { claim, me, userGroupId, account } = inputs;
  const spec: ClaimSpec = { userGroupId, account, namespace: me.namespace, userGroup: { name: me.name, uid: me.uid } };
  if (!claim) {
    if (inputs.syncedSibling !== undefined) return { kind: 'duplicate', holder: inputs.syncedSibling };
    return { kind: 'create', spec };
  }
  if (claim.spec.namespace !== me.namespace || claim.spec.account !== account || claim.spec.userGroupId !== userGroupId) {
    return { kind: 'claimed-elsewhere', claimName: claimName(account, userGroupId) };
  }
  if (claim.spec.userGroup.uid === me.uid) return { kind: 'held', claim };
  if (inputs.holderAlive) return { kind: 'duplicate', holder: `${claim.spec.namespace}/${claim.spec.userGroup.name}` };
  return { kind: 'take-over', claim, spec };
}

/**
 * Whether another UserGroup can hold an id against `me`: live, valid, and not a suspended one that never synced. A
 * suspended UserGroup still holds what it synced (its Secret keeps the token); one that never synced holds nothing.
 */
export function mayHoldId(other: UserGroup, me: Pick<ObjectMeta, 'uid'>): boolean {
  const meta = other.metadata;
  if (meta.uid === me.uid || meta.deletionTimestamp || !other.spec.ok) return false;
  return !(other.spec.value.suspend && other.status.syncedHash === undefined);
}

/** The claim's holder still exists: the same UserGroup (uid), not being deleted. `holder`: the cached object of the claim's name. */
export function claimHolderAlive(claim: UserGroupClaim, holder: UserGroup | undefined): boolean {
  return holder?.metadata.uid === claim.spec.userGroup.uid && !holder.metadata.deletionTimestamp;
}

/** The order in which UserGroups with one id hold it: one that synced first, then the oldest, then by key. */
export function holdsBefore(a: UserGroup, b: UserGroup): number {
  const synced = Number(b.status.syncedHash !== undefined) - Number(a.status.syncedHash !== undefined);
  if (synced !== 0) return synced;
  const age = a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp);
  return age !== 0 ? age : objectKey(a.metadata).localeCompare(objectKey(b.metadata));
}

/**
 * Whether the tenant rules alone keep an id in `me`'s namespace (no claim needed), and who holds it first.
 *
 * - Only a controller that sees every namespace's UserGroups (no --namespaces, no sharding) leaves claims out: one
 *   that sees part of them could not see a holder elsewhere when the rules widen. A namespace's own
 *   UserGroupService always claims (its account's ids are bound by no rule).
 * - `bound`: the rules give the id to this namespace only. `holder` is then the first of the namespace's UserGroups
 *   with the id (`undefined`: `me`); when not bound, a UserGroup of another namespace that may hold the id by the
 *   rules of before and must get the claim first.
 */
export interface RulesHold {
  readonly bound: boolean;
  readonly holder: UserGroup | undefined;
}

/** Whether `other` competes with `me` for the id under the rules: its namespace when bound, any other one when not. */
export function onRulesSide(other: UserGroup, me: UserGroup, bound: boolean): boolean {
  return (other.metadata.namespace === me.metadata.namespace) === bound;
}

/** Which UserGroup holds the id by the rules, of `me` and its rivals (live, on the same account, onRulesSide). */
export function holderByRules(me: UserGroup, bound: boolean, rivals: readonly UserGroup[]): RulesHold {
  const first = [me, ...rivals].sort(holdsBefore)[0];
  return { bound, holder: first === me ? undefined : first };
}
