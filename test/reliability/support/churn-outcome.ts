import { expect } from 'vitest';
import type { TestEnv } from '../../support/operator.js';
import { specDrift, type Churn, type SecretWatch } from './churn.js';
import { awaitInvariant, type InvariantResult, type RotationLedger } from './invariant.js';
import type { ScenarioRow } from './report.js';
import { sized } from './scale.js';

/** The end state of a churn scenario, measured the same way by each of them. */
export interface ChurnOutcome {
  /** Undefined when the scenario aborted before its end. */
  readonly result: InvariantResult | undefined;
  /** Groups whose name/properties at the service differ from their spec. */
  readonly drift: readonly string[];
  readonly wallMs: number;
  readonly calls: ReturnType<TestEnv['calls']>;
  /** Outcomes other than success at the (fault-free) simulator, with their counts. */
  readonly faultsAtSim: readonly [string, number][];
  /** Rotations the controller found already done at the service (POST answered, process gone before the Secret write). */
  readonly completedAfterRestart: number;
}

/** Stops the churn, then waits for the invariant (unless the scenario aborted) and measures the rest. */
export async function settleChurn(env: TestEnv, churn: Churn, ledger: RotationLedger, failure: unknown, started: number): Promise<ChurnOutcome> {
  await churn.stop();
  const result = failure === undefined ? await awaitInvariant(env, ledger, sized(240_000, 120_000)) : undefined;
  const drift = failure === undefined ? await specDrift(env) : [];
  const wallMs = Date.now() - started;
  const calls = env.calls();
  const faultsAtSim = Object.entries(calls.upsert)
    .concat(Object.entries(calls.rotate))
    .filter(([outcome, n]) => !['ok', 'created', 'updated'].includes(outcome) && n > 0);
  const completedAfterRestart = (await env.events.listNamespacedEvent({ namespace: env.namespace })).items.filter(
    (ev) => ev.reason === 'TokenRotated' && (ev.note ?? '').includes('completed after a restart'),
  ).length;
  return { result, drift, wallMs, calls, faultsAtSim, completedAfterRestart };
}

/** The summary-row fields that come from the outcome (-1: not measured, the scenario aborted). */
export function outcomeRow(
  outcome: ChurnOutcome,
  churn: Pick<Churn, 'groups'>,
): Pick<ScenarioRow, 'objects' | 'converged' | 'tokensLost' | 'duplicateRotations' | 'wallMs'> {
  return {
    objects: outcome.result?.objects ?? churn.groups.length,
    converged: outcome.result?.converged ?? false,
    tokensLost: outcome.result?.tokensLost ?? -1,
    duplicateRotations: outcome.result?.duplicateRotations ?? -1,
    wallMs: outcome.wallMs,
  };
}

/** What every churn scenario must end with: the invariant, nothing lost or drifted, exactly the minimum of calls. */
export function expectChurnHeld(
  outcome: ChurnOutcome,
  churn: Pick<Churn, 'errors'>,
  secrets: Pick<SecretWatch, 'deleted'>,
  ledger: RotationLedger,
  groups: number,
): void {
  const { result } = outcome;
  expect(result?.problems ?? [], 'invariant problems').toEqual([]);
  expect(result?.converged).toBe(true);
  expect(result?.tokensLost).toBe(0);
  expect(result?.duplicateRotations).toBe(0);
  expect(result?.missingRotations).toBe(0);
  expect(secrets.deleted, 'owned token Secrets deleted during the run').toEqual([]);
  expect(outcome.drift, 'groups whose name/properties at the service differ from the spec').toEqual([]);
  expect(churn.errors).toEqual([]);
  expect(outcome.faultsAtSim, 'no call may fail at the (fault-free) simulator').toEqual([]);
  expect(outcome.calls.rotate.ok).toBe(ledger.total);
  expect(outcome.calls.upsert.created).toBe(groups);
}
