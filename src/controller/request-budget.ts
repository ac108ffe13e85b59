// Per-namespace budgets for tenant-requested syncs and rotations, so one tenant's requests cannot spend another's.
import { TokenBucket } from '../platform/token-bucket.js';

/**
 * What tenant-triggered calls may cost, per namespace and per kind of request: `burst` calls at once, then
 * `perMinute`. A request is a new value of an annotation anyone who may edit a UserGroup can write in a loop
 * (usergroup.dev/sync-requested-at: a PUT; usergroup.dev/rotate-requested-at: a POST), and every call draws on the
 * account's rate (--service-qps) that all tenants of the account share. Each namespace has its own budget, so a
 * tenant flooding its UserGroups with requests spends its own and never another namespace's.
 */
export interface RequestBudgetOptions {
  readonly burst: number;
  readonly perMinute: number;
}

/** The kinds of request a tenant can make by writing an annotation, each budgeted on its own. */
export type RequestKind = 'sync' | 'rotation';

export const REQUEST_KINDS: readonly RequestKind[] = ['sync', 'rotation'];

/**
 * The defaults of --sync-request-burst/--sync-requests-per-minute and their rotation counterparts. A rotation is
 * given the same figures as a sync: it costs at least as much (a POST, two Secret writes, often restarts of its
 * consumers), and a tenant rotating every group of a namespace after a leak still gets ten at once.
 */
export const DEFAULT_REQUEST_BUDGETS: Readonly<Record<RequestKind, RequestBudgetOptions>> = {
  sync: { burst: 10, perMinute: 10 },
  rotation: { burst: 10, perMinute: 10 },
};

/** Whether a request may make its call now, or when its slot comes (`first`: the slot was just given, say so once). */
export type RequestSlot = { readonly kind: 'now' } | { readonly kind: 'wait'; readonly inMs: number; readonly first: boolean };

/** A slot not come back for within this long after it was due is forgotten (deleted group, request superseded). */
const ABANDONED_AFTER_MS = 60_000;
/** Namespaces remembered before idle ones are swept. */
const SWEEP_ABOVE = 1024;

interface NamespaceEntry {
  readonly bucket: TokenBucket;
  /**
   * Slots paid for (the token is taken) and not yet spent on a call: given to keys that must come back for them,
   * and kept for a key whose call the account's rate limit then deferred, so it is not charged twice.
   */
  readonly slots: Map<string, number>;
  lastSpent: number;
}

/**
 * A token bucket per namespace with slots kept per key, as rate-cap.ts keeps them: a key that must wait is told
 * its own time, comes back then and goes, so waiting keys neither race for one token nor reconcile in a loop.
 * A slot stays the key's until `spent` (its call went out) or until it is abandoned: a call deferred by the
 * account's rate limit (service/call-gates.ts) comes back to the slot it paid for.
 *
 * The budget outlives a leader change through `owed`/`owe` (request-budget-record.ts writes it on the Lease): what
 * was spent, never what is only reserved, so the keys that wait reserve their slots again on the new leader.
 */
export class RequestBudget {
  readonly #namespaces = new Map<string, NamespaceEntry>();
  readonly #refillMs: number;
  readonly #perMs: number;

  constructor(
    readonly options: RequestBudgetOptions,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#perMs = options.perMinute / 60_000;
    this.#refillMs = options.burst / this.#perMs;
  }

  /** Takes a slot for the key (namespace/name) of a UserGroup in `namespace`. */
  take(namespace: string, key: string): RequestSlot {
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

  /** The key's call went out (answered or failed, not deferred): its slot is used up. */
  spent(namespace: string, key: string): void {
    this.#namespaces.get(namespace)?.slots.delete(key);
  }

  /**
   * Per namespace whose bucket is not full, the milliseconds until it is, counting only what was spent: the slots
   * kept for keys are handed back (those keys reserve again wherever they are reconciled next).
   */
  owed(): Map<string, number> {
    const owed = new Map<string, number>();
    for (const [namespace, entry] of this.#namespaces) {
      const level = Math.min(this.options.burst, entry.bucket.available + entry.slots.size);
      if (level < this.options.burst) owed.set(namespace, Math.ceil((this.options.burst - level) / this.#perMs));
    }
    return owed;
  }

  /**
   * Takes on what another process spent: the namespace's bucket is full again in `msUntilFull` at the earliest
   * (never later than one refill from empty). A bucket already owing more keeps its debt: of two records of calls
   * made, the larger is the safe one.
   */
  owe(namespace: string, msUntilFull: number): void {
    const ms = Math.min(this.#refillMs, msUntilFull);
    if (!(ms > 0)) return;
    const level = this.options.burst - ms * this.#perMs;
    const entry = this.#namespaces.get(namespace);
    if (entry && entry.bucket.available + entry.slots.size <= level) return;
    const now = this.now();
    const slots = entry?.slots ?? new Map<string, number>();
    // The slots kept for waiting keys stay reserved on top of the debt taken on.
    const bucket = new TokenBucket(this.#perMs * 1000, this.options.burst, this.now, level - slots.size);
    this.#namespaces.set(namespace, { bucket, slots, lastSpent: now });
    if (!entry && this.#namespaces.size > SWEEP_ABOVE) this.#forgetIdle(now);
  }

  /** Namespaces remembered now, for tests. */
  get size(): number {
    return this.#namespaces.size;
  }

  #entry(namespace: string, now: number): NamespaceEntry {
    let entry = this.#namespaces.get(namespace);
    if (!entry) {
      entry = { bucket: new TokenBucket(this.#perMs * 1000, this.options.burst, this.now), slots: new Map(), lastSpent: now };
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

/** One budget per kind of request. */
export type RequestBudgets = Readonly<Record<RequestKind, RequestBudget>>;

export function requestBudgets(options: Readonly<Record<RequestKind, RequestBudgetOptions>>, now?: () => number): RequestBudgets {
  return { sync: new RequestBudget(options.sync, now), rotation: new RequestBudget(options.rotation, now) };
}
