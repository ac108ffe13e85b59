// Restart policy: what a new token does to spec.rolloutRestartTargets (pure; the step is usergroup/consumers.ts).
import type { ObservedWorkload, RestartTarget } from '../../api/workload.js';
import { oncePerToken, type PerToken } from './once-per-token.js';

/**
 * What spec.rolloutRestartTargets call for in this reconcile: each target once per token (once-per-token.ts), and a
 * target carries the token it was restarted for, so a run that dies half-way restarts only the rest.
 */
export function decideRestarts(input: {
  readonly targets: readonly RestartTarget[];
  /** status.rolloutRestarts.tokenIssuedTime. */
  readonly restartedFor: string | undefined;
  /** The issue time of the token this reconcile found stored (before any change it made). */
  readonly foundIssuedAt: string | undefined;
  /** The issue time of the token stored now. */
  readonly issuedAt: string;
}): PerToken {
  return oncePerToken({ wanted: input.targets.length > 0, doneFor: input.restartedFor, foundIssuedAt: input.foundIssuedAt, issuedAt: input.issuedAt });
}

/** What to do with one target. */
export type WorkloadAction =
  | 'missing'
  /** Its owner did not name this UserGroup in usergroup.dev/restart-on-token-change. */
  | 'not-allowed'
  /** Already restarted for this token (by a run that died before recording it). */
  | 'current'
  | 'restart';

export function workloadAction(workload: ObservedWorkload | undefined, userGroupName: string, issuedAt: string): WorkloadAction {
  if (!workload) return 'missing';
  if (!workload.consentsTo.includes(userGroupName)) return 'not-allowed';
  return workload.restartedFor[userGroupName] === issuedAt ? 'current' : 'restart';
}

/** kind/name, as kubectl names a workload. */
export function describeTarget(target: RestartTarget): string {
  return `${target.kind}/${target.name}`;
}
