/**
 * Where one run's node lives: host-visible names made unique per run (network namespace, cgroup parent,
 * work dir), everything else private to the namespaces and therefore the same in every run.
 */
export interface NodeLayout {
  /** ugo-e2e-<launcher pid>: the network namespace (/run/netns/<name>) and the cgroup parent in every hierarchy. */
  readonly name: string;
  /** Work dir on the host: logs, containerd and kubelet state, images, the kubeconfig. Removed at teardown. */
  readonly root: string;
  /** eth0 inside the network namespace: the node's InternalIP, what Pods reach the apiserver and the simulator on. */
  readonly address: string;
  /** The Node object's name (/etc/hosts inside the mount namespace resolves it to `address`). */
  readonly nodeName: string;
  /** The process holding the private mount namespace (inside the network namespace). */
  readonly holderPid: number;
  readonly cgroupVersion: 1 | 2;
}

export const NODE_ADDRESS = '10.250.0.2';
export const NODE_NAME = 'ugo-e2e-node';
/** Pod addresses (the CNI bridge's host-local range) and kube-proxy's --cluster-cidr. */
export const POD_CIDR = '10.244.0.0/24';
/** How the launcher hands the layout to the command it runs inside the namespaces. */
export const LAYOUT_ENV = 'UGO_E2E_NODE';

export function layoutToEnv(layout: NodeLayout): string {
  return JSON.stringify(layout);
}

/** The layout the launcher (run-in-node.ts) put in the environment; undefined when not run under it. */
export function layoutFromEnv(env: NodeJS.ProcessEnv = process.env): NodeLayout | undefined {
  const text = env[LAYOUT_ENV];
  if (!text) return undefined;
  const raw: unknown = JSON.parse(text);
  if (typeof raw !== 'object' || raw === null) throw new Error(`${LAYOUT_ENV} is not a JSON object`);
  const get = (key: string): unknown => (raw as Record<string, unknown>)[key];
  const str = (key: string): string => {
    const v = get(key);
    if (typeof v !== 'string' || v === '') throw new Error(`${LAYOUT_ENV}.${key} is not a non-empty string`);
    return v;
  };
  const holderPid = get('holderPid');
  const cgroupVersion = get('cgroupVersion');
  if (typeof holderPid !== 'number' || !Number.isInteger(holderPid)) throw new Error(`${LAYOUT_ENV}.holderPid is not an integer`);
  if (cgroupVersion !== 1 && cgroupVersion !== 2) throw new Error(`${LAYOUT_ENV}.cgroupVersion is not 1 or 2`);
  return { name: str('name'), root: str('root'), address: str('address'), nodeName: str('nodeName'), holderPid, cgroupVersion };
}
