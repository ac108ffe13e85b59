import type { UserGroup } from '../api/usergroup.js';
import { buildUpsertBody } from '../service/client.js';
import type { UpsertRequest } from '../service/types.js';
import type { UserGroupSpec } from '../api/usergroup.js';
import { canonicalJson, sha256Hex } from './hash.js';
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

export type SyncReason = 'never-synced' | 'request-changed' | 'secret-missing' | 'secret-unreadable' | 'resync';
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
  if (secret.state === 'owned' && !secret.trusted) return { kind: 'upsert', why: 'secret-unreadable' };
  if (resyncDue) return { kind: 'upsert', why: 'resync' };
  return { kind: 'skip' };
}

export type RotationDecision =
  | { readonly kind: 'none' }
  /** The Secret already records this request as handled (written with the new token); only status lags. */
  | { readonly kind: 'record'; readonly value: string }
  /** Rotate: POST with the held token. */
  | { readonly kind: 'rotate'; readonly value: string }
  /**
   * A rotation for this value may have reached the service before we crashed: a PUT
   * tells. A token that differs from the held one means it did; otherwise rotate.
   */
  | { readonly kind: 'recover'; readonly value: string };

export function decideRotation(requested: string | undefined, secret: SecretInspection, statusHandled: string | undefined): RotationDecision {
  if (requested === undefined) return { kind: 'none' };
  const owned = secret.state === 'owned' ? secret : undefined;
  // Either record is enough to call a value handled: rotating twice is the failure we must never cause.
  if (statusHandled === requested) return { kind: 'none' };
  if (owned?.handled === requested) return { kind: 'record', value: requested };
  if (owned?.pending === requested) return { kind: 'recover', value: requested };
  return { kind: 'rotate', value: requested };
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
  const fraction = Number.parseInt(sha256Hex(uid).slice(0, 8), 16) / 0xffffffff;
  return last + periodMs + Math.floor(periodMs * 0.1 * fraction);
}
