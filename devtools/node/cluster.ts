import path from 'node:path';
import { ControlPlane } from '../controlplane/controlplane.js';
import { ensureNodeBinaries } from './binaries.js';
import { buildBaseImages } from './images.js';
import type { NodeLayout } from './layout.js';
import { Node } from './node.js';

/** Written once the cluster is up, into the node's work dir: how to reach it, and who serves it. */
export const CLUSTER_FILE = 'cluster.json';

export interface ClusterFile {
  /** This process: stopping it (any signal) ends the cluster; the launcher then tears the node down. */
  readonly pid: number;
  readonly holderPid: number;
  readonly kubeconfig: string;
  readonly kubectl: string;
  readonly helm: string;
}

export interface OneNodeCluster {
  readonly controlPlane: ControlPlane;
  readonly node: Node;
  /** The node's daemons, then the control plane. */
  stop(): Promise<void>;
}

/**
 * The control plane served on the node address and one node joined to it, with busybox and pause imported and
 * `images` besides. Runs inside the node's namespaces (run-in-node.ts): everything started here is a child of
 * this process, so the daemons, the caller, kubectl and helm share the node's network.
 */
export async function startOneNodeCluster(
  layout: NodeLayout,
  options: { images?: readonly string[]; progress?: (line: string) => void } = {},
): Promise<OneNodeCluster> {
  const progress = options.progress ?? (() => undefined);
  const binaries = ensureNodeBinaries();
  progress(`node binaries: ${binaries.dir}`);
  const controlPlane = await ControlPlane.start({
    // No CRDs: what runs on the node installs its own (the chart does, and its uninstall must leave them).
    nodeAddress: layout.address,
    kubeconfigPath: path.join(layout.root, 'admin.kubeconfig'),
    progress: (line) => progress(`[controlplane] ${line}`),
  });
  let node: Node | undefined;
  try {
    const base = await buildBaseImages(path.join(layout.root, 'images'));
    node = await Node.start({
      layout,
      binaries,
      kubeconfig: controlPlane.kubeconfigPath,
      kubectl: controlPlane.binaries.kubectl,
      images: [...base, ...(options.images ?? [])],
      progress: (line) => progress(`[node] ${line}`),
    });
  } catch (err) {
    await node?.stop();
    await controlPlane.stop();
    throw err;
  }
  const running = node;
  return {
    controlPlane,
    node: running,
    async stop() {
      await running.stop();
      await controlPlane.stop();
    },
  };
}
