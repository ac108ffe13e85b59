// A refusal by the rules or a claim: report it and revoke any token Secret held from before.
import { objectKey } from '../../api/meta.js';
import type { UserGroupSpec } from '../../api/usergroup.js';
import type { Reason } from '../policies/conditions.js';
import type { ReconcileContext } from './context.js';
import { Messages } from './event-messages.js';
import { blocked, type Outcome } from './outcome.js';

/**
 * The rules or a claim say this namespace may not hold this group: report it, and delete any token Secret this
 * UserGroup holds from before (a rule or a claim changed), so no token stays where it no longer belongs.
 */
export async function refused(ctx: ReconcileContext, reason: Reason, message: string, spec: UserGroupSpec): Promise<Outcome> {
  const revoked = await revokeTokenSecrets(ctx, spec);
  return blocked(ctx, reason, Messages.revoked(message, revoked));
}

async function revokeTokenSecrets(ctx: ReconcileContext, spec: UserGroupSpec): Promise<string[]> {
  const { metadata } = ctx.ug;
  const { secretCache, secrets } = ctx.ports;
  const owned = new Map(secretCache.owned(ctx.ug).map((s) => [s.metadata.name, s]));
  // The owned-Secret cache selects by a label its tenant can remove: look at the named Secret itself too.
  const seen = secretCache.seen(objectKey({ namespace: metadata.namespace, name: spec.tokenSecret.name }));
  if (!owned.has(spec.tokenSecret.name) && (seen.cached || seen.otherExists)) {
    const named = await secrets.read(metadata.namespace, spec.tokenSecret.name);
    if (named?.metadata.ownerReferences.some((o) => o.controller && o.uid === metadata.uid)) owned.set(named.metadata.name, named);
  }
  for (const secret of owned.values()) {
    ctx.signal?.throwIfAborted();
    await secrets.delete(secret);
    ctx.log.info({ secret: secret.metadata.name }, 'deleted a token Secret the namespace may no longer hold');
  }
  return [...owned.keys()];
}
