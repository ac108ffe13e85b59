/**
 * One copy of strings that thousands of cached objects repeat (namespaces, API versions, kinds, common label
 * values): JSON.parse makes a fresh copy per object, and at 10,000 UserGroups plus their Secrets that is
 * megabytes. Bounded, so values that never repeat cannot grow it without limit; past the bound, strings
 * pass through unchanged.
 */
const pool = new Map<string, string>();
const MAX_ENTRIES = 4096;
const MAX_LENGTH = 128;

export function intern(value: string): string {
  const held = pool.get(value);
  if (held !== undefined) return held;
  if (pool.size < MAX_ENTRIES && value.length <= MAX_LENGTH) pool.set(value, value);
  return value;
}
