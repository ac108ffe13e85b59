// A string-to-keys multimap that stores a single key without a Set, for the controller's indexes.
/**
 * A map from one string to a set of object keys, where nearly every entry holds exactly one (a userGroupId
 * has one UserGroup, a UserGroup one token Secret): a single key is stored as itself, a Set only for more.
 * At 10,000 UserGroups, a Set per entry would cost megabytes of hash tables.
 */
export class KeyMultimap {
  private readonly entries = new Map<string, string | Set<string>>();

  add(from: string, key: string): void {
    const held = this.entries.get(from);
    if (held === undefined) this.entries.set(from, key);
    else if (typeof held === 'string') {
      if (held !== key) this.entries.set(from, new Set([held, key]));
    } else held.add(key);
  }

  delete(from: string, key: string): void {
    const held = this.entries.get(from);
    if (held === key) this.entries.delete(from);
    else if (held instanceof Set) {
      held.delete(key);
      const [only, ...rest] = held;
      if (only !== undefined && rest.length === 0) this.entries.set(from, only);
    }
  }

  get(from: string): string[] {
    const held = this.entries.get(from);
    return held === undefined ? [] : typeof held === 'string' ? [held] : [...held];
  }
}
