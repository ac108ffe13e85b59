// Pure digests: canonical JSON and SHA-256, and the per-uid fraction that spreads schedules.
import { createHash } from 'node:crypto';

// JSON.stringify gives undefined for undefined (its lib type says string).
const stringify: (value: unknown) => string | undefined = JSON.stringify;
// Own and enumerable: the keys Object.keys gives, and so the ones canonicalJson writes.
const isEnumerable = (o: object, key: string): boolean => Object.prototype.propertyIsEnumerable.call(o, key);

/**
 * JSON with object keys sorted at every level, so equal values hash equally whatever their key order. Built by
 * appending, not from entries arrays mapped and joined: every reconcile hashes its spec with it, so its garbage is
 * on the hot path.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${out}]`;
  }
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    // The default sort compares UTF-16 code units, as `<` on strings does.
    const keys = Object.keys(record).sort();
    let out = '{';
    for (const k of keys) {
      const v = record[k];
      if (v === undefined) continue;
      out += `${out.length === 1 ? '' : ','}${JSON.stringify(k)}:${canonicalJson(v)}`;
    }
    return `${out}}`;
  }
  return stringify(value) ?? 'null';
}

/**
 * Whether canonicalJson(a) === canonicalJson(b), without building either string: the report step compares the
 * status it would write with the one it began from on every reconcile.
 */
export function sameCanonicalJson(a: unknown, b: unknown): boolean {
  // The same object (a status keeps what did not change) serialises the same.
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameCanonicalJson(a[i], b[i])) return false;
    return true;
  }
  const aObject = a !== null && typeof a === 'object';
  const bObject = b !== null && typeof b === 'object';
  if (aObject !== bObject) return false;
  if (!aObject) return (stringify(a) ?? 'null') === (stringify(b) ?? 'null');
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  let defined = 0;
  for (const k of Object.keys(ra)) {
    const v = ra[k];
    if (v === undefined) continue;
    defined++;
    if (!isEnumerable(rb, k) || !sameCanonicalJson(v, rb[k])) return false;
  }
  for (const k of Object.keys(rb)) if (rb[k] !== undefined) defined--;
  return defined === 0;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A number in [0, 1] fixed by the text: spreads per-object schedules the same way on every restart. */
export function uidFraction(text: string): number {
  return Number.parseInt(sha256Hex(text).slice(0, 8), 16) / 0xffffffff;
}
