// The request budgets' debts as a Lease annotation, so a new leader or shard owner does not refill them.
import { isRecord } from '../platform/json-value.js';
import { REQUEST_KINDS, type RequestBudgets, type RequestKind } from './request-budget.js';

/**
 * The request budgets (request-budget.ts) as a Lease annotation, so that a leader change does not refill them:
 * the leader writes it with every renewal of its Lease (and when it gives the Lease up), and the next leader takes
 * on what it says before its workers start. With --shard-by-namespace each replica's Lease carries its own, and a
 * replica taking namespaces over takes on its peers'. The Leases live in the operator's namespace: tenants cannot
 * write them.
 *
 * Per kind, per namespace whose bucket is not full: the wall-clock second at which it will be, as seconds after
 * `at` (the second it was written), e.g. {"v":1,"at":1764000000,"sync":{"team-a":42},"rotation":{"team-b":6}}.
 * Whole seconds, rounded up: a reader never believes a bucket fuller than it is. At most MAX_RECORDED_NAMESPACES per
 * kind, the most indebted first (those owe the longest), so the annotation stays well within the apiserver's 256 KiB
 * for all of an object's annotations: 2 × 1,000 × (63 characters of name + 8) is about 142 KB.
 */
export const REQUEST_BUDGETS_ANNOTATION = 'usergroup.dev/request-budgets';

export const MAX_RECORDED_NAMESPACES = 1000;

/** Per kind, per namespace: the milliseconds until its bucket is full again. */
export type Debts = Readonly<Record<RequestKind, ReadonlyMap<string, number>>>;

const VERSION = 1;
/** A debt read back is never believed beyond this (a refill takes burst/perMinute minutes; RequestBudget clamps it to that). */
const MAX_SECONDS = 366 * 24 * 3600;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The annotation's value at wall-clock `now` (ms); undefined when every bucket is full (no annotation at all). */
export function encodeDebts(debts: Debts, now: number): string | undefined {
  const at = Math.floor(now / 1000);
  const record: Record<string, unknown> = { v: VERSION, at };
  let any = false;
  for (const kind of REQUEST_KINDS) {
    const mostIndebted = [...debts[kind]].filter(([, ms]) => ms > 0).sort(([, a], [, b]) => b - a);
    if (mostIndebted.length === 0) continue;
    any = true;
    record[kind] = Object.fromEntries(mostIndebted.slice(0, MAX_RECORDED_NAMESPACES).map(([ns, ms]) => [ns, Math.ceil((now + ms) / 1000) - at]));
  }
  return any ? JSON.stringify(record) : undefined;
}

/**
 * What an annotation says is still owed at wall-clock `now` (ms). Anything not understood is no debt: the
 * annotation is the operator's own, so a value it cannot read comes from another version of it, and a full budget
 * is what a restart without a record gives anyway.
 */
export function decodeDebts(text: string | undefined, now: number): Debts {
  const debts: Record<RequestKind, Map<string, number>> = { sync: new Map(), rotation: new Map() };
  if (text === undefined) return debts;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return debts;
  }
  if (!isRecord(parsed) || parsed['v'] !== VERSION) return debts;
  const at = parsed['at'];
  if (typeof at !== 'number' || !Number.isSafeInteger(at)) return debts;
  for (const kind of REQUEST_KINDS) {
    const entries = parsed[kind];
    if (!isRecord(entries)) continue;
    for (const [ns, seconds] of Object.entries(entries).slice(0, MAX_RECORDED_NAMESPACES)) {
      if (!NAMESPACE.test(ns) || ns.length > 63 || typeof seconds !== 'number' || !Number.isSafeInteger(seconds)) continue;
      if (seconds <= 0 || seconds > MAX_SECONDS) continue;
      const ms = (at + seconds) * 1000 - now;
      if (ms > 0) debts[kind].set(ns, ms);
    }
  }
  return debts;
}

/** The budgets' debts as the annotations of a Lease renewal at wall-clock `now` (ms). */
export function budgetAnnotations(budgets: RequestBudgets, now: number): Record<string, string> {
  const value = encodeDebts({ sync: budgets.sync.owed(), rotation: budgets.rotation.owed() }, now);
  return value === undefined ? {} : { [REQUEST_BUDGETS_ANNOTATION]: value };
}

/** Takes on the debts a Lease's annotations record (of the namespaces `owns` admits), at wall-clock `now` (ms). */
export function takeOverDebts(
  budgets: RequestBudgets,
  annotations: Readonly<Record<string, string>>,
  now: number,
  owns: (namespace: string) => boolean = () => true,
): void {
  const debts = decodeDebts(annotations[REQUEST_BUDGETS_ANNOTATION], now);
  for (const kind of REQUEST_KINDS) for (const [ns, ms] of debts[kind]) if (owns(ns)) budgets[kind].owe(ns, ms);
}
