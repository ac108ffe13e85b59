// Step 8, store: write the token Secret as it should be now, and remove the ones of an earlier name.
import { sha256Hex } from '../hash.js';
import { next, type Progress, type ReconcileContext, type Step, writeTokenSecret } from '../usergroup-step.js';
import { Events } from '../usergroup-messages.js';
import type { Plan } from './plan.js';

/** Writes the token Secret as it should be now, and removes token Secrets of an earlier spec.tokenSecret.name. */
export async function storeToken(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { spec, connection, sync } = plan;
  // No call was made and the Secret holds the sealed token: its digest is enough to tell whether only
  // metadata (bookkeeping, the user's labels) must change, and then the token is read to write it.
  const sealedDigest = plan.owned?.trusted ? plan.owned.tokenSha256 : undefined;
  const content = progress.token ?? (sealedDigest !== undefined ? { sha256: sealedDigest } : undefined);
  if (!content) throw new Error('no token to store');
  // A token's age counts from when the operator obtained it; a Secret written before that was recorded keeps
  // going without it until its token changes (no write for every Secret on upgrade). A Secret kept from a deleted
  // UserGroup counts as held: taken back with its token, nothing changed for its consumers.
  const held = plan.owned ?? plan.kept;
  const changed = progress.token !== undefined && sha256Hex(progress.token.reveal()) !== held?.tokenSha256;
  // To the millisecond: the issue time names the token (restart targets), and two rotations may share a second.
  const issuedAt = changed ? new Date(ctx.ports.clock.now()).toISOString() : held?.issuedAt;
  const stored = await writeTokenSecret(ctx, plan, { token: content, ...progress.book, issuedAt }, progress.secret);
  if (stored.ends) return stored;
  // A renamed tokenSecret leaves a copy of a live token behind: remove the old Secrets we own.
  for (const stale of ctx.ports.secretCache.owned(ctx.ug).filter((s) => s.metadata.name !== spec.tokenSecret.name)) {
    await ctx.ports.secrets.delete(stale);
    ctx.log.info({ secret: stale.metadata.name }, 'deleted the token Secret of an earlier spec.tokenSecret.name');
  }
  const { group } = progress;
  if (progress.reclaimedFrom !== undefined) {
    ctx.ports.events.emit(ctx.ug, Events.reclaimed(spec.tokenSecret.name, progress.reclaimedFrom));
  } else if (group) {
    const restored = sync.kind === 'upsert' && (sync.why === 'secret-missing' || sync.why === 'secret-unreadable');
    const secret = spec.tokenSecret.name;
    ctx.ports.events.emit(
      ctx.ug,
      Events.synced(restored ? { restored, secret } : { restored, created: group.created, connection: connection.description, secret }),
    );
  }
  return next({ ...progress, secret: stored.value, stored: { issuedAt: issuedAt ?? plan.issuedAt, changed } });
}
