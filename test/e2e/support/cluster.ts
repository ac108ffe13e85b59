import path from 'node:path';
import { inject } from 'vitest';
import { run } from '../../../devtools/node/exec.js';

export { waitFor } from '../../../devtools/node/exec.js';

/** kubectl of the control plane's build against the e2e node's cluster. */
export function kubectl(args: readonly string[], input?: string, timeoutMs = 120_000): Promise<string> {
  return run(path.join(inject('binDir'), 'kubectl'), ['--kubeconfig', inject('kubeconfig'), ...args], { timeoutMs, ...(input !== undefined ? { input } : {}) });
}

export function helm(args: readonly string[], timeoutMs = 400_000): Promise<string> {
  return run(path.join(inject('binDir'), 'helm'), ['--kubeconfig', inject('kubeconfig'), ...args], { timeoutMs });
}

export async function getJson<T>(args: readonly string[]): Promise<T> {
  return JSON.parse(await kubectl([...args, '-o', 'json'])) as T;
}

export interface PodView {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
  status: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      state?: { terminated?: { exitCode: number; reason?: string } };
      lastState?: { terminated?: { exitCode: number } };
    }[];
  };
}

export function podReady(pod: PodView): boolean {
  return pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** Pods of a label selector in a namespace (not those being deleted). */
export async function pods(namespace: string, selector: string): Promise<PodView[]> {
  const list = await getJson<{ items: PodView[] }>(['-n', namespace, 'get', 'pods', '-l', selector]);
  return list.items.filter((p) => p.metadata.deletionTimestamp === undefined);
}

export interface LeaseView {
  spec: { holderIdentity?: string; leaseTransitions?: number };
}

/** The Lease holder's pod name: the operator's identity is `<POD_NAME>_<8 hex>`. */
export async function leaderPod(namespace: string, lease: string): Promise<string | undefined> {
  const view = await getJson<LeaseView>(['-n', namespace, 'get', 'lease', lease]);
  const holder = view.spec.holderIdentity ?? '';
  return holder === '' ? undefined : holder.replace(/_[0-9a-f]{8}$/, '');
}
