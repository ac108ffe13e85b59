import { timingSafeEqual } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import {
  API_VERSION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_RECORD_ANNOTATION,
  TOKEN_SHA256_ANNOTATION,
  USERGROUP_KIND,
  USERGROUP_LABEL,
} from '../api/constants.js';
import { sameStringMap, type ObjectMeta } from '../api/meta.js';
import { secretValue, type ObservedSecret } from '../api/secret.js';
import type { UserGroupSpec } from '../api/usergroup.js';
import { SecretValue } from '../service/secret-value.js';
import { canonicalJson, sha256Hex } from './hash.js';

/**
 * Computes the MAC of a token record under the connection's record key (see Connection.seal). Tenants can
 * write their token Secrets, so a token, a rotation-handled or a rotation-pending mark counts only when the
 * MAC over all of them, and over the UserGroup and Secret they belong to, is the operator's own.
 */
export type Seal = (message: string) => string;

/** What the token Secret tells us, judged against the UserGroup that should own it. */
export type SecretInspection =
  | { readonly state: 'missing' }
  /** A Secret of that name exists but this UserGroup does not control it: never touched. */
  | { readonly state: 'foreign'; readonly ownerKind: string | undefined }
  | {
      readonly state: 'owned';
      /** The stored token, when the record's MAC vouches for it (not edited, not planted). */
      readonly token: SecretValue | undefined;
      /** Rotation bookkeeping, likewise only from a record with a valid MAC. */
      readonly handled: string | undefined;
      readonly pending: string | undefined;
      readonly resourceVersion: string;
      readonly secret: ObservedSecret;
    };

export function inspectSecret(secret: ObservedSecret | undefined, owner: ObjectMeta, spec: UserGroupSpec, seal: Seal): SecretInspection {
  if (!secret) return { state: 'missing' };
  const controller = secret.metadata.ownerReferences.find((o) => o.controller);
  if (!controller || controller.uid !== owner.uid) return { state: 'foreign', ownerKind: controller?.kind };
  const trusted = sealedToken(secret, owner, spec.userGroupId, spec.tokenSecret.key, seal);
  return {
    state: 'owned',
    token: trusted === undefined ? undefined : new SecretValue(trusted),
    handled: trusted === undefined ? undefined : secret.metadata.annotations[ROTATION_HANDLED_ANNOTATION],
    pending: trusted === undefined ? undefined : secret.metadata.annotations[ROTATION_PENDING_ANNOTATION],
    resourceVersion: secret.metadata.resourceVersion,
    secret,
  };
}

/**
 * Whether an owned Secret of this UserGroup (the current one, or one left from an earlier spec.tokenSecret)
 * carries a record this connection sealed: proof that the operator synced this UserGroup on this account.
 * The Secret's own one data key stands in for the spec, which may have moved on since.
 */
export function holdsRecord(secret: ObservedSecret, owner: ObjectMeta, userGroupId: string, seal: Seal): boolean {
  const [key, ...more] = Object.keys(secret.data);
  return key !== undefined && more.length === 0 && sealedToken(secret, owner, userGroupId, key, seal) !== undefined;
}

/** The token under `key`, when the Secret's record was sealed over it, its bookkeeping and this Secret's identity. */
function sealedToken(secret: ObservedSecret, owner: ObjectMeta, userGroupId: string, key: string, seal: Seal): string | undefined {
  const { annotations } = secret.metadata;
  const token = secretValue(secret, key);
  const recorded = annotations[TOKEN_RECORD_ANNOTATION];
  if (!token || recorded === undefined) return undefined;
  const content = { token, handled: annotations[ROTATION_HANDLED_ANNOTATION], pending: annotations[ROTATION_PENDING_ANNOTATION] };
  return safeEqual(recorded, seal(recordMessage(owner, userGroupId, secret.metadata.name, key, content))) ? token : undefined;
}

/** What the record's MAC covers: the token and its bookkeeping, bound to this UserGroup, Secret and id. */
function recordMessage(owner: ObjectMeta, userGroupId: string, secretName: string, key: string, content: { token: string; handled: string | undefined; pending: string | undefined }): string {
  return canonicalJson({
    v: 1,
    userGroup: { namespace: owner.namespace, name: owner.name, uid: owner.uid },
    userGroupId,
    secret: { name: secretName, key },
    tokenSha256: sha256Hex(content.token),
    handled: content.handled ?? null,
    pending: content.pending ?? null,
  });
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

const RESERVED_ANNOTATIONS = new Set([TOKEN_SHA256_ANNOTATION, TOKEN_RECORD_ANNOTATION, ROTATION_HANDLED_ANNOTATION, ROTATION_PENDING_ANNOTATION]);

export interface SecretContent {
  readonly token: SecretValue;
  readonly handled: string | undefined;
  readonly pending: string | undefined;
}

/** The whole Secret the operator wants: it owns it, so user labels/annotations come from spec.tokenSecret. */
export function desiredSecret(owner: ObjectMeta, spec: UserGroupSpec, content: SecretContent, seal: Seal): V1Secret {
  const annotations: Record<string, string> = {};
  // The operator's own bookkeeping keys are never taken from the user: a copied value could fake a rotation record.
  for (const [k, v] of Object.entries(spec.tokenSecret.annotations)) if (!RESERVED_ANNOTATIONS.has(k)) annotations[k] = v;
  const token = content.token.reveal();
  annotations[TOKEN_SHA256_ANNOTATION] = sha256Hex(token);
  annotations[TOKEN_RECORD_ANNOTATION] = seal(recordMessage(owner, spec.userGroupId, spec.tokenSecret.name, spec.tokenSecret.key, { token, handled: content.handled, pending: content.pending }));
  if (content.handled !== undefined) annotations[ROTATION_HANDLED_ANNOTATION] = content.handled;
  if (content.pending !== undefined) annotations[ROTATION_PENDING_ANNOTATION] = content.pending;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: spec.tokenSecret.name,
      namespace: owner.namespace,
      labels: { ...spec.tokenSecret.labels, [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [USERGROUP_LABEL]: owner.name },
      annotations,
      ownerReferences: [
        { apiVersion: API_VERSION, kind: USERGROUP_KIND, name: owner.name, uid: owner.uid, controller: true },
      ],
    },
    data: { [spec.tokenSecret.key]: Buffer.from(content.token.reveal(), 'utf8').toString('base64') },
  };
}

/** True when the observed Secret already is the desired one (no write needed). */
export function secretMatches(observed: ObservedSecret, desired: V1Secret): boolean {
  const meta = desired.metadata ?? {};
  return (
    observed.type === desired.type &&
    sameStringMap(observed.metadata.labels, meta.labels ?? {}) &&
    sameStringMap(observed.metadata.annotations, meta.annotations ?? {}) &&
    sameStringMap(observed.data, desired.data ?? {}) &&
    observed.metadata.ownerReferences.length === 1
  );
}
