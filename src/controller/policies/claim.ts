// Claim policy: who may use a userGroupId on an account (pure; the step that acts on it is usergroup/claim.ts).
import { claimName, type ClaimSpec, type UserGroupClaim } from '../../api/claim.js';
import type { ObjectMeta } from '../../api/meta.js';

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
