// Writes token Secrets: compare before write, with a typed result (like controller-runtime's CreateOrUpdate).
import type { V1OwnerReference, V1Secret } from '@kubernetes/client-node';
import { FIELD_MANAGER } from '../api/constants.js';
import { objectKey, sameStringMap, type OwnerReference } from '../api/meta.js';
import { metadataDigest, parseSecret, parseTokenSecretMeta, type ObservedSecret } from '../api/secret.js';
import { isAlreadyExists, isConflict, isNotFound, type ApiError } from './api-error.js';
import type { LocalCache } from './cache.js';
import { call, type ApiResult, type KubeClient } from './http.js';
import { paths } from './paths.js';

/**
 * What apply() did, like controller-runtime's CreateOrUpdate and its OperationResult: the Secret already was the
 * desired one (no request), was created, or replaced; someone else wrote first (decide again on what won); or the
 * apiserver refused the write (validation, quota, RBAC: the caller reports it on its object).
 */
export type SecretApplyResult =
  | { readonly kind: 'unchanged' | 'created' | 'updated'; readonly secret: ObservedSecret }
  | { readonly kind: 'conflict'; readonly conflict: 'exists' | 'changed'; readonly message: string }
  | { readonly kind: 'refused'; readonly error: ApiError };

export interface SecretWriterOptions {
  /** Runs before every write (a compare that writes nothing included); throws when this replica does not hold its Lease (by the clock). */
  readonly fence?: () => void;
  /** Where a write goes through, so the next reconcile does not write it again: absent, nowhere. */
  readonly through?: SecretWriteThrough;
}

/** What a created or replaced token Secret goes into before apply() returns. */
export interface SecretWriteThrough {
  /** The token-Secret cache, metadata only: the Secret goes in as its watch event would bring it. */
  readonly cache: LocalCache<ObservedSecret>;
  /** The record of which versions' data this process wrote or checked (controller/verified-secrets.ts): `data` is ours at that version. */
  wrote(key: string, resourceVersion: string, data: Readonly<Record<string, string>> | undefined): void;
}

/** Creates or replaces token Secrets, with optimistic concurrency on replace; what it writes, the caches it is given know. */
export class SecretWriter {
  constructor(
    private readonly client: KubeClient,
    private readonly options: SecretWriterOptions = {},
  ) {}

  /** The Secret whole, data included (no cache holds the data). */
  async read(namespace: string, name: string): Promise<ObservedSecret | undefined> {
    const res = await call(this.client, 'GET', paths.secret(namespace, name));
    if (res.ok) return parsed(res.body);
    if (isNotFound(res.error)) return undefined;
    throw res.error;
  }

  /** Deletes a Secret only if it is still the object with this uid (never a newer one of the same name). */
  async delete(secret: { readonly metadata: Pick<ObservedSecret['metadata'], 'namespace' | 'name' | 'uid'> }): Promise<void> {
    this.options.fence?.();
    const { namespace, name, uid } = secret.metadata;
    const res = await call(this.client, 'DELETE', paths.secret(namespace, name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } } });
    // Gone already, or a newer object of that name (the uid precondition failed): either way not ours to delete.
    if (!res.ok && !isNotFound(res.error) && !isConflict(res.error)) throw res.error;
  }

  /**
   * Makes the Secret `desired` unless `current` (what is stored now, as far as the caller knows) already is: no
   * request then. Creates it when there is none, else replaces exactly the version `current` names.
   */
  async apply(desired: V1Secret, current: ObservedSecret | undefined): Promise<SecretApplyResult> {
    this.options.fence?.();
    if (current && secretMatches(current, desired)) return { kind: 'unchanged', secret: current };
    const resourceVersion = current?.metadata.resourceVersion;
    const res = await this.send(desired, resourceVersion, current?.metadata.finalizers);
    if (res.ok) {
      const secret = parsed(res.body);
      this.writeThrough(secret, desired.data);
      return { kind: resourceVersion === undefined ? 'created' : 'updated', secret };
    }
    if (isAlreadyExists(res.error) || isConflict(res.error)) return { kind: 'conflict', ...conflictOf(desired, resourceVersion) };
    return { kind: 'refused', error: res.error };
  }

  /** The cache holds what the watch would deliver: metadata only, trimmed; and this version's data is ours. */
  private writeThrough(secret: ObservedSecret, data: Readonly<Record<string, string>> | undefined): void {
    const { through } = this.options;
    if (!through) return;
    const cached = parseTokenSecretMeta(toPartial(secret));
    if (cached) through.cache.upsertLocal(cached);
    through.wrote(objectKey(secret.metadata), secret.metadata.resourceVersion, data);
  }

  /** `finalizers`: the operator's own on the Secret now (a replace would drop them otherwise). */
  private send(desired: V1Secret, resourceVersion: string | undefined, finalizers: readonly string[] | undefined): Promise<ApiResult> {
    const namespace = desired.metadata?.namespace ?? '';
    const name = desired.metadata?.name ?? '';
    const query = { fieldManager: FIELD_MANAGER };
    // The error of a refused write holds the apiserver's Status only, never this request's body: it holds the token.
    return resourceVersion === undefined
      ? call(this.client, 'POST', paths.secrets(namespace), { query, body: desired })
      : call(this.client, 'PUT', paths.secret(namespace, name), {
          query,
          // client-node's V1Secret is a plain data class: the spread copy is what goes on the wire.
          // eslint-disable-next-line @typescript-eslint/no-misused-spread
          body: { ...desired, metadata: { ...desired.metadata, resourceVersion, ...(finalizers ? { finalizers } : {}) } },
        });
  }
}

/**
 * True when the observed Secret already is the desired one (no write needed). A Secret seen as metadata only is
 * compared by its digest of labels and annotations; its data is then taken as intact, which the caller vouches for
 * (a token Secret's annotations hold its token's digest, sealed: see controller/policies/token-secret.ts).
 */
export function secretMatches(observed: ObservedSecret, desired: V1Secret): boolean {
  const meta = desired.metadata ?? {};
  return (
    (observed.type === undefined || observed.type === desired.type) &&
    observed.metaDigest === metadataDigest(meta.labels ?? {}, meta.annotations ?? {}) &&
    (observed.data === undefined || (desired.data !== undefined && sameStringMap(observed.data, desired.data))) &&
    sameOwners(observed.metadata.ownerReferences, meta.ownerReferences ?? [])
  );
}

/** The same owners (by uid), the same one of them the controller. */
function sameOwners(observed: readonly OwnerReference[], desired: readonly V1OwnerReference[]): boolean {
  return (
    observed.length === desired.length &&
    desired.every((d) => observed.some((o) => o.uid === d.uid && o.kind === d.kind && o.name === d.name && o.controller === (d.controller === true)))
  );
}

/** A 409 of either reason means someone wrote first (AlreadyExists answers a create, Conflict a replace). */
function conflictOf(desired: V1Secret, resourceVersion: string | undefined): { conflict: 'exists' | 'changed'; message: string } {
  const where = `${desired.metadata?.namespace ?? ''}/${desired.metadata?.name ?? ''}`;
  return resourceVersion === undefined
    ? { conflict: 'exists', message: `Secret ${where} already exists` }
    : { conflict: 'changed', message: `Secret ${where} changed underneath us` };
}

/** The PartialObjectMetadata shape of a Secret read or written whole, for the metadata-only cache. */
function toPartial(secret: ObservedSecret): unknown {
  const m = secret.metadata;
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
      labels: m.labels,
      annotations: m.annotations,
      ownerReferences: m.ownerReferences.map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid, controller: o.controller })),
      ...(m.deletionTimestamp !== undefined ? { deletionTimestamp: m.deletionTimestamp } : {}),
      ...(m.finalizers !== undefined ? { finalizers: m.finalizers } : {}),
    },
  };
}

function parsed(body: unknown): ObservedSecret {
  const secret = parseSecret(body);
  if (!secret.ok) throw new Error(`the apiserver returned a Secret that cannot be parsed: ${secret.error}`);
  return secret.value;
}
