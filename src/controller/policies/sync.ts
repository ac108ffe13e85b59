// Sync policy: what the PUT carries, whether one is needed (a change, a missing or untrusted Secret, the periodic
// resync), and whether a usergroup.dev/sync-requested-at value asks for one (pure; the steps are usergroup/sync*.ts).
import type { UserGroup, UserGroupSpec } from '../../api/usergroup.js';
import type { UpsertRequest } from '../../service/types.js';
import { buildUpsertBody } from '../../service/upsert-body.js';
import { canonicalJson, sha256Hex, uidFraction } from '../hash.js';
import type { SecretInspection } from './token-secret.js';

export function upsertRequestFor(spec: UserGroupSpec): UpsertRequest {
  return {
    userGroupId: spec.userGroupId,
    name: spec.name,
    ...(spec.mapping !== undefined ? { mapping: spec.mapping } : {}),
    ...(spec.properties !== undefined ? { properties: spec.properties } : {}),
  };
}

/** Identifies what was last synced: the exact request body and the connection it went to. */
export function syncHash(request: UpsertRequest, connectionId: string): string {
  return `sha256:${sha256Hex(canonicalJson({ body: buildUpsertBody(request), connection: connectionId }))}`;
}

export type SyncReason = 'never-synced' | 'request-changed' | 'secret-missing' | 'secret-unreadable' | 'secret-kept' | 'resync';
export type SyncDecision = { readonly kind: 'skip' } | { readonly kind: 'upsert'; readonly why: SyncReason };

export interface SyncInputs {
  readonly status: UserGroup['status'];
  readonly desiredHash: string;
  readonly secret: SecretInspection;
  readonly resyncDue: boolean;
}

/**
 * Whether a PUT is needed. The service has no read operation, so a PUT is also how
 * we get the token back: needed whenever the Secret cannot vouch for it.
 */
export function decideSync({ status, desiredHash, secret, resyncDue }: SyncInputs): SyncDecision {
  if (status.syncedHash === undefined) return { kind: 'upsert', why: 'never-synced' };
  if (status.syncedHash !== desiredHash) return { kind: 'upsert', why: 'request-changed' };
  if (secret.state === 'missing') return { kind: 'upsert', why: 'secret-missing' };
  // Kept from a deleted UserGroup: the PUT tells whether its token is still the group's (usergroup/sync-at-service.ts adoptIfFound).
  if (secret.state === 'kept') return { kind: 'upsert', why: 'secret-kept' };
  if (secret.state === 'owned' && !secret.trusted) return { kind: 'upsert', why: 'secret-unreadable' };
  if (resyncDue) return { kind: 'upsert', why: 'resync' };
  return { kind: 'skip' };
}

/**
 * When the next periodic re-sync is due: lastSyncTime + period, plus up to 10 %
 * jitter derived from the uid so that 10,000 groups synced together spread out,
 * and a restart does not move anyone's schedule.
 */
export function nextResyncAt(lastSyncTime: string | undefined, uid: string, periodMs: number): number | undefined {
  if (!lastSyncTime) return undefined;
  const last = Date.parse(lastSyncTime);
  if (Number.isNaN(last)) return undefined;
  return last + periodMs + Math.floor(periodMs * 0.1 * uidFraction(uid));
}

/**
 * A sync request: a new value of the usergroup.dev/sync-requested-at annotation asks for one PUT of the group now,
 * even when status.syncedHash says nothing changed (someone changed the group at the service; the service has no
 * read, so only a PUT repairs it before the periodic resync). Like a rotation request (Flux's
 * reconcile.fluxcd.io/requestedAt), a value is handled once: status.lastHandledSyncRequest records it.
 */
export type SyncRequestDecision =
  /** No request, or the status records it handled. */
  | { readonly kind: 'none' }
  /** A PUT this reconcile makes anyway (spec changed, Secret missing, resync due, a rotation to settle) answers it. */
  | { readonly kind: 'ride'; readonly value: string }
  /** Only the request asks for a PUT: it costs a slot of the namespace's sync-request budget. */
  | { readonly kind: 'put'; readonly value: string };

/**
 * `requested`: the annotation's value; `handled`: status.lastHandledSyncRequest; `putPlanned`: the plan already
 * PUTs for another reason. No annotation: nothing, whatever else is planned (no extra work per group).
 */
export function decideSyncRequest(requested: string | undefined, handled: string | undefined, putPlanned: boolean): SyncRequestDecision {
  if (requested === undefined || requested === handled) return { kind: 'none' };
  return putPlanned ? { kind: 'ride', value: requested } : { kind: 'put', value: requested };
}

/** The value to record as handled after a reconcile that ends synced: the request, once a PUT answered it. */
export function handledSyncRequest(decision: SyncRequestDecision, putMade: boolean, previous: string | undefined): string | undefined {
  return decision.kind !== 'none' && putMade ? decision.value : previous;
}
