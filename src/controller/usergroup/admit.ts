// Step 1, admit: a valid spec, not suspended, and a connection its namespace may use.
import { claimName } from '../../api/claim.js';
import { findReadyCondition, type UserGroupSpec } from '../../api/usergroup.js';
import { Reason } from '../policies/conditions.js';
import type { Connection, Resolution } from '../connections.js';
import { blocked, deferred, DONE, next, type Outcome, type ReconcileContext, refused, type Step } from '../usergroup-step.js';
import { Messages } from '../usergroup-messages.js';

/** A UserGroup that may go on to claim its id: a valid spec and the connection its namespace may use. */
export interface Admitted {
  readonly spec: UserGroupSpec;
  readonly connection: Connection;
}

/**
 * The preconditions, before anything is written: a valid spec, not suspended, a connection the rules allow, no
 * refusal already reported for this generation, and a connection that can be called now (else no claim is taken).
 */
export async function admit(ctx: ReconcileContext): Promise<Step<Admitted>> {
  const { ug } = ctx;
  if (!ug.spec.ok) return blocked(ctx, Reason.InvalidSpec, ug.spec.error);
  const spec = ug.spec.value;
  if (spec.suspend) return { ends: true, report: { status: 'False', reason: Reason.Suspended, message: Messages.suspended, fields: {} }, result: DONE };

  const resolution = await resolveConnection(ctx, spec);
  if (!resolution.ok) {
    // The tenant rules say no: the namespace may not hold this group's token either. A rule change requeues us.
    if (refusedByRules(resolution)) {
      return refused(ctx, resolution.reason, resolution.message, spec);
    }
    // A missing UserGroupService is watched; a missing API-key Secret is not, so poll for it, slowly.
    return blocked(ctx, resolution.reason, resolution.message, 'connection-unresolved');
  }
  const { connection } = resolution;
  const stop = alreadyDecided(ctx, spec, connection);
  return stop ?? next({ spec, connection });
}

/** The connection the spec names, past the tenant rules: where the live path and a deletion (finalize.ts) both begin. */
export function resolveConnection(ctx: ReconcileContext, spec: UserGroupSpec): Promise<Resolution> {
  return ctx.ports.connections.resolve(ctx.ug.metadata.namespace, spec.serviceRef, spec.userGroupId);
}

/** The tenant rules refused the namespace or the id (not a connection that is missing or invalid). */
export function refusedByRules(resolution: Extract<Resolution, { ok: false }>): boolean {
  return resolution.reason === Reason.NamespaceNotAllowed || resolution.reason === Reason.UserGroupIdNotAllowed;
}

/** Nothing to do before a claim: a refusal already reported, or a connection that cannot be called now. */
function alreadyDecided(ctx: ReconcileContext, spec: UserGroupSpec, connection: Connection): Outcome | undefined {
  // Refused adoption is final for this generation and policy: no claim and no PUT on every restart to hear it again.
  const ready = findReadyCondition(ctx.previous);
  if (connection.adoption === 'Refuse' && ready?.reason === Reason.AdoptionRefused && ready.observedGeneration === ctx.ug.metadata.generation) {
    return { ends: true, report: undefined, result: DONE };
  }
  // A connection that cannot be called now gets no claim written either: a flood of UserGroups on a dead
  // connection then costs one status write each, and they are woken when it may be called again.
  // (Only before a first claim or sync: a synced UserGroup that needs no call must not be reported as failing; one
  // whose id the rules bind to its namespace has no claim.)
  if (ctx.previous.syncedHash !== undefined || ctx.ports.claims.cached(claimName(connection.account, spec.userGroupId)) !== undefined) return undefined;
  const unavailable = ctx.calls.unavailable(connection);
  return unavailable && deferred(unavailable, 'sync', connection);
}
