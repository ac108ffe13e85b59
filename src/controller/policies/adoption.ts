// Adoption policy: what to do with a group the PUT found at the service (adopt it as the tenant rule says, or take
// back this namespace's own) (pure; the step is usergroup/sync-at-service.ts adoptIfFound).
import type { Adoption, Fleet } from '../../api/clusterusergroupservice.js';

/**
 * What to do with a group the PUT found: nothing (ours, or created just now), what the tenant rule's policy says
 * (it was there before), or the policy's safe side when the answer carried no created indicator we could read.
 */
export type AdoptionDecision =
  { readonly kind: 'none' } | { readonly kind: 'adopt'; readonly policy: Adoption } | { readonly kind: 'unknown'; readonly policy: Adoption };

/**
 * A group the service did not create for this PUT, on an account this UserGroup never synced on, was there
 * before: it is adopted as the policy says — unless this namespace held it all along (`reclaim`: see
 * keptTokenIsCurrent). An answer without a readable created indicator is neither an adoption (that would turn every
 * new group into one) nor a new group (that would skip a real adoption).
 */
export function decideAdoption(created: boolean | undefined, syncedBefore: boolean, policy: Adoption, reclaim = false): AdoptionDecision {
  if (created === true || syncedBefore || reclaim) return { kind: 'none' };
  return created === false ? { kind: 'adopt', policy } : { kind: 'unknown', policy };
}

/**
 * Whether a group found at the service is this namespace's own, re-created: a token Secret kept from a deleted
 * UserGroup of this namespace (sealed for this id on this account) holds the very token the service just returned,
 * and the id was this namespace's all along (its claim, or the rules, held it before this reconcile). Then nobody
 * has rotated it since, and no other namespace held it in between: taking it back gives nobody anything new, and a
 * rotation would only cut off the consumers still reading the kept Secret. Anything else is an adoption.
 */
export function keptTokenIsCurrent(kept: { readonly tokenSha256: string } | undefined, heldBefore: boolean, currentSha256: string): boolean {
  return kept !== undefined && heldBefore && kept.tokenSha256 === currentSha256;
}

/**
 * On an account shared by a fleet, a group found at the service for an id the tenant rules give this namespace is
 * the fleet's own, made by another cluster with the same rules: kept, never rotated (a rotation would cut off that
 * cluster's consumers). This trusts the holders of the account's key and the rules, as Keep does; an entry's
 * Refuse still refuses.
 */
export function adoptionIn(fleet: Fleet | undefined, policy: Adoption): Adoption {
  return fleet !== undefined && policy === 'Rotate' ? 'Keep' : policy;
}
