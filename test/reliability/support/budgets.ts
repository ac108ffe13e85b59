import { RETRY_TRANSIENT } from '../../../src/controller/retry-policy.js';

/**
 * Time budgets derived from the retry design (src/controller/retry-policy.ts), not tuned to pass.
 *
 * Under random per-call faults a rotation attempt succeeds with probability q (two good calls in a row
 * in the worst state: the recovery PUT and the POST). k attempts all fail with (1 - q)^k, so for n
 * rotations to all complete with probability ≥ 1 - ε, each needs k = ln(ε / n) / ln(1 - q) attempts.
 * An attempt waits at most the transient backoff cap before it starts and then makes its calls; the
 * rare slow call (a slow-drip answer) runs into the call timeout, at most about one per attempt.
 */
function attemptsFor(q: number, rotations: number, epsilon = 1e-4): number {
  return Math.ceil(Math.log(epsilon / rotations) / Math.log(1 - q));
}

/** Budget for n rotations under a share f of failing calls, with the controller's call timeout. */
export function rotationBudgetMs(failingShare: number, rotations: number, callTimeoutMs: number): { attempts: number; q: number; budgetMs: number } {
  const q = (1 - failingShare) ** 2;
  const attempts = attemptsFor(q, rotations);
  return { attempts, q, budgetMs: attempts * (RETRY_TRANSIENT.capMs + callTimeoutMs) };
}
