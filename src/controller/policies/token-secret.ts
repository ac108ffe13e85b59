// Token-Secret policy: what an observed token Secret is worth (its sealed record checked) and what it must be (pure).
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import {
  API_VERSION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_ISSUED_AT_ANNOTATION,
  TOKEN_RECORD_ANNOTATION,
  TOKEN_SHA256_ANNOTATION,
  GROUP,
  USERGROUP_KIND,
  USERGROUP_LABEL,
  USERGROUP_UID_ANNOTATION,
} from '../../api/constants.js';
import type { ObjectMeta, OwnerReference } from '../../api/meta.js';
import { secretValue, type ObservedSecret } from '../../api/secret.js';
import type { UserGroupSpec } from '../../api/usergroup.js';
import { SecretValue } from '../../service/secret-value.js';
import { canonicalJson, sha256Hex } from '../hash.js';

/**
 * Computes the MAC of a token record under the connection's record key (see Connection.seal). Tenants can
 * write their token Secrets, so a token, a rotation-handled or a rotation-pending mark counts only when the
 * MAC over all of them, and over the UserGroup and Secret they belong to, is the operator's own.
 */
export type Seal = (message: string) => string;

/**
 * The seal of one account: records are MACed under a key derived from its API key (labelled for token records), so
 * only who holds that key can make one, and a record made on one account does not pass on another.
 */
export function recordSeal(apiKey: SecretValue): Seal {
  const recordKey = createHmac('sha256', apiKey.reveal()).update('usergroup-operator token record v1').digest();
  return (message) => createHmac('sha256', recordKey).update(message).digest('hex');
}

/** What the token Secret tells us, judged against the UserGroup that should own it. */
export type SecretInspection =
  | { readonly state: 'missing' }
  /** A Secret of that name exists but this UserGroup does not control it: never touched. */
  | { readonly state: 'foreign'; readonly ownerKind: string | undefined }
  | {
      readonly state: 'owned';
      /**
       * The record's MAC vouches for the bookkeeping and for a token of digest `tokenSha256`, and the data
       * is either that token (read) or not read (metadata only: intact unless its resourceVersion moved
       * since the operator last wrote or checked it; the caller reads the data when it doubts that).
       */
      readonly trusted: boolean;
      /** The stored token: only when the data was read and is the sealed token. */
      readonly token: SecretValue | undefined;
      /** Rotation bookkeeping, only from a trusted record. */
      readonly handled: string | undefined;
      readonly pending: string | undefined;
      /** When the operator obtained the stored token; absent on Secrets written before it was recorded. */
      readonly issuedAt: string | undefined;
      readonly tokenSha256: string | undefined;
      readonly resourceVersion: string;
      readonly secret: ObservedSecret;
    }
  /**
   * A token Secret kept from a UserGroup of this namespace that was deleted under deletionPolicy Retain: no live
   * UserGroup controls it, and its record, sealed under this connection's key for this userGroupId, Secret name and
   * key, vouches for the token's digest and the bookkeeping. Not this UserGroup's yet: the adopt step decides
   * whether it takes the Secret back (usergroup/sync-at-service.ts adoptIfFound).
   */
  | {
      readonly state: 'kept';
      readonly tokenSha256: string;
      /** The last rotation request the deleted UserGroup handled, and when its token was obtained (pending marks are not taken over). */
      readonly handled: string | undefined;
      readonly issuedAt: string | undefined;
      /** The deleted UserGroup's name, for the Event. */
      readonly from: string;
      readonly secret: ObservedSecret;
    };

/** A kept token Secret (see SecretInspection). */
export type KeptSecret = Extract<SecretInspection, { state: 'kept' }>;

export function inspectSecret(secret: ObservedSecret | undefined, owner: ObjectMeta, spec: UserGroupSpec, seal: Seal): SecretInspection {
  if (!secret) return { state: 'missing' };
  const controller = secret.metadata.ownerReferences.find((o) => o.controller);
  if (controller?.uid !== owner.uid) return { state: 'foreign', ownerKind: controller?.kind };
  const sealed = sealedRecord(secret, owner, spec.userGroupId, spec.tokenSecret.key, seal);
  const stored = secret.data === undefined ? undefined : secretValue(secret, spec.tokenSecret.key);
  const token = sealed !== undefined && stored !== undefined && sha256Hex(stored) === sealed ? new SecretValue(stored) : undefined;
  const trusted = sealed !== undefined && (secret.data === undefined || token !== undefined);
  const { annotations } = secret.metadata;
  return {
    state: 'owned',
    trusted,
    token,
    handled: trusted ? annotations[ROTATION_HANDLED_ANNOTATION] : undefined,
    pending: trusted ? annotations[ROTATION_PENDING_ANNOTATION] : undefined,
    issuedAt: trusted ? annotations[TOKEN_ISSUED_AT_ANNOTATION] : undefined,
    tokenSha256: trusted ? sealed : undefined,
    resourceVersion: secret.metadata.resourceVersion,
    secret,
  };
}

/**
 * Whether a Secret this UserGroup does not control is one kept for it: not being deleted, no live controller
 * (none, or a UserGroup that `alive` says is gone: the garbage collector removes that reference a little after the
 * deletion), and a record this connection sealed for the deleted UserGroup (its name and uid as the Secret names
 * them), this namespace, this userGroupId and this Secret's name and key. Metadata is enough: the MAC covers the
 * token's digest, and whoever takes the Secret back writes the token the service returns. A tenant can copy such a
 * Secret only within its own namespace, and a record binds the namespace and the id, so nothing else passes.
 */
export function keptSecret(
  secret: ObservedSecret,
  namespace: string,
  spec: UserGroupSpec,
  seal: Seal,
  alive: (owner: Pick<OwnerReference, 'name' | 'uid'>) => boolean,
): KeptSecret | undefined {
  const { metadata } = secret;
  if (metadata.deletionTimestamp !== undefined || metadata.namespace !== namespace) return undefined;
  const controller = metadata.ownerReferences.find((o) => o.controller);
  if (controller && (controller.kind !== USERGROUP_KIND || controller.apiVersion.split('/')[0] !== GROUP)) return undefined;
  const name = controller?.name ?? metadata.labels[USERGROUP_LABEL];
  const uid = controller?.uid ?? metadata.annotations[USERGROUP_UID_ANNOTATION];
  if (name === undefined || uid === undefined || alive({ name, uid })) return undefined;
  const former = { ...metadata, name, uid, namespace };
  const tokenSha256 = sealedRecord(secret, former, spec.userGroupId, spec.tokenSecret.key, seal);
  if (tokenSha256 === undefined) return undefined;
  const { annotations } = metadata;
  return {
    state: 'kept',
    tokenSha256,
    handled: annotations[ROTATION_HANDLED_ANNOTATION],
    issuedAt: annotations[TOKEN_ISSUED_AT_ANNOTATION],
    from: name,
    secret,
  };
}

/**
 * Whether an owned Secret of this UserGroup (the current one, or one left from an earlier spec.tokenSecret)
 * carries a record this connection sealed: proof that the operator synced this UserGroup on this account.
 * The Secret's own one data key stands in for the spec, which may have moved on since: the Secret must
 * have been read with its data.
 */
export function holdsRecord(secret: ObservedSecret, owner: ObjectMeta, userGroupId: string, seal: Seal): boolean {
  const [key, ...more] = Object.keys(secret.data ?? {});
  if (key === undefined || more.length > 0) return false;
  const sealed = sealedRecord(secret, owner, userGroupId, key, seal);
  const stored = secretValue(secret, key);
  return sealed !== undefined && stored !== undefined && sha256Hex(stored) === sealed;
}

/**
 * The token digest the Secret's record was sealed over, with its bookkeeping and this Secret's identity;
 * undefined when there is no record or its MAC is not ours. Reads metadata only.
 */
function sealedRecord(
  secret: ObservedSecret,
  owner: Pick<ObjectMeta, 'namespace' | 'name' | 'uid'>,
  userGroupId: string,
  key: string,
  seal: Seal,
): string | undefined {
  const { annotations } = secret.metadata;
  const recorded = annotations[TOKEN_RECORD_ANNOTATION];
  const tokenSha256 = annotations[TOKEN_SHA256_ANNOTATION];
  if (recorded === undefined || tokenSha256 === undefined) return undefined;
  const content = {
    tokenSha256,
    handled: annotations[ROTATION_HANDLED_ANNOTATION],
    pending: annotations[ROTATION_PENDING_ANNOTATION],
    issuedAt: annotations[TOKEN_ISSUED_AT_ANNOTATION],
  };
  return safeEqual(recorded, seal(recordMessage(owner, userGroupId, secret.metadata.name, key, content))) ? tokenSha256 : undefined;
}

/** What the record's MAC covers: the token (by digest) and its bookkeeping, bound to this UserGroup, Secret and id. */
function recordMessage(
  owner: Pick<ObjectMeta, 'namespace' | 'name' | 'uid'>,
  userGroupId: string,
  secretName: string,
  key: string,
  content: { tokenSha256: string; handled: string | undefined; pending: string | undefined; issuedAt: string | undefined },
): string {
  return canonicalJson({
    v: 1,
    userGroup: { namespace: owner.namespace, name: owner.name, uid: owner.uid },
    userGroupId,
    secret: { name: secretName, key },
    tokenSha256: content.tokenSha256,
    handled: content.handled ?? null,
    pending: content.pending ?? null,
    // Only when recorded: records written before it existed keep their MAC.
    ...(content.issuedAt !== undefined ? { issuedAt: content.issuedAt } : {}),
  });
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

const RESERVED_ANNOTATIONS = new Set([
  USERGROUP_UID_ANNOTATION,
  TOKEN_SHA256_ANNOTATION,
  TOKEN_RECORD_ANNOTATION,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_ISSUED_AT_ANNOTATION,
]);

export interface SecretContent {
  /** The token itself, or only its digest when the Secret already holds it and only metadata may change. */
  readonly token: SecretValue | { readonly sha256: string };
  readonly handled: string | undefined;
  readonly pending: string | undefined;
  /** When the token was obtained: set when the token changes, kept while it does not. */
  readonly issuedAt?: string | undefined;
}

/**
 * The whole Secret the operator wants: it owns it, so user labels/annotations come from spec.tokenSecret.
 * Without the token itself (only its digest) it has no data: good for comparing, not for writing.
 *
 * `keeper` (the namespace) is a second owner under deletionPolicy Retain: the garbage collector deletes a dependent
 * only when every owner is gone, so when the UserGroup is deleted it only drops that reference and the Secret stays,
 * with its token, for consumers and for a UserGroup applied again (cert-manager leaves a Certificate's Secret the
 * same way). A Kubernetes mechanism, not a finalizer: it works with no controller running, and an older release
 * that knows nothing of it is not held up by it.
 */
export function desiredSecret(owner: ObjectMeta, spec: UserGroupSpec, content: SecretContent, seal: Seal, keeper?: OwnerReference): V1Secret {
  const annotations: Record<string, string> = {};
  // The operator's own bookkeeping keys are never taken from the user: a copied value could fake a rotation record.
  for (const [k, v] of Object.entries(spec.tokenSecret.annotations)) if (!RESERVED_ANNOTATIONS.has(k)) annotations[k] = v;
  const token = content.token instanceof SecretValue ? content.token.reveal() : undefined;
  const tokenSha256 = token !== undefined ? sha256Hex(token) : (content.token as { sha256: string }).sha256;
  annotations[TOKEN_SHA256_ANNOTATION] = tokenSha256;
  annotations[TOKEN_RECORD_ANNOTATION] = seal(
    recordMessage(owner, spec.userGroupId, spec.tokenSecret.name, spec.tokenSecret.key, {
      tokenSha256,
      handled: content.handled,
      pending: content.pending,
      issuedAt: content.issuedAt,
    }),
  );
  if (content.handled !== undefined) annotations[ROTATION_HANDLED_ANNOTATION] = content.handled;
  if (content.pending !== undefined) annotations[ROTATION_PENDING_ANNOTATION] = content.pending;
  if (content.issuedAt !== undefined) annotations[TOKEN_ISSUED_AT_ANNOTATION] = content.issuedAt;
  annotations[USERGROUP_UID_ANNOTATION] = owner.uid;
  const ownerReferences: OwnerReference[] = [{ apiVersion: API_VERSION, kind: USERGROUP_KIND, name: owner.name, uid: owner.uid, controller: true }];
  if (keeper && spec.deletionPolicy === 'Retain') ownerReferences.push(keeper);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: spec.tokenSecret.name,
      namespace: owner.namespace,
      labels: { ...spec.tokenSecret.labels, [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [USERGROUP_LABEL]: owner.name },
      annotations,
      ownerReferences,
    },
    ...(token !== undefined ? { data: { [spec.tokenSecret.key]: Buffer.from(token, 'utf8').toString('base64') } } : {}),
  };
}
