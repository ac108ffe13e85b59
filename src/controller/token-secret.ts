import type { V1Secret } from '@kubernetes/client-node';
import {
  API_VERSION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_SHA256_ANNOTATION,
  USERGROUP_KIND,
  USERGROUP_LABEL,
} from '../api/constants.js';
import type { ObjectMeta } from '../api/meta.js';
import { secretValue, type ObservedSecret } from '../api/secret.js';
import type { UserGroupSpec } from '../api/usergroup.js';
import { SecretValue } from '../service/secret-value.js';
import { sha256Hex } from './hash.js';

/** What the token Secret tells us, judged against the UserGroup that should own it. */
export type SecretInspection =
  | { readonly state: 'missing' }
  /** A Secret of that name exists but this UserGroup does not control it: never touched. */
  | { readonly state: 'foreign'; readonly ownerKind: string | undefined }
  | {
      readonly state: 'owned';
      /** The stored token, when it is present and matches the hash written with it (not edited by hand). */
      readonly token: SecretValue | undefined;
      readonly handled: string | undefined;
      readonly pending: string | undefined;
      readonly resourceVersion: string;
      readonly secret: ObservedSecret;
    };

export function inspectSecret(secret: ObservedSecret | undefined, owner: ObjectMeta, spec: UserGroupSpec): SecretInspection {
  if (!secret) return { state: 'missing' };
  const controller = secret.metadata.ownerReferences.find((o) => o.controller);
  if (!controller || controller.uid !== owner.uid) return { state: 'foreign', ownerKind: controller?.kind };
  const value = secretValue(secret, spec.tokenSecret.key);
  const recorded = secret.metadata.annotations[TOKEN_SHA256_ANNOTATION];
  const intact = value !== undefined && value !== '' && recorded === sha256Hex(value);
  return {
    state: 'owned',
    token: intact ? new SecretValue(value) : undefined,
    handled: secret.metadata.annotations[ROTATION_HANDLED_ANNOTATION],
    pending: secret.metadata.annotations[ROTATION_PENDING_ANNOTATION],
    resourceVersion: secret.metadata.resourceVersion,
    secret,
  };
}

const RESERVED_ANNOTATIONS = new Set([TOKEN_SHA256_ANNOTATION, ROTATION_HANDLED_ANNOTATION, ROTATION_PENDING_ANNOTATION]);

export interface SecretContent {
  readonly token: SecretValue;
  readonly handled: string | undefined;
  readonly pending: string | undefined;
}

/** The whole Secret the operator wants: it owns it, so user labels/annotations come from spec.tokenSecret. */
export function desiredSecret(owner: ObjectMeta, spec: UserGroupSpec, content: SecretContent): V1Secret {
  const annotations: Record<string, string> = {};
  // The operator's own bookkeeping keys are never taken from the user: a copied value could fake a rotation record.
  for (const [k, v] of Object.entries(spec.tokenSecret.annotations)) if (!RESERVED_ANNOTATIONS.has(k)) annotations[k] = v;
  annotations[TOKEN_SHA256_ANNOTATION] = sha256Hex(content.token.reveal());
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
    sameMap(observed.metadata.labels, meta.labels ?? {}) &&
    sameMap(observed.metadata.annotations, meta.annotations ?? {}) &&
    sameMap(observed.data, desired.data ?? {}) &&
    observed.metadata.ownerReferences.length === 1
  );
}

function sameMap(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ak = Object.keys(a);
  return ak.length === Object.keys(b).length && ak.every((k) => a[k] === b[k]);
}
