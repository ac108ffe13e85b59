import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterFlags } from './args.js';

export interface ResolvedCluster {
  readonly kc: KubeConfig;
  /** From -n, else the context's namespace, else "default": kubectl's order. */
  readonly namespace: string;
}

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * The cluster as kubectl would pick it: --kubeconfig, else $KUBECONFIG, else
 * ~/.kube/config, else in-cluster (client-node's loadFromDefault); then --context.
 * Throws with a message fit for the user when none is usable.
 */
export function resolveCluster(flags: ClusterFlags, env: NodeJS.ProcessEnv = process.env): ResolvedCluster {
  const kc = new KubeConfig();
  const source = flags.kubeconfig ?? (env['KUBECONFIG'] || undefined);
  try {
    if (flags.kubeconfig !== undefined) {
      kc.loadFromFile(flags.kubeconfig);
    } else {
      // Without any of these, loadFromDefault quietly falls back to http://localhost:8080, whose
      // eventual error ("HTTP protocol is not allowed …") would not tell the user what is missing.
      if (!source && !existsSync(path.join(os.homedir(), '.kube', 'config')) && !existsSync(SERVICE_ACCOUNT_TOKEN)) {
        throw new Error('no kubeconfig: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config');
      }
      kc.loadFromDefault();
    }
  } catch (err) {
    const text = err instanceof Error ? err.message : String(err);
    throw new Error(source ? `cannot load kubeconfig ${source}: ${text}` : text);
  }
  if (flags.context !== undefined) {
    if (!kc.getContextObject(flags.context)) throw new Error(`context "${flags.context}" does not exist in the kubeconfig`);
    kc.setCurrentContext(flags.context);
  }
  const contextNamespace = kc.getContextObject(kc.getCurrentContext())?.namespace;
  return { kc, namespace: flags.namespace ?? (contextNamespace || 'default') };
}
