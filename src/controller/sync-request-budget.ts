import { TokenBucket } from '../platform/token-bucket.js';

/**
 * What sync requests (usergroup.dev/sync-requested-at) may cost, per namespace: `burst` PUTs at once, then
 * `perMinute`. Each namespace has its own budget, so a tenant flooding its UserGroups with requests spends its own
 * and never another namespace's, nor the account's rate (--service-qps) beyond its budget. Rotation requests are
 * not budgeted this way: a requested rotation is rare and always wanted; a sync request is cheap to write in a loop.
 */
export interface SyncRequestBudgetOptions {
  readonly burst: number;
  readonly perMinute: number;
}

/** The operator's budget: docs/usergroup-reference.md ("Sync on demand") names these figures. */
export const SYNC_REQUEST_BUDGET: SyncRequestBudgetOptions = { burst: 10, perMinute: 10 };

/** Whether a sync request may PUT now, or when its slot comes (`first`: the slot was just given, say so once). */
export type SyncSlot = { readonly kind: 'now' } | { readonly kind: 'wait'; readonly inMs: number; readonly first: boolean };

/** A slot not come back for within this long after it was due is forgotten (deleted group, request superseded). */
const ABANDONED_AFTER_MS = 60_000;
/** Namespaces remembered before idle ones are swept. */
const SWEEP_ABOVE = 1024;

interface NamespaceEntry {
  readonly bucket: TokenBucket;
  /**
   * Slots paid for (the token is taken) and not yet spent on a PUT: given to keys that must come back for them,
   * and kept for a key whose PUT the account's rate limit then deferred, so it is not charged twice.
   */
  readonly slots: Map<string, number>;
  lastSpent: number;
}

/**
 * A token bucket per namespace with slots kept per key, as rate-cap.ts keeps them: a key that must wait is told
 * its own time, comes back then and goes, so waiting keys neither race for one token nor reconcile in a loop.
 * A slot stays the key's until `spent` (its PUT went out) or until it is abandoned: a PUT deferred by the
 * account's rate limit (connections.ts) comes back to the slot it paid for.
 */
export class SyncRequestBudget {
  readonly #namespaces = new Map<string, NamespaceEntry>();
  readonly #refillMs: number;

  constructor(
    private readonly options: SyncRequestBudgetOptions = SYNC_REQUEST_BUDGET,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#refillMs = (options.burst / options.perMinute) * 60_000;
  }

  /** Takes a slot for the key (namespace/name) of a UserGroup in `namespace`. */
  take(namespace: string, key: string): SyncSlot {
    const now = this.now();
    const entry = this.#entry(namespace, now);
    entry.lastSpent = now;
    this.#forgetAbandoned(entry, now);
    const slot = entry.slots.get(key);
    if (slot !== undefined) return now < slot ? { kind: 'wait', inMs: Math.ceil(slot - now), first: false } : { kind: 'now' };
    const inMs = entry.bucket.reserve();
    entry.slots.set(key, now + inMs);
    return inMs === 0 ? { kind: 'now' } : { kind: 'wait', inMs, first: true };
  }

  /** The key's PUT went out (answered or failed, not deferred): its slot is used up. */
  spent(namespace: string, key: string): void {
    this.#namespaces.get(namespace)?.slots.delete(key);
  }

  /** Namespaces remembered now, for tests. */
  get size(): number {
    return this.#namespaces.size;
  }

  #entry(namespace: string, now: number): NamespaceEntry {
    let entry = this.#namespaces.get(namespace);
    if (!entry) {
      entry = { bucket: new TokenBucket(this.options.perMinute / 60, this.options.burst, this.now), slots: new Map(), lastSpent: now };
      this.#namespaces.set(namespace, entry);
      if (this.#namespaces.size > SWEEP_ABOVE) this.#forgetIdle(now);
    }
    return entry;
  }

  /** Slots are given in time order (a paid slot is never later than one given after it), so the oldest come first. */
  #forgetAbandoned(entry: NamespaceEntry, now: number): void {
    for (const [key, slot] of entry.slots) {
      if (slot > now - ABANDONED_AFTER_MS) return;
      entry.slots.delete(key);
    }
  }

  /** A namespace idle for as long as its bucket takes to refill (and past its last slot) would start afresh anyway. */
  #forgetIdle(now: number): void {
    for (const [namespace, entry] of this.#namespaces) {
      const lastSlot = Math.max(entry.lastSpent, ...entry.slots.values());
      if (now - lastSlot >= this.#refillMs + ABANDONED_AFTER_MS) this.#namespaces.delete(namespace);
    }
  }
}
