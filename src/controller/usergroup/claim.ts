// Step 2, claim: hold the UserGroupClaim of the id on the account, or find the tenant rules hold it (policies/claim.ts decides).
import { claimName, type UserGroupClaim } from '../../api/claim.js';
import { objectKey } from '../../api/meta.js';
import type { UserGroup, UserGroupSpec } from '../../api/usergroup.js';
import { claimHolderAlive, decideClaim, holderByRules, mayHoldId, onRulesSide, type ClaimInputs, type RulesHold } from '../policies/claim.js';
import type { Connection } from '../connections.js';
import { Reason } from '../policies/conditions.js';
import type { Admitted } from './admit.js';
import { blocked, failed, next, type ReconcileContext, refused, type Step } from '../usergroup-step.js';
import { Messages } from '../usergroup-messages.js';

/** What holds the id for this UserGroup, and since when. */
export interface IdHold {
  /** Its UserGroupClaim, or `undefined` when the cluster admins' rules bind the id to this namespace and no claim exists (see idHeldByRules). */
  readonly claim: UserGroupClaim | undefined;
  /**
   * The id was this namespace's before this reconcile: its claim existed already (held by this UserGroup, or
   * taken over from one of this namespace that is gone), or the rules bind it here. Only then can a token Secret
   * kept from a deleted UserGroup be taken back: an id claimed just now may have been held elsewhere meanwhile (a
   * cluster admin deleted its claim), and a group last held elsewhere is adopted under the rules' policy.
   */
  readonly heldBefore: boolean;
}

/**
 * Takes or keeps the UserGroupClaim for (account, userGroupId) before any call: the apiserver decides which
 * namespace holds an id, once, for every deployment of the operator. Gather → decideClaim (pure) → write; a lost
 * race (someone created or took over the claim first) is decided again on what won, once. Where the rules alone
 * keep the id in this namespace, no claim is written (idHeldByRules): one write and one watch event less per group.
 */
export async function holdClaim(ctx: ReconcileContext, { spec, connection }: Admitted): Promise<Step<IdHold>> {
  const name = claimName(connection.account, spec.userGroupId);
  let claim = ctx.ports.claims.cached(name);
  if (!claim) {
    const byRules = await idHeldByRules(ctx, spec, connection);
    if (byRules.bound) {
      if (byRules.holder === undefined) return next({ claim: undefined, heldBefore: true });
      return blocked(ctx, Reason.DuplicateUserGroupId, Messages.duplicate(spec.userGroupId, objectKey(byRules.holder.metadata), connection.description));
    }
    // The rules no longer bind the id (an admin just widened them): a UserGroup that held it by the rules of
    // before gets its claim now, before anyone else can take one.
    if (byRules.holder !== undefined) claim = await claimFor(ctx, byRules.holder, spec.userGroupId, connection.account);
  }
  for (let round = 0; round < 2; round++) {
    const decision = decideClaim(await claimInputs(ctx, claim, spec.userGroupId, connection.account));
    switch (decision.kind) {
      case 'held':
        return next({ claim: decision.claim, heldBefore: true });
      case 'duplicate':
        return blocked(ctx, Reason.DuplicateUserGroupId, Messages.duplicate(spec.userGroupId, decision.holder, connection.description));
      case 'claimed-elsewhere':
        return refused(ctx, Reason.UserGroupIdClaimed, Messages.claimedElsewhere(spec.userGroupId, connection.description, decision.claimName), spec);
      case 'create':
      case 'take-over': {
        ctx.signal?.throwIfAborted();
        const written = await ctx.ports.claims.write(decision.kind === 'create' ? undefined : decision.claim, decision.spec);
        if (written.ok) {
          // Debug: every first sync takes a claim, and its "user group synced" line follows at info.
          ctx.log.debug({ claim: written.claim.metadata.name, how: decision.kind }, 'claimed the userGroupId');
          return next({ claim: written.claim, heldBefore: decision.kind === 'take-over' });
        }
        claim = written.claim;
      }
    }
  }
  return { ends: true, report: undefined, result: failed('lost-race') };
}

/**
 * Whether this UserGroup holds its id now, read only (a deletion writes no claim): by its claim, or with no claim by
 * rules that bind the id to its namespace, as its first UserGroup with it.
 */
export async function holdsId(ctx: ReconcileContext, { spec, connection }: Admitted): Promise<boolean> {
  const claim = ctx.ports.claims.cached(claimName(connection.account, spec.userGroupId));
  if (claim) return claim.spec.userGroup.uid === ctx.ug.metadata.uid;
  const byRules = await idHeldByRules(ctx, spec, connection);
  return byRules.bound && byRules.holder === undefined;
}

/**
 * With no claim for the id: whether the rules bind it to this namespace, and which live UserGroup holds it
 * (policies/claim.ts holderByRules decides; policies/id-binding.ts reads the rules).
 */
export async function idHeldByRules(ctx: ReconcileContext, spec: UserGroupSpec, connection: Connection): Promise<RulesHold> {
  if (!ctx.settings.seesAllNamespaces || !connection.shared) return { bound: false, holder: undefined };
  const me = ctx.ug;
  const bound = connection.boundNamespace(spec.userGroupId) === me.metadata.namespace;
  return holderByRules(me, bound, await rivals(ctx, spec.userGroupId, connection.account, (o) => onRulesSide(o, me, bound)));
}

/**
 * Live UserGroups other than this one with the id that `wanted` keeps (checked before their connection is
 * resolved), that may use it on this account now, in the id index's order.
 */
async function rivals(ctx: ReconcileContext, userGroupId: string, account: string, wanted: (other: UserGroup) => boolean): Promise<UserGroup[]> {
  const found: UserGroup[] = [];
  for (const other of ctx.ports.userGroups.withId(userGroupId)) {
    if (!mayHoldId(other, ctx.ug.metadata) || !other.spec.ok || !wanted(other)) continue;
    const resolved = await ctx.ports.connections.resolve(other.metadata.namespace, other.spec.value.serviceRef, userGroupId);
    if (resolved.ok && resolved.connection.account === account) found.push(other);
  }
  return found;
}

/** Writes the claim for another UserGroup that holds the id (or whatever claim won the race). */
async function claimFor(ctx: ReconcileContext, holder: UserGroup, userGroupId: string, account: string): Promise<UserGroupClaim | undefined> {
  ctx.signal?.throwIfAborted();
  const { namespace, name, uid } = holder.metadata;
  const written = await ctx.ports.claims.write(undefined, { userGroupId, account, namespace, userGroup: { name, uid } });
  if (!written.ok) return written.claim;
  ctx.log.info(
    { claim: written.claim.metadata.name, holder: objectKey(holder.metadata) },
    'claimed the userGroupId for the UserGroup that held it by the rules',
  );
  return written.claim;
}

/** What decideClaim needs, from the caches (and, rarely, the connections of siblings). */
async function claimInputs(ctx: ReconcileContext, claim: UserGroupClaim | undefined, userGroupId: string, account: string): Promise<ClaimInputs> {
  return {
    claim,
    me: ctx.ug.metadata,
    userGroupId,
    account,
    holderAlive:
      claim !== undefined && claimHolderAlive(claim, ctx.ports.userGroups.get(objectKey({ namespace: claim.spec.namespace, name: claim.spec.userGroup.name }))),
    syncedSibling: claim === undefined ? await syncedSibling(ctx, userGroupId, account) : undefined,
  };
}

/**
 * Installs older than claims may have a synced UserGroup and a newer duplicate of it in one namespace, neither
 * holding a claim yet: the synced one must get it, whichever the queue reconciles first.
 */
async function syncedSibling(ctx: ReconcileContext, userGroupId: string, account: string): Promise<string | undefined> {
  if (ctx.previous.syncedHash !== undefined) return undefined;
  const { namespace } = ctx.ug.metadata;
  const [sibling] = await rivals(ctx, userGroupId, account, (o) => o.metadata.namespace === namespace && o.status.syncedHash !== undefined);
  return sibling && objectKey(sibling.metadata);
}
