import { createHash } from 'node:crypto';
import type { SimStats } from '../../../src/sim/stats.js';
import { INJECTED_FAULTS, type InjectedFault } from '../../../src/sim/faults.js';
import type { ControllerProcess } from '../../support/controller-process.js';

/** Helpers of the service-fault scenarios (1. service faults, 6. hostile service responses). */

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

type Operations = SimStats['operations'];

/** Every call the simulator saw for one operation, whatever its outcome. */
export function callsOf(operations: Operations, operation: keyof Operations): number {
  return Object.values(operations[operation]).reduce((a, b) => a + b, 0);
}

/** Injected faults per kind, PUT and POST together (only kinds that happened). */
export function injectedByKind(stats: SimStats): Partial<Record<InjectedFault, number>> {
  const out: Partial<Record<InjectedFault, number>> = {};
  for (const fault of INJECTED_FAULTS) {
    const n = stats.operations.upsert[fault] + stats.operations.rotate[fault];
    if (n > 0) out[fault] = n;
  }
  return out;
}

export function injectedTotal(stats: SimStats): number {
  return Object.values(injectedByKind(stats)).reduce((a, b) => a + b, 0);
}

/** The difference of two snapshots (later - earlier), per operation and outcome. */
export function diffStats(later: SimStats, earlier: SimStats): SimStats {
  const operations = {} as Record<keyof Operations, Record<string, number>>;
  for (const op of ['upsert', 'rotate'] as const) {
    const outcomes: Record<string, number> = {};
    for (const [outcome, n] of Object.entries(later.operations[op])) {
      outcomes[outcome] = n - earlier.operations[op][outcome as keyof Operations[typeof op]];
    }
    operations[op] = outcomes;
  }
  const byId = (later: Readonly<Record<string, number>>, earlier: Readonly<Record<string, number>>): Record<string, number> => {
    const diff: Record<string, number> = {};
    for (const [id, n] of Object.entries(later)) {
      const d = n - (earlier[id] ?? 0);
      if (d !== 0) diff[id] = d;
    }
    return diff;
  };
  return {
    operations: operations as unknown as Operations,
    spikes: { upsert: later.spikes.upsert - earlier.spikes.upsert, rotate: later.spikes.rotate - earlier.spikes.rotate },
    rotationsByUserGroupId: byId(later.rotationsByUserGroupId, earlier.rotationsByUserGroupId),
    upsertsByUserGroupId: byId(later.upsertsByUserGroupId, earlier.upsertsByUserGroupId),
  };
}

/** Log lines that mean a reconcile escaped its own error handling, or failed outside a service call. */
export interface ProcessHealth {
  readonly alive: boolean;
  readonly exit: string | undefined;
  /** "workers started" lines: more than one would mean the controller restarted its workers. */
  readonly workerStarts: number;
  /** "reconcile threw": an exception escaped the reconciler (a bug). */
  readonly threw: number;
  /** "reconcile failed": an unexpected error inside a reconcile (e.g. an apiserver error), retried. */
  readonly failed: number;
  readonly sample: readonly string[];
}

export function processHealth(c: ControllerProcess): ProcessHealth {
  const threw = c.logs.filter((l) => l.json?.['msg'] === 'reconcile threw');
  const failed = c.logs.filter((l) => l.json?.['msg'] === 'reconcile failed');
  const exitCode = c.child.exitCode;
  const signal = c.child.signalCode;
  return {
    alive: !c.exited(),
    exit: c.exited() ? `exit code ${exitCode ?? 'none'}, signal ${signal ?? 'none'}` : undefined,
    workerStarts: c.logs.filter((l) => l.json?.['msg'] === 'workers started').length,
    threw: threw.length,
    failed: failed.length,
    sample: [...threw, ...failed].slice(0, 5).map((l) => l.text),
  };
}

export const fmt = (n: number): string => n.toLocaleString('en-US');
