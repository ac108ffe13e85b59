import { FIELD_MANAGER } from '../api/constants.js';
import { parseWorkload, restartedForKey, type ObservedWorkload, type RestartTarget } from '../api/workload.js';
import { isConflict, isNotFound } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

export type RestartResult = { readonly ok: true } | { readonly ok: false; readonly conflict: 'changed' | 'gone' };

/**
 * Restarts workloads the way `kubectl rollout restart` does: a pod-template annotation changes, and the
 * workload's own controller rolls its pods by its update strategy. Nothing else of the workload is read or kept.
 */
export class WorkloadRestarter {
  constructor(private readonly client: KubeClient) {}

  async get(namespace: string, target: RestartTarget): Promise<ObservedWorkload | undefined> {
    const res = await call(this.client, 'GET', paths.workload(namespace, target.kind, target.name));
    if (!res.ok) {
      if (isNotFound(res.error)) return undefined;
      throw res.error;
    }
    const workload = parseWorkload(res.body);
    if (!workload.ok) throw new Error(`the apiserver returned a ${target.kind} that cannot be parsed: ${workload.error}`);
    return workload.value;
  }

  /**
   * Sets `restart.usergroup.dev/<userGroupName>` on the pod template of exactly the version that was read (and
   * whose consent was checked): a workload changed since is read and decided again.
   */
  async restart(namespace: string, target: RestartTarget, resourceVersion: string, userGroupName: string, value: string): Promise<RestartResult> {
    const res = await call(this.client, 'PATCH', paths.workload(namespace, target.kind, target.name), {
      query: { fieldManager: FIELD_MANAGER },
      body: { metadata: { resourceVersion }, spec: { template: { metadata: { annotations: { [restartedForKey(userGroupName)]: value } } } } },
      contentType: 'application/merge-patch+json',
    });
    if (res.ok) return { ok: true };
    if (isConflict(res.error)) return { ok: false, conflict: 'changed' };
    if (isNotFound(res.error)) return { ok: false, conflict: 'gone' };
    throw res.error;
  }
}
