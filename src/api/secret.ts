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
