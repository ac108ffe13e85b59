// A bounded string pool, so the cache's many copies of the same namespace, kind or label value are one.
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

/**
 * One copy of timestamps that objects written in the same second share (creation, transition and sync times at
 * second precision): thousands of objects synced in a wave repeat a few hundred values. Only recent values are
 * held, so a long run does not fill the pool above with timestamps that will never come back.
 */
const recent = new Map<string, string>();
const MAX_RECENT = 256;

export function internRecent(value: string): string {
  const held = recent.get(value);
  if (held !== undefined) return held;
  if (recent.size >= MAX_RECENT) recent.clear();
  recent.set(value, value);
  return value;
}
