// Step 3, observe the Secret: the token Secret from the caches (or live), judged by policies/token-secret.ts.
import { objectKey } from '../../api/meta.js';
import type { ObservedSecret } from '../../api/secret.js';
import type { SecretValue } from '../../service/secret-value.js';
import type { RotationDecision } from '../policies/rotation.js';
import { inspectSecret, keptSecret, type KeptSecret, type SecretInspection } from '../policies/token-secret.js';
import { readLive, type Connected, type ReconcileContext } from '../usergroup-step.js';
import { mustReadData, rotationFor, type OwnedSecret } from './plan.js';

/**
 * Where the Secret comes from: the caches (the usual), or a live read — a create met a Secret neither cache knew
 * of (a watch lagging behind a creation), and the reconcile decides again from what is really there.
 */
export type SecretSource = 'cache' | 'live';

/**
 * The token Secret as far as this reconcile must know it. The cache has no data: it is had (recalled from this
 * process's own writes, else read) when the held token is needed or the metadata may be someone else's change —
 * plan.ts's mustReadData decides which.
 */
export async function observeSecret(ctx: ReconcileContext, held: Connected, source: SecretSource): Promise<SecretInspection> {
  const { spec, connection } = held;
  const key = objectKey({ namespace: ctx.ug.metadata.namespace, name: spec.tokenSecret.name });
  // Neither cache knowing the name means no Secret exists, unless a watch lags behind a creation: then our
  // create meets AlreadyExists before any rotation or Secret write, and the reconcile comes back here live.
  const seen = ctx.ports.secretCache.seen(key);
  const observed = source === 'live' || (!seen.cached && seen.otherExists) ? await readLive(ctx, held) : seen.cached;
  const inspection = inspectSecret(observed, ctx.ug.metadata, spec, connection.seal);
  if (inspection.state === 'foreign' && observed) return keptFor(ctx, held, observed) ?? inspection;
  if (inspection.state !== 'owned') return inspection;
  const owned = inspection;
  const known = seen.known(owned.resourceVersion);
  const rotation = (): RotationDecision => rotationFor(ctx.ug, spec, owned, ctx.settings, ctx.ports.clock.now(), connection.fleet).rotation;
  const had = mustReadData(owned, known.verified, rotation) ? await withData(ctx, held, owned, known.verified ? known.token : undefined) : owned;
  if (had.state === 'owned' && had.token) known.remember(had.resourceVersion, had.token);
  return had;
}

/**
 * A Secret another UserGroup controlled, or none does: kept for this one from a deleted UserGroup of this namespace
 * (deletionPolicy Retain), if its sealed record says so (policies/token-secret.ts keptSecret). Whether it is taken back
 * unchanged or overwritten by an adoption is the adopt step's decision.
 */
function keptFor(ctx: ReconcileContext, { spec, connection }: Connected, observed: ObservedSecret): KeptSecret | undefined {
  const { namespace } = ctx.ug.metadata;
  const alive = (owner: { name: string; uid: string }): boolean =>
    ctx.ports.userGroups.get(objectKey({ namespace, name: owner.name }))?.metadata.uid === owner.uid;
  return keptSecret(observed, namespace, spec, connection.seal, alive);
}

/** The Secret with its data: the token this process wrote at this very version (checked against the sealed digest), else a read. */
async function withData(ctx: ReconcileContext, held: Connected, owned: OwnedSecret, recalled: SecretValue | undefined): Promise<SecretInspection> {
  const { spec, connection } = held;
  if (recalled) {
    const data = { [spec.tokenSecret.key]: Buffer.from(recalled.reveal(), 'utf8').toString('base64') };
    const known = inspectSecret({ ...owned.secret, data }, ctx.ug.metadata, spec, connection.seal);
    if (known.state === 'owned' && known.token) return known;
  }
  return inspectSecret(await readLive(ctx, held), ctx.ug.metadata, spec, connection.seal);
}
