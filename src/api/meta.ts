// Object metadata as the operator reads it (parsed and interned once), object keys, and the Parsed result type.
import { intern, internRecent } from './intern.js';
import { isRecord } from '../platform/json-value.js';
import { ROTATE_ON_DELETE_FINALIZER } from './constants.js';

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
  /**
   * The operator's own finalizers among metadata.finalizers (others are not kept: a tenant's list must not land in
   * the cache); absent when there are none.
   */
  readonly finalizers?: readonly string[];
}

export interface OwnerReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller: boolean;
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** Shared by every parsed object without labels, annotations, …: thousands of cached objects need no copy each. */
export const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

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
 * Which parts of metadata a kind keeps beyond name, namespace, uid, resourceVersion, generation and the
 * timestamps. Everything else a tenant can write into metadata (up to 256 KiB of annotations, labels, owner
 * references) would otherwise sit in the informer's cache for every object, read by nobody.
 */
export interface MetaKeep {
  /** The only annotations kept (a missing one is absent); all of them when undefined. */
  readonly annotations?: readonly string[];
  /** Whether labels are kept (default true); false gives an empty map. */
  readonly labels?: boolean;
  /** Whether owner references are kept (default true); false gives an empty list. */
  readonly ownerReferences?: boolean;
}

/**
 * Parses metadata, keeping what `keep` says (everything by default). Fields that are not kept are not
 * checked either: an object is not refused for metadata the operator never reads.
 */
export function parseMeta(raw: unknown, keep: MetaKeep = {}): Parsed<ObjectMeta> {
  if (!isRecord(raw)) return { ok: false, error: 'metadata is not an object' };
  const { name, namespace, uid, resourceVersion } = raw;
  if (typeof name !== 'string' || name === '') return { ok: false, error: 'metadata.name is missing' };
  if (typeof uid !== 'string' || typeof resourceVersion !== 'string') return { ok: false, error: 'metadata.uid or resourceVersion is missing' };
  const labels = keep.labels === false ? EMPTY : stringMap(raw['labels']);
  const annotations = keep.annotations === undefined ? stringMap(raw['annotations']) : pickStrings(raw['annotations'], keep.annotations);
  if (!labels || !annotations) return { ok: false, error: 'metadata labels/annotations are not string maps' };
  const ns = typeof namespace === 'string' ? intern(namespace) : '';
  const ownerReferences = keep.ownerReferences === false ? NO_OWNERS : parseOwnerReferences(raw['ownerReferences'], name, ns);
  const value: ObjectMeta = {
    name,
    namespace: ns,
    uid,
    resourceVersion,
    generation: typeof raw['generation'] === 'number' ? raw['generation'] : 0,
    creationTimestamp: typeof raw['creationTimestamp'] === 'string' ? internRecent(raw['creationTimestamp']) : '',
    deletionTimestamp: typeof raw['deletionTimestamp'] === 'string' ? raw['deletionTimestamp'] : undefined,
    labels: internValues(labels),
    annotations,
    ownerReferences,
    ...ownFinalizers(raw['finalizers']),
  };
  // Not enumerable: the key is derived, and must not show up where the metadata is compared or printed.
  Object.defineProperty(value, KEY, { value: `${ns}/${name}` });
  return { ok: true, value };
}

/** A copy of parsed metadata with other annotations; it keeps its object key. */
export function withAnnotations(meta: ObjectMeta, annotations: Readonly<Record<string, string>>): ObjectMeta {
  const copy: ObjectMeta = { ...meta, annotations };
  Object.defineProperty(copy, KEY, { value: objectKey(meta) });
  return copy;
}

/** A copy of parsed metadata with the operator's finalizers (and the resourceVersion) as a write left them; it keeps its object key. */
export function withFinalizers(meta: ObjectMeta, finalizers: readonly string[] | undefined, resourceVersion: string): ObjectMeta {
  const copy: ObjectMeta = { ...meta, resourceVersion };
  if (finalizers && finalizers.length > 0) (copy as { finalizers?: readonly string[] }).finalizers = finalizers;
  else delete (copy as { finalizers?: readonly string[] }).finalizers;
  Object.defineProperty(copy, KEY, { value: objectKey(meta) });
  return copy;
}

const NO_OWNERS: readonly OwnerReference[] = Object.freeze([]);
/** Shared by every object that carries the operator's finalizer. */
const ROTATE_ON_DELETE: readonly string[] = Object.freeze([ROTATE_ON_DELETE_FINALIZER]);

function ownFinalizers(raw: unknown): { finalizers?: readonly string[] } {
  return Array.isArray(raw) && raw.includes(ROTATE_ON_DELETE_FINALIZER) ? { finalizers: ROTATE_ON_DELETE } : {};
}

/** Whether the object carries the operator's rotate-on-delete finalizer. */
export function hasRotateFinalizer(meta: Pick<ObjectMeta, 'finalizers'>): boolean {
  return meta.finalizers?.includes(ROTATE_ON_DELETE_FINALIZER) === true;
}

/**
 * Owner references, sharing the strings they repeat: a token Secret's UserGroup usually has the Secret's own name,
 * and under deletionPolicy Retain every token Secret of a namespace names that namespace (name and uid) as owner.
 */
function parseOwnerReferences(raw: unknown, objectName: string, objectNamespace: string): OwnerReference[] {
  const ownerReferences: OwnerReference[] = [];
  for (const o of Array.isArray(raw) ? raw : []) {
    if (!isRecord(o)) continue;
    const { uid, kind, name } = o;
    if (typeof uid !== 'string' || typeof kind !== 'string' || typeof name !== 'string') continue;
    const ownNamespace = kind === 'Namespace' && name === objectNamespace && objectNamespace !== '';
    ownerReferences.push({
      apiVersion: typeof o['apiVersion'] === 'string' ? intern(o['apiVersion']) : '',
      kind: intern(kind),
      name: name === objectName ? objectName : ownNamespace ? objectNamespace : name,
      uid: ownNamespace ? namespaceUid(objectNamespace, uid) : uid,
      controller: o['controller'] === true,
    });
  }
  return ownerReferences;
}

/**
 * One copy of each namespace's uid as its objects name it owner. Keyed by the namespace, not by the value, so what a
 * tenant writes there (any uid, on as many Secrets as it likes) only replaces its own namespace's entry.
 */
const namespaceUids = new Map<string, string>();
const MAX_NAMESPACE_UIDS = 4096;

function namespaceUid(namespace: string, uid: string): string {
  const held = namespaceUids.get(namespace);
  if (held === uid) return held;
  if (held === undefined && namespaceUids.size >= MAX_NAMESPACE_UIDS) namespaceUids.clear();
  namespaceUids.set(namespace, uid);
  return uid;
}

/** The wanted keys of a string map, without copying (or checking) the rest; undefined if one is not a string. */
function pickStrings(raw: unknown, keys: readonly string[]): Readonly<Record<string, string>> | undefined {
  if (raw === undefined || raw === null) return EMPTY;
  if (!isRecord(raw)) return undefined;
  let out: Record<string, string> | undefined;
  for (const k of keys) {
    const v = raw[k];
    if (v === undefined) continue;
    if (typeof v !== 'string') return undefined;
    (out ??= {})[k] = v;
  }
  return out ?? EMPTY;
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
