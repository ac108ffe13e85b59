// Which replica owns which namespace under --shard-by-namespace: rendezvous hashing and acknowledged views (pure).
import { createHash } from 'node:crypto';
import type { Member } from '../kube/shard-membership.js';

/**
 * Which replica owns which namespace when replicas share the work (--shard-by-namespace), decided without I/O.
 *
 * Each replica keeps a Lease; the live ones form a *view* (their identities, sorted). A namespace belongs to the
 * member with the highest hash of (namespace, member) — rendezvous hashing: when a member joins, every other keeps
 * all it had but what the newcomer takes, and when one leaves only its namespaces move.
 *
 * A view is only acted on once every member of it has said so (its Lease's acknowledged view), and a member says
 * so only after it has stopped working on what that view takes from it. Until a view has settled, a member works
 * on a namespace only if it owns it in the last settled view *and* in every view it has acknowledged since: the
 * newcomer waits, the others give up the newcomer's share first. Two members can then never act on one namespace
 * at once (their constraints share a view, which names one owner), however views change while others catch up.
 */

/** What a member keeps between decisions. */
export interface ShardState {
  /** The last view every one of its members acknowledged; undefined: none yet (a newcomer owns nothing). */
  readonly settled: readonly string[] | undefined;
  /** Views this member acknowledged since `settled`, oldest first. */
  readonly acknowledged: readonly (readonly string[])[];
}

export const INITIAL_SHARD_STATE: ShardState = { settled: undefined, acknowledged: [] };

export interface ShardDecision {
  readonly state: ShardState;
  /** The live members, sorted: the view this member now acknowledges (once `constraints` are in effect). */
  readonly view: readonly string[];
  /**
   * The views a namespace must be ours in, all of them, for this member to work on it; empty: nothing is ours.
   * Minimal: a view that is a subset of another one here is implied by it (if we win among more, we win among fewer).
   */
  readonly constraints: readonly (readonly string[])[];
}

/** A short, stable name of a view, as Leases carry it. */
export function viewId(view: readonly string[]): string {
  return createHash('sha256').update(view.join('\n'), 'utf8').digest('hex').slice(0, 16);
}

/**
 * The next state, from the members that are live now (this one among them, or it owns nothing). `self` must be in
 * `live` for this member to own anything: a replica whose Lease others cannot see must not act.
 */
export function decideShards(state: ShardState, self: string, live: readonly Member[]): ShardDecision {
  const view = [...new Set(live.map((m) => m.identity))].sort();
  if (!view.includes(self)) return { state: INITIAL_SHARD_STATE, view, constraints: [] };
  const id = viewId(view);
  const everyoneAgrees = live.every((m) => m.acknowledged === id);
  if (everyoneAgrees) {
    const settled = { settled: view, acknowledged: [] };
    return { state: settled, view, constraints: [view] };
  }
  const last = state.acknowledged.at(-1);
  const acknowledged = last && sameView(last, view) ? state.acknowledged : [...state.acknowledged, view];
  const next = { settled: state.settled, acknowledged };
  if (!state.settled) return { state: next, view, constraints: [] };
  return { state: next, view, constraints: minimal([state.settled, ...acknowledged]) };
}

/** A key that changes exactly when the constraints (so the namespaces owned) can have changed. */
export function constraintsKey(constraints: readonly (readonly string[])[]): string {
  return constraints.map(viewId).sort().join(',');
}

/** The member of `view` that owns `namespace` (highest rendezvous hash). */
export function ownerOf(namespace: string, view: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestHash = '';
  for (const member of view) {
    const h = createHash('sha256').update(`${namespace}\n${member}`, 'utf8').digest('hex');
    if (best === undefined || h > bestHash) {
      best = member;
      bestHash = h;
    }
  }
  return best;
}

/** Whether `self` may work on `namespace` under these constraints. */
export function owns(self: string, namespace: string, constraints: readonly (readonly string[])[]): boolean {
  return constraints.length > 0 && constraints.every((view) => ownerOf(namespace, view) === self);
}

/**
 * Ownership as a function that remembers its answers: every watch event asks it, and a cluster has far fewer
 * namespaces than objects.
 */
export function ownership(self: string, constraints: readonly (readonly string[])[]): (namespace: string) => boolean {
  const memo = new Map<string, boolean>();
  return (namespace) => {
    let answer = memo.get(namespace);
    if (answer === undefined) {
      answer = owns(self, namespace, constraints);
      memo.set(namespace, answer);
    }
    return answer;
  };
}

function sameView(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((m, i) => m === b[i]);
}

/** Drops every view that is a subset of another (kept) one, and duplicates. */
function minimal(views: readonly (readonly string[])[]): (readonly string[])[] {
  const kept: (readonly string[])[] = [];
  for (const view of views) {
    if (kept.some((k) => isSubset(view, k))) continue;
    for (let i = kept.length - 1; i >= 0; i--) if (isSubset(kept[i] ?? [], view)) kept.splice(i, 1);
    kept.push(view);
  }
  return kept;
}

function isSubset(small: readonly string[], big: readonly string[]): boolean {
  return small.every((m) => big.includes(m));
}
