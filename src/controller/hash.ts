// Pure digests: canonical JSON and SHA-256, and the per-uid fraction that spreads schedules.
import { createHash } from 'node:crypto';

// JSON.stringify gives undefined for undefined (its lib type says string).
const stringify: (value: unknown) => string | undefined = JSON.stringify;

/** JSON with object keys sorted at every level, so equal values hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return stringify(value) ?? 'null';
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A number in [0, 1] fixed by the text: spreads per-object schedules the same way on every restart. */
export function uidFraction(text: string): number {
  return Number.parseInt(sha256Hex(text).slice(0, 8), 16) / 0xffffffff;
}
