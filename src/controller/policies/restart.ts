// Restart policy: what a new token does to spec.rolloutRestartTargets (pure; the step is usergroup/restart-consumers.ts).
import type { ObservedWorkload, RestartTarget } from '../../api/workload.js';

/**
 * What spec.rolloutRestartTargets call for in this reconcile. The unit is the token, named by its issue time:
 * status records the one the targets were last restarted for, so a spec-only sync (same token) restarts
 * nothing, a new token restarts each target once, and a run that dies half-way restarts only the rest
 * (each target carries the token it was restarted for).
 */
export type RestartPlan =
  /** No targets, or they were restarted for (or found current with) this token already. */
  | { readonly kind: 'none' }
  /** Targets listed for the first time: their pods already run with this token; remember it, restart nothing. */
  | { readonly kind: 'record'; readonly issuedAt: string }
  /** The token changed since the targets were last restarted. */
  | { readonly kind: 'restart'; readonly issuedAt: string };

export function decideRestarts(input: {
  readonly targets: readonly RestartTarget[];
  /** status.rolloutRestarts.tokenIssuedTime. */
  readonly restartedFor: string | undefined;
  /** The issue time of the token this reconcile found stored (before any change it made). */
  readonly foundIssuedAt: string | undefined;
  /** The issue time of the token stored now. */
  readonly issuedAt: string;
}): RestartPlan {
  const { targets, restartedFor, foundIssuedAt, issuedAt } = input;
  if (targets.length === 0 || restartedFor === issuedAt) return { kind: 'none' };
  // First listed: what counts is whether the token changed in this very reconcile. No token before (a first
  // sync) is no change: the pods waiting for the Secret start with this token.
  const since = restartedFor ?? foundIssuedAt ?? issuedAt;
  return since === issuedAt ? { kind: 'record', issuedAt } : { kind: 'restart', issuedAt };
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
