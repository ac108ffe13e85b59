import { intern } from './intern.js';

/** The parts of metadata the operator reads, parsed once from what the apiserver sends. */
export interface ObjectMeta {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly generation: number;
  readonly creationTimestamp: string;
  readonly deletionTimestamp: string | undefined;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly ownerReferences: readonly OwnerReference[];
}

export interface OwnerReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller: boolean;
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Shared by every parsed object without labels, annotations, …: thousands of cached objects need no copy each. */
const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

export function stringMap(value: unknown): Readonly<Record<string, string>> | undefined {
  if (value === undefined || value === null) return EMPTY;
  if (!isRecord(value)) return undefined;
  const entries = Object.entries(value);
  if (entries.length === 0) return EMPTY;
  const out: Record<string, string> = {};
  for (const [k, v] of entries) {
    if (typeof v !== 'string') return undefined;
    out[k] = v;
  }
  return out;
}

/** Same keys with the same values (labels, annotations, Secret data). */
export function sameStringMap(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/**
 * The "namespace/name" key a parsed object carries from parseMeta on. The informer's store, the indexes and
 * the work queue all keep keys of every object; sharing one string per object instead of building one at
 * each call saves a few MiB at 10,000 UserGroups (heap snapshots showed five copies of each key).
 */
const KEY = Symbol('objectKey');

/**
 * Parses metadata; `omitAnnotations` are left out, for annotations the operator never reads and that can be
 * large (kubectl's last-applied-configuration is a copy of the whole object).
 */
export function parseMeta(raw: unknown, omitAnnotations?: readonly string[]): Parsed<ObjectMeta> {
  if (!isRecord(raw)) return { ok: false, error: 'metadata is not an object' };
  const { name, namespace, uid, resourceVersion } = raw;
  if (typeof name !== 'string' || name === '') return { ok: false, error: 'metadata.name is missing' };
  if (typeof uid !== 'string' || typeof resourceVersion !== 'string') return { ok: false, error: 'metadata.uid or resourceVersion is missing' };
  const labels = stringMap(raw['labels']);
  const annotations = withoutKeys(stringMap(raw['annotations']), omitAnnotations);
  if (!labels || !annotations) return { ok: false, error: 'metadata labels/annotations are not string maps' };
  const owners = Array.isArray(raw['ownerReferences']) ? raw['ownerReferences'] : [];
  const ownerReferences: OwnerReference[] = [];
  for (const o of owners) {
    if (!isRecord(o)) continue;
    if (typeof o['uid'] !== 'string' || typeof o['kind'] !== 'string' || typeof o['name'] !== 'string') continue;
    ownerReferences.push({
      apiVersion: typeof o['apiVersion'] === 'string' ? intern(o['apiVersion']) : '',
      kind: intern(o['kind']),
      name: o['name'],
      uid: o['uid'],
      controller: o['controller'] === true,
    });
  }
  const ns = typeof namespace === 'string' ? intern(namespace) : '';
  const value: ObjectMeta = {
    name,
    namespace: ns,
    uid,
    resourceVersion,
    generation: typeof raw['generation'] === 'number' ? raw['generation'] : 0,
    creationTimestamp: typeof raw['creationTimestamp'] === 'string' ? raw['creationTimestamp'] : '',
    deletionTimestamp: typeof raw['deletionTimestamp'] === 'string' ? raw['deletionTimestamp'] : undefined,
    labels: internValues(labels),
    annotations,
    ownerReferences,
  };
  // Not enumerable: the key is derived, and must not show up where the metadata is compared or printed.
  Object.defineProperty(value, KEY, { value: `${ns}/${name}` });
  return { ok: true, value };
}

function withoutKeys(map: Readonly<Record<string, string>> | undefined, keys: readonly string[] | undefined): Readonly<Record<string, string>> | undefined {
  if (!map || !keys?.some((k) => k in map)) return map;
  const out = { ...map };
  for (const k of keys) delete out[k];
  return out;
}

function internValues(map: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  const entries = Object.entries(map);
  return entries.length === 0 ? map : Object.fromEntries(entries.map(([k, v]) => [k, intern(v)]));
}

export function objectKey(meta: { readonly namespace: string; readonly name: string }): string {
  return (meta as { readonly [KEY]?: string })[KEY] ?? `${meta.namespace}/${meta.name}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
