// The plugin's cluster and namespace, chosen from the kubeconfig in kubectl's order.
import { KubeconfigNotFoundError, loadKubeAccess, type KubeAccess } from '../../kube/kubeconfig.js';
import type { ClusterFlags } from './args.js';

export interface ResolvedCluster {
  readonly access: KubeAccess;
  /** From -n, else the context's namespace, else "default": kubectl's order. */
  readonly namespace: string;
}

/**
 * The cluster as kubectl would pick it: --kubeconfig, else $KUBECONFIG, else
 * ~/.kube/config, else in-cluster; then --context.
 * Throws with a message fit for the user when none is usable.
 */
export async function resolveCluster(flags: ClusterFlags, env: NodeJS.ProcessEnv = process.env): Promise<ResolvedCluster> {
  let access: KubeAccess;
  try {
    access = await loadKubeAccess({ path: flags.kubeconfig, context: flags.context, env });
  } catch (err) {
    // Worded for this command's flags; the loader's own advice cannot know them.
    if (err instanceof KubeconfigNotFoundError) throw new Error('no kubeconfig: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config', { cause: err });
    throw err;
  }
  return { access, namespace: flags.namespace ?? access.namespace ?? 'default' };
}
