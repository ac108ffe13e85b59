// Secrets as the operator sees them: token Secrets trimmed to their bookkeeping, every other Secret by name.
import { createHash } from 'node:crypto';
import {
  GROUP,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_ISSUED_AT_ANNOTATION,
  TOKEN_RECORD_ANNOTATION,
  TOKEN_SHA256_ANNOTATION,
  USERGROUP_KIND,
} from './constants.js';
import { EMPTY, parseMeta, type ObjectMeta, type Parsed } from './meta.js';
import { isRecord } from '../platform/json-value.js';

/**
 * A Secret as the operator sees it. Read live it has its data; from the token-Secret cache it is
 * metadata only (`data` undefined), with only the operator's own annotations kept: a tenant can put
 * 256 KiB of annotations and 1 MiB of data on each Secret of its namespace, and none of that may land
 * in the controller's memory. `metaDigest` stands in for the labels and annotations that were dropped.
 */
export interface ObservedSecret {
  readonly metadata: ObjectMeta;
  /** undefined when read as metadata only (PartialObjectMetadata has no type). */
  readonly type: string | undefined;
  /** base64-encoded values, as the apiserver returns them; undefined: not read (metadata only). */
  readonly data: Readonly<Record<string, string>> | undefined;
  /** Digest of all labels and annotations, whatever metadata.labels/annotations still hold. */
  readonly metaDigest: string;
}

export function parseSecret(raw: unknown): Parsed<ObservedSecret> {
  if (!isRecord(raw)) return { ok: false, error: 'Secret is not an object' };
  const meta = parseMeta(raw['metadata']);
  if (!meta.ok) return meta;
  const data: Record<string, string> = {};
  if (isRecord(raw['data'])) {
    for (const [k, v] of Object.entries(raw['data'])) if (typeof v === 'string') data[k] = v;
  }
  return {
    ok: true,
    value: {
      metadata: meta.value,
      type: typeof raw['type'] === 'string' ? raw['type'] : 'Opaque',
      data,
      metaDigest: metadataDigest(meta.value.labels, meta.value.annotations),
    },
  };
}

/** The annotations a token Secret's bookkeeping consists of: all the cache keeps. */
const BOOKKEEPING = [
  TOKEN_SHA256_ANNOTATION,
  TOKEN_RECORD_ANNOTATION,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_ISSUED_AT_ANNOTATION,
] as const;

/**
 * A token Secret for the cache, from its PartialObjectMetadata: undefined unless a UserGroup controls it
 * (anything else carrying our label is dropped at decode), and trimmed to the bookkeeping annotations.
 */
export function parseTokenSecretMeta(raw: unknown): ObservedSecret | undefined {
  if (!isRecord(raw)) return undefined;
  const meta = parseMeta(raw['metadata']);
  if (!meta.ok) return undefined;
  const controller = meta.value.ownerReferences.find((o) => o.controller);
  if (controller?.kind !== USERGROUP_KIND || controller.apiVersion.split('/')[0] !== GROUP) return undefined;
  const { labels, annotations } = meta.value;
  const kept: Record<string, string> = {};
  for (const k of BOOKKEEPING) {
    const v = annotations[k];
    // A value far longer than any we write is not ours; it must not sit in memory either.
    if (v !== undefined && v.length <= 1024) kept[k] = v;
  }
  // Three references at most: ours are the UserGroup and, under deletionPolicy Retain, the namespace; a third tells
  // "someone added more" (a write restores ours alone). A literal of its exact length: a spread into an array leaves
  // room for 17 (150 bytes a Secret).
  const [second, third] = meta.value.ownerReferences.filter((o) => o !== controller);
  const ownerReferences = second === undefined ? [controller] : third === undefined ? [controller, second] : [controller, second, third];
  return {
    metadata: { ...meta.value, labels: EMPTY, annotations: kept, ownerReferences },
    type: undefined,
    data: undefined,
    metaDigest: metadataDigest(labels, annotations),
  };
}

/** One digest over labels and annotations, order-independent. */
export function metadataDigest(labels: Readonly<Record<string, string>>, annotations: Readonly<Record<string, string>>): string {
  const hash = createHash('sha256');
  for (const [tag, map] of [
    ['l', labels],
    ['a', annotations],
  ] as const) {
    for (const k of Object.keys(map).sort()) hash.update(`${tag}\u0000${k}\u0000${map[k] ?? ''}\u0000`);
  }
  return hash.digest('base64');
}

export function secretValue(secret: ObservedSecret, key: string): string | undefined {
  const encoded = secret.data?.[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
}

/**
 * A Secret the operator does not manage, known by name only: all a create-first write needs to know
 * is whether the name is taken, and Helm release Secrets and the like are too big to hold.
 */
export interface SecretName {
  readonly metadata: { readonly namespace: string; readonly name: string; readonly resourceVersion: string };
}

/** Parses a Secret or a PartialObjectMetadata of one into its name (no labels, annotations or data kept). */
export function parseSecretName(raw: unknown): Parsed<SecretName> {
  const metadata = isRecord(raw) ? raw['metadata'] : undefined;
  if (!isRecord(metadata)) return { ok: false, error: 'Secret has no metadata' };
  const { namespace, name, resourceVersion } = metadata;
  if (typeof namespace !== 'string' || typeof name !== 'string' || typeof resourceVersion !== 'string') {
    return { ok: false, error: 'Secret metadata lacks namespace, name or resourceVersion' };
  }
  return { ok: true, value: { metadata: { namespace, name, resourceVersion } } };
}

/**
 * A Secret in the controller's one Secret cache: a token Secret (our label, and a UserGroup controls it) as
 * parseTokenSecretMeta trims it, any other Secret by name alone.
 */
export type CachedSecret = ObservedSecret | SecretName;

/**
 * Parses a Secret's PartialObjectMetadata for the Secret cache. Our label alone makes nothing a token Secret
 * (a tenant can put it on any Secret): without a UserGroup as its controller it is known by name, as any other.
 */
export function parseCachedSecret(raw: unknown): CachedSecret | undefined {
  const metadata = isRecord(raw) ? raw['metadata'] : undefined;
  const labels = isRecord(metadata) ? metadata['labels'] : undefined;
  const token = isRecord(labels) && labels[MANAGED_BY_LABEL] === MANAGED_BY_VALUE ? parseTokenSecretMeta(raw) : undefined;
  if (token) return token;
  const named = parseSecretName(raw);
  return named.ok ? named.value : undefined;
}

/** Whether a cached Secret is a token Secret (parseTokenSecretMeta's result) rather than a name. */
export function isTokenSecret(secret: CachedSecret): secret is ObservedSecret {
  return 'metaDigest' in secret;
}
