import { describe, expect, it } from 'vitest';
import { constraintsKey, decideShards, INITIAL_SHARD_STATE, ownerOf, owns, ownership, viewId, type ShardState } from '../../src/controller/shard-assignment.js';
import type { Member } from '../../src/kube/shard-membership.js';

const namespaces = Array.from({ length: 600 }, (_, i) => `tenant-${i}`);

describe('rendezvous ownership', () => {
  it('gives every namespace one owner, spread evenly', () => {
    const view = ['a', 'b', 'c'];
    const counts = new Map<string, number>();
    for (const ns of namespaces) {
      const owner = ownerOf(ns, view) ?? 'none';
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
      expect(view.filter((m) => owns(m, ns, [view]))).toEqual([owner]);
    }
    expect([...counts.keys()].sort()).toEqual(view);
    for (const n of counts.values()) expect(n).toBeGreaterThan(150);
  });

  it('moves only the newcomer’s share when one joins, and only the leaver’s when one leaves', () => {
    const before = ['a', 'b', 'c'];
    const after = ['a', 'b', 'c', 'd'];
    let moved = 0;
    for (const ns of namespaces) {
      const was = ownerOf(ns, before);
      const is = ownerOf(ns, after);
      if (was !== is) {
        expect(is).toBe('d');
        moved++;
      }
      // Leaving is the same move backwards: only d's namespaces change hands.
      if (is !== 'd') expect(ownerOf(ns, before)).toBe(is);
    }
    expect(moved).toBeGreaterThan(100);
    expect(moved).toBeLessThan(220);
  });

  it('memoises answers per namespace and owns nothing without constraints', () => {
    const mine = ownership('a', [['a', 'b']]);
    expect(namespaces.map(mine)).toEqual(namespaces.map((ns) => ownerOf(ns, ['a', 'b']) === 'a'));
    expect(namespaces.some((ns) => owns('a', ns, []))).toBe(false);
  });
});

describe('decideShards', () => {
  it('a lone replica owns nothing until its own Lease shows it acknowledged its view, then everything', () => {
    const first = decideShards(INITIAL_SHARD_STATE, 'a', [{ identity: 'a', acknowledged: undefined }]);
    expect(first.constraints).toEqual([]);
    expect(first.view).toEqual(['a']);
    const second = decideShards(first.state, 'a', [{ identity: 'a', acknowledged: viewId(['a']) }]);
    expect(second.constraints).toEqual([['a']]);
    expect(namespaces.every((ns) => owns('a', ns, second.constraints))).toBe(true);
  });

  it('owns nothing while its own Lease is not among the live ones', () => {
    const settled: ShardState = { settled: ['a', 'b'], acknowledged: [] };
    const d = decideShards(settled, 'a', [{ identity: 'b', acknowledged: viewId(['a', 'b']) }]);
    expect(d.constraints).toEqual([]);
    expect(d.state).toEqual(INITIAL_SHARD_STATE);
  });

  it('on a join: the others give up the newcomer’s share at once, the newcomer waits for their acknowledgements', () => {
    const ab = viewId(['a', 'b']);
    const settled: ShardState = { settled: ['a', 'b'], acknowledged: [] };
    const live = [
      { identity: 'a', acknowledged: ab },
      { identity: 'b', acknowledged: ab },
      { identity: 'n', acknowledged: undefined },
    ];
    const a = decideShards(settled, 'a', live);
    expect(a.constraints).toEqual([['a', 'b', 'n']]);
    const n = decideShards(INITIAL_SHARD_STATE, 'n', live);
    expect(n.constraints).toEqual([]);
    const abn = viewId(['a', 'b', 'n']);
    const agreed = live.map((m) => ({ ...m, acknowledged: abn }));
    expect(decideShards(n.state, 'n', agreed).constraints).toEqual([['a', 'b', 'n']]);
    // No second change for the others: their share was already the new one.
    expect(constraintsKey(decideShards(a.state, 'a', agreed).constraints)).toBe(constraintsKey(a.constraints));
  });

  it('on a leave: the others keep their share until all of them acknowledged the smaller view, then take the leaver’s', () => {
    const abc = viewId(['a', 'b', 'c']);
    const settled: ShardState = { settled: ['a', 'b', 'c'], acknowledged: [] };
    const live = [
      { identity: 'a', acknowledged: abc },
      { identity: 'b', acknowledged: abc },
    ];
    const a = decideShards(settled, 'a', live);
    expect(a.constraints).toEqual([['a', 'b', 'c']]);
    const ab = viewId(['a', 'b']);
    const later = decideShards(a.state, 'a', [
      { identity: 'a', acknowledged: ab },
      { identity: 'b', acknowledged: ab },
    ]);
    expect(later.constraints).toEqual([['a', 'b']]);
  });
});

/**
 * Replicas joining, leaving and crashing while each sees the others' Leases late and at its own pace: after every
 * step, no namespace may be worked on by two replicas (each judged by the constraints it has in effect).
 */
describe('no namespace is ever owned twice (simulation)', () => {
  interface Replica {
    readonly id: string;
    state: ShardState;
    constraints: readonly (readonly string[])[];
    /** What this replica last read of the Lease table (identity → acknowledged view). */
    seen: Map<string, string | undefined>;
  }

  function random(seed: number): () => number {
    let x = seed;
    return () => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x / 2147483648;
    };
  }

  it.each([1, 2, 3, 4, 5, 6, 7, 8])(
    'seed %i',
    (seed) => {
      const rnd = random(seed);
      const sample = namespaces.slice(0, 80);
      /** The Leases as the apiserver holds them: identity → acknowledged view. */
      const leases = new Map<string, string | undefined>();
      const replicas = new Map<string, Replica>();
      let next = 0;
      const join = (): void => {
        const id = `r${next++}`;
        leases.set(id, undefined);
        replicas.set(id, { id, state: INITIAL_SHARD_STATE, constraints: [], seen: new Map(leases) });
      };
      join();
      join();
      let settledSteps = 0;
      for (let step = 0; step < 800; step++) {
        const roll = rnd();
        const ids = [...replicas.keys()];
        const pick = replicas.get(ids[Math.floor(rnd() * ids.length)] ?? '');
        if (roll < 0.05 && replicas.size < 5) join();
        else if (roll < 0.08 && replicas.size > 1 && pick) {
          // Leaving or crashing: it stops acting (a crashed one fences itself before its Lease expires for others).
          pick.constraints = [];
          replicas.delete(pick.id);
          leases.delete(pick.id);
        } else if (roll < 0.5 && pick) {
          // It reads the Leases (late: a snapshot of now).
          pick.seen = new Map(leases);
        } else if (pick) {
          // It decides on what it read (its own Lease it knows first-hand), applies, then acknowledges.
          const live: Member[] = [...pick.seen]
            .filter(([id]) => id !== pick.id)
            .map(([identity, acknowledged]) => ({ identity, acknowledged }))
            .concat(leases.has(pick.id) ? [{ identity: pick.id, acknowledged: leases.get(pick.id) }] : []);
          const d = decideShards(pick.state, pick.id, live);
          pick.state = d.state;
          pick.constraints = d.constraints;
          if (d.view.includes(pick.id)) leases.set(pick.id, viewId(d.view));
        }
        for (const ns of sample) {
          const owners = [...replicas.values()].filter((r) => owns(r.id, ns, r.constraints)).map((r) => r.id);
          expect(owners.length, `step ${step}: ${ns} owned by ${owners.join(', ')}`).toBeLessThanOrEqual(1);
          if (owners.length === 1) settledSteps++;
        }
      }
      // The protocol must also make progress: namespaces are owned most of the time.
      expect(settledSteps).toBeGreaterThan(800 * sample.length * 0.2);
    },
    60_000,
  ); // thousands of steps each: seconds on a loaded 2-core machine, beyond vitest's 5 s default
});
