import { ownerOf, viewId } from '../../../src/controller/shard-assignment.js';
import type { LogEntry } from '../../support/controller-process.js';

/*
 * Scenario 4b's check that no namespace was worked on by two replicas at once, from the replicas' own logs
 * (each line's `time` is taken by the process when it logs; all run on this machine's clock).
 *
 * 1. Owner switches. Per namespace, every reconcile line (those with a reconcileId; `usergroup` is "ns/name") of
 *    every replica, sorted by time: each change of replica is a switch from A (its last line before) to B (its
 *    first line after). A namespace only moves to B with a view B has seen settle, which happens only after A
 *    acknowledged giving it up (or its Lease was gone), and A acknowledges only once its reconciles there have
 *    finished: so B must have logged "shard view settled" between A's last line and its own first one. A switch
 *    without one is two replicas working on the namespace at the same time (interleaved lines switch back and
 *    forth with no settle between).
 * 2. Outside the share. Every reconcile line of a replica is for a namespace its last settled view (resolved
 *    from the view id against the identities the replicas logged) gives to it.
 */

export interface Replica {
  readonly pid: number;
  readonly logs: readonly LogEntry[];
}

export interface Switch {
  readonly namespace: string;
  readonly from: number;
  readonly to: number;
  /** The old owner's last reconcile line and the new owner's first (ms since the epoch, the processes' `time`). */
  readonly lastFromAt: number;
  readonly firstToAt: number;
  /** The new owner's "shard view settled" in between, if any. */
  readonly settledAt: number | undefined;
}

export interface ShardLogAnalysis {
  readonly reconcileLines: number;
  /** Reconcile lines per namespace (every namespace should have some). */
  readonly linesPerNamespace: ReadonlyMap<string, number>;
  readonly switches: readonly Switch[];
  /** Switches without a settle of the new owner in between (must be none). */
  readonly unexplained: readonly Switch[];
  /** Reconcile lines for a namespace the replica's last settled view gives to another (must be none). */
  readonly outsideShare: readonly string[];
  /** Settled views whose members could not be worked out from the identities logged. */
  readonly unresolvedViews: readonly string[];
}

export const timeOf = (l: LogEntry): number => {
  const t = l.json?.['time'];
  return typeof t === 'number' ? t : Date.parse(String(t));
};
const isReconcile = (l: LogEntry): boolean => l.json?.['reconcileId'] !== undefined && typeof l.json['usergroup'] === 'string';
const namespaceOf = (l: LogEntry): string => String(l.json?.['usergroup']).split('/')[0] ?? '';

/** The identity a sharded replica runs with (its "sharing the namespaces with the other replicas" line). */
export function identityOf(r: Replica): string | undefined {
  const line = r.logs.find((l) => l.json?.['msg'] === 'sharing the namespaces with the other replicas');
  const id = line?.json?.['identity'];
  return typeof id === 'string' ? id : undefined;
}

/** The "shard view settled" lines of a replica, in order. */
export function settles(r: Replica): { at: number; members: number; view: string; entry: LogEntry }[] {
  return r.logs
    .filter((l) => l.json?.['msg'] === 'shard view settled')
    .map((l) => ({ at: timeOf(l), members: Number(l.json?.['members']), view: String(l.json?.['view']), entry: l }));
}

/** The members of a view, from its id: the subset of the known identities (sorted) that hashes to it. */
function resolver(identities: readonly string[]): (view: string, members: number) => string[] | undefined {
  const sorted = [...identities].sort((a, b) => a.localeCompare(b));
  const memo = new Map<string, string[] | undefined>();
  return (view, members) => {
    if (memo.has(view)) return memo.get(view);
    let found: string[] | undefined;
    const n = sorted.length;
    for (let mask = 1; mask < 1 << n && found === undefined; mask++) {
      const subset = sorted.filter((_, i) => (mask >> i) & 1);
      if (subset.length === members && viewId(subset) === view) found = subset;
    }
    memo.set(view, found);
    return found;
  };
}

export function analyseShardLogs(replicas: readonly Replica[], namespaces: readonly string[]): ShardLogAnalysis {
  const identities = replicas.map(identityOf).filter((id): id is string => id !== undefined);
  const resolve = resolver(identities);
  const unresolvedViews = new Set<string>();
  const outsideShare: string[] = [];
  const byNamespace = new Map<string, { at: number; pid: number }[]>(namespaces.map((ns) => [ns, []]));
  let reconcileLines = 0;

  for (const r of replicas) {
    const self = identityOf(r);
    const mine = settles(r);
    for (const l of r.logs) {
      if (!isReconcile(l)) continue;
      reconcileLines++;
      const ns = namespaceOf(l);
      const at = timeOf(l);
      const list = byNamespace.get(ns);
      if (list) list.push({ at, pid: r.pid });
      else outsideShare.push(`pid ${r.pid}: ${ns} is not one of the scenario's namespaces (${l.text.slice(0, 160)})`);
      const settled = mine.filter((s) => s.at <= at).at(-1);
      if (!settled) {
        outsideShare.push(`pid ${r.pid} worked on ${ns} before any view settled (${l.text.slice(0, 160)})`);
        continue;
      }
      const view = resolve(settled.view, settled.members);
      if (!view) {
        unresolvedViews.add(settled.view);
        continue;
      }
      const owner = ownerOf(ns, view);
      if (owner !== self)
        outsideShare.push(`pid ${r.pid} worked on ${ns} at ${new Date(at).toISOString()}, which its settled view ${settled.view} gives to ${owner}`);
    }
  }

  const switches: Switch[] = [];
  const settlesOf = new Map(replicas.map((r) => [r.pid, settles(r)]));
  for (const [ns, lines] of byNamespace) {
    lines.sort((x, y) => x.at - y.at);
    let owner: number | undefined;
    let lastAt = 0;
    for (const { at, pid } of lines) {
      if (owner !== undefined && pid !== owner) {
        const settledAt = (settlesOf.get(pid) ?? []).find((s) => s.at >= lastAt && s.at <= at)?.at;
        switches.push({ namespace: ns, from: owner, to: pid, lastFromAt: lastAt, firstToAt: at, settledAt });
      }
      owner = pid;
      lastAt = at;
    }
  }
  return {
    reconcileLines,
    linesPerNamespace: new Map([...byNamespace].map(([ns, l]) => [ns, l.length])),
    switches,
    unexplained: switches.filter((s) => s.settledAt === undefined),
    outsideShare,
    unresolvedViews: [...unresolvedViews],
  };
}

/**
 * The logs with one line added that a real overlap would leave: the old owner of `s` logging one more reconcile
 * line in that namespace 1 ms after the new owner's first. The scenario checks that the analysis sees it (so an
 * empty result is not the analysis seeing nothing).
 */
export function withOverlap(replicas: readonly Replica[], s: Switch): Replica[] {
  return replicas.map((r) => {
    if (r.pid !== s.from) return r;
    const template = r.logs.filter((l) => isReconcile(l) && namespaceOf(l) === s.namespace).at(-1);
    if (!template) return r;
    const at = s.firstToAt + 1;
    const line: LogEntry = { ...template, json: { ...template.json, time: new Date(at).toISOString() } };
    return { pid: r.pid, logs: [...r.logs, line] };
  });
}

/** The namespaces each of `replicas` owns once they all are the view (rendezvous hashing, as the replicas decide). */
export function sharesOf(replicas: readonly Replica[], namespaces: readonly string[]): Map<number, string[]> {
  const ids = new Map(replicas.map((r) => [identityOf(r), r.pid]));
  const view = [...ids.keys()].filter((id): id is string => id !== undefined).sort((a, b) => a.localeCompare(b));
  const shares = new Map<number, string[]>(replicas.map((r) => [r.pid, []]));
  for (const ns of namespaces) {
    const pid = ids.get(ownerOf(ns, view));
    if (pid !== undefined) shares.get(pid)?.push(ns);
  }
  return shares;
}
