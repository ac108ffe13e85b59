// Writes the token Secret through its port, and turns a refusal or a Secret that appeared into the step's ending.
import type { ObservedSecret } from '../../api/secret.js';
import type { SecretApplyResult } from '../../kube/secret-writer.js';
import { secretMatches } from '../../kube/secret-writer.js';
import { SecretValue } from '../../service/secret-value.js';
import { desiredSecret, inspectSecret, type SecretContent } from '../policies/token-secret.js';
import type { ReconcileContext } from './context.js';
import { readLive } from './observe-secret.js';
import { failed, next, secretWriteRefused, type Outcome, type Step } from './outcome.js';
import type { Held } from './plan.js';

/**
 * A create met a Secret neither cache knew of (a watch lagging behind a creation). A lost race like any other
 * conflict, and the steps pass it on as one; the step runner alone (reconcile.ts) knows it by this very value and,
 * the first time, decides again from a live read instead.
 */
const SECRET_APPEARED: Outcome = { ends: true, report: undefined, result: failed('lost-race') };

/** Whether a reconcile's ending is a Secret that appeared (see SECRET_APPEARED). */
export function secretAppeared(ending: Outcome): boolean {
  return ending === SECRET_APPEARED;
}

/**
 * Writes the token Secret as `content` says, unless `current` (what is stored now, as far as we know) already is
 * that: the apply helper compares before it writes. With only the token's digest at hand (no call was made and the
 * cache has no data), an unchanged Secret costs nothing; one whose metadata must change has its token read first.
 */
export async function writeTokenSecret(
  ctx: ReconcileContext,
  { spec, connection }: Pick<Held, 'spec' | 'connection'>,
  content: SecretContent,
  current: ObservedSecret | undefined,
): Promise<Step<ObservedSecret>> {
  const { keeper } = ctx.ports.namespaces.get(ctx.ug.metadata.namespace);
  let desired = desiredSecret(ctx.ug.metadata, spec, content, connection.seal, keeper);
  if (!(content.token instanceof SecretValue)) {
    if (current && secretMatches(current, desired)) return next(current);
    // Metadata must change and only the digest is at hand: read the token it stands for.
    const live = inspectSecret(await readLive(ctx, { spec }), ctx.ug.metadata, spec, connection.seal);
    if (live.state !== 'owned' || !live.token || live.resourceVersion !== current?.metadata.resourceVersion)
      return { ends: true, report: undefined, result: failed('lost-race') };
    desired = desiredSecret(ctx.ug.metadata, spec, { ...content, token: live.token }, connection.seal, keeper);
  }
  ctx.signal?.throwIfAborted();
  const applied: SecretApplyResult = await ctx.ports.secrets.apply(desired, current);
  switch (applied.kind) {
    case 'unchanged':
    case 'created':
    case 'updated':
      return next(applied.secret);
    case 'conflict':
      ctx.log.info({ secret: spec.tokenSecret.name, conflict: applied.conflict }, 'token Secret changed while we worked; deciding again');
      return applied.conflict === 'exists' ? SECRET_APPEARED : { ends: true, report: undefined, result: failed('lost-race') };
    case 'refused':
      return secretWriteRefused(spec.tokenSecret.name, applied.error);
  }
}
