// Reads workloads and restarts them as `kubectl rollout restart` does, one annotation on the pod template.
import { FIELD_MANAGER } from '../api/constants.js';
import { parseWorkload, restartedForKey, type ObservedWorkload, type RestartTarget } from '../api/workload.js';
import { isConflict, isNotFound, type ApiError } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

/**
 * A workload as far as restarting it needs, and how to restart exactly the version read (`restart`, whose consent
 * is checked on it: one changed meanwhile is a conflict); or why it cannot be had (the apiserver's refusal: RBAC, an
 * outage).
 */
export type WorkloadRead =
  | { readonly kind: 'found'; readonly workload: ObservedWorkload; restart(userGroupName: string, value: string): Promise<RestartResult> }
  | { readonly kind: 'missing' }
  | { readonly kind: 'refused'; readonly error: ApiError };

/** What a restart came to: done; someone wrote first ('changed') or it was deleted ('gone'); or refused. */
export type RestartResult =
  | { readonly kind: 'restarted' }
  | { readonly kind: 'conflict'; readonly conflict: 'changed' | 'gone' }
  | { readonly kind: 'refused'; readonly error: ApiError };

export interface WorkloadRestarterOptions {
  /** Runs before every write; throws when this replica does not hold its Lease (by the clock). */
  readonly fence?: () => void;
}

/**
 * Restarts workloads the way `kubectl rollout restart` does: a pod-template annotation changes, and the
 * workload's own controller rolls its pods by its update strategy. Nothing else of the workload is read or kept.
 */
export class WorkloadRestarter {
  constructor(
    private readonly client: KubeClient,
    private readonly options: WorkloadRestarterOptions = {},
  ) {}

  async read(namespace: string, target: RestartTarget): Promise<WorkloadRead> {
    const res = await call(this.client, 'GET', paths.workload(namespace, target.kind, target.name));
    if (!res.ok) return isNotFound(res.error) ? { kind: 'missing' } : { kind: 'refused', error: res.error };
    const workload = parseWorkload(res.body);
    if (!workload.ok) throw new Error(`the apiserver returned a ${target.kind} that cannot be parsed: ${workload.error}`);
    const { resourceVersion } = workload.value;
    return {
      kind: 'found',
      workload: workload.value,
      restart: (userGroupName, value) => this.restart(namespace, target, resourceVersion, userGroupName, value),
    };
  }

  /**
   * Sets `restart.usergroup.dev/<userGroupName>` on the pod template of exactly the version that was read (and
   * whose consent was checked): a workload changed since is read and decided again.
   */
  private async restart(namespace: string, target: RestartTarget, resourceVersion: string, userGroupName: string, value: string): Promise<RestartResult> {
    this.options.fence?.();
    const res = await call(this.client, 'PATCH', paths.workload(namespace, target.kind, target.name), {
      query: { fieldManager: FIELD_MANAGER },
      body: { metadata: { resourceVersion }, spec: { template: { metadata: { annotations: { [restartedForKey(userGroupName)]: value } } } } },
      contentType: 'application/merge-patch+json',
    });
    if (res.ok) return { kind: 'restarted' };
    if (isConflict(res.error)) return { kind: 'conflict', conflict: 'changed' };
    if (isNotFound(res.error)) return { kind: 'conflict', conflict: 'gone' };
    return { kind: 'refused', error: res.error };
  }
}
