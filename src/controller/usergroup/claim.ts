import { claimName, type UserGroupClaim } from '../../api/claim.js';
import { objectKey } from '../../api/meta.js';
import { decideClaim, type ClaimInputs } from '../claim-decision.js';
import { Reason } from '../conditions.js';
import type { Admitted } from './admit.js';
import type { ReconcileContext } from './context.js';
import { Messages } from './events.js';
import { blocked, end, failed, next, type Step } from './outcome.js';
import { refused } from './refuse.js';

/**
 * Takes or keeps the UserGroupClaim for (account, userGroupId) before any call: the apiserver decides which
 * namespace holds an id, once, for every deployment of the operator. Gather → decideClaim (pure) → write; a lost
 * race (someone created or took over the claim first) is decided again on what won, once.
 */
export async function holdClaim(ctx: ReconcileContext, { spec, connection }: Admitted): Promise<Step<UserGroupClaim>> {
  const name = claimName(connection.account, spec.userGroupId);
  let claim = ctx.ports.claims.cached(name);
  for (let round = 0; round < 2; round++) {
    const decision = decideClaim(await claimInputs(ctx, claim, spec.userGroupId, connection.account));
    switch (decision.kind) {
      case 'held':
        return next(decision.claim);
      case 'duplicate':
        return end(blocked(ctx, Reason.DuplicateUserGroupId, Messages.duplicate(spec.userGroupId, decision.holder, connection.description)));
      case 'claimed-elsewhere':
        return end(
          await refused(ctx, Reason.UserGroupIdClaimed, Messages.claimedElsewhere(spec.userGroupId, connection.description, decision.claimName), spec),
        );
      case 'create':
      case 'take-over': {
        ctx.signal?.throwIfAborted();
        const written =
          decision.kind === 'create' ? await ctx.ports.claims.create(decision.spec) : await ctx.ports.claims.replace(decision.claim, decision.spec);
        if (written.ok) {
          // Debug: every first sync takes a claim, and its "user group synced" line follows at info.
          ctx.log.debug({ claim: written.claim.metadata.name, how: decision.kind }, 'claimed the userGroupId');
          return next(written.claim);
        }
        claim = await ctx.ports.claims.read(name);
      }
    }
  }
  return end({ report: undefined, result: failed('lost-race') });
}

/** What decideClaim needs, from the caches (and, rarely, the connections of siblings). */
async function claimInputs(ctx: ReconcileContext, claim: UserGroupClaim | undefined, userGroupId: string, account: string): Promise<ClaimInputs> {
  return {
    claim,
    me: ctx.ug.metadata,
    userGroupId,
    account,
    holderAlive: claim !== undefined && holderAlive(ctx, claim),
    syncedSibling: claim === undefined ? await syncedSibling(ctx, userGroupId, account) : undefined,
  };
}

/** The claim's holder still exists: the same UserGroup (uid), in the cache, not being deleted. */
function holderAlive(ctx: ReconcileContext, claim: UserGroupClaim): boolean {
  const holder = ctx.ports.userGroups.get(objectKey({ namespace: claim.spec.namespace, name: claim.spec.userGroup.name }));
  return holder?.metadata.uid === claim.spec.userGroup.uid && !holder.metadata.deletionTimestamp;
}

/**
 * Installs older than claims may have a synced UserGroup and a newer duplicate of it in one namespace, neither
 * holding a claim yet: the synced one must get it, whichever the queue reconciles first.
 */
async function syncedSibling(ctx: ReconcileContext, userGroupId: string, account: string): Promise<string | undefined> {
  if (ctx.previous.syncedHash !== undefined) return undefined;
  const me = ctx.ug.metadata;
  for (const other of ctx.ports.userGroups.withId(userGroupId)) {
    const meta = other.metadata;
    if (meta.uid === me.uid || meta.namespace !== me.namespace || meta.deletionTimestamp) continue;
    if (other.status.syncedHash === undefined || !other.spec.ok) continue;
    const resolved = await ctx.ports.connections.resolve(meta.namespace, other.spec.value.serviceRef, other.spec.value.userGroupId);
    if (resolved.ok && resolved.connection.account === account) return objectKey(meta);
  }
  return undefined;
}
