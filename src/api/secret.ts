import { isRecord, parseMeta, type ObjectMeta, type Parsed } from './meta.js';

/** A Secret as the operator sees it: data decoded lazily, by key. */
export interface ObservedSecret {
  readonly metadata: ObjectMeta;
  readonly type: string;
  /** base64-encoded values, as the apiserver returns them. */
  readonly data: Readonly<Record<string, string>>;
}

export function parseSecret(raw: unknown): Parsed<ObservedSecret> {
  if (!isRecord(raw)) return { ok: false, error: 'Secret is not an object' };
  const meta = parseMeta(raw['metadata']);
  if (!meta.ok) return meta;
  const data: Record<string, string> = {};
  if (isRecord(raw['data'])) {
    for (const [k, v] of Object.entries(raw['data'])) if (typeof v === 'string') data[k] = v;
  }
  return { ok: true, value: { metadata: meta.value, type: typeof raw['type'] === 'string' ? raw['type'] : 'Opaque', data } };
}

export function secretValue(secret: ObservedSecret, key: string): string | undefined {
  const encoded = secret.data[key];
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
