import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { ControlPlane } from '../../src/devtools/controlplane/controlplane.js';
import { ensureNodeBinaries } from '../../src/devtools/node/binaries.js';
import { buildBaseImages, operatorImageTarball, OPERATOR_IMAGE } from '../../src/devtools/node/images.js';
import { layoutFromEnv } from '../../src/devtools/node/layout.js';
import { Node } from '../../src/devtools/node/node.js';

declare module 'vitest' {
  export interface ProvidedContext {
    nodeAddress: string;
    nodeName: string;
    nodeRoot: string;
    operatorImage: { repository: string; tag: string };
  }
}

/**
 * One node and its control plane for the whole e2e run (`npm run test:e2e`): this process already runs inside
 * the node's namespaces (src/devtools/node/run-in-node.ts made them), so the control plane, the node's daemons,
 * the tests, kubectl and helm share one network in which nothing leaves.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const layout = layoutFromEnv();
  if (!layout) throw new Error("the e2e tests run inside a node's namespaces: use `npm run test:e2e` (as root), not vitest directly");
  const started = Date.now();
  const log = (line: string): void => void process.stderr.write(`[e2e ${((Date.now() - started) / 1000).toFixed(1)} s] ${line}\n`);
  const binaries = ensureNodeBinaries();
  log(`node binaries: ${binaries.dir}`);
  const images = path.join(layout.root, 'images');
  const operator = operatorImageTarball();
  const cp = await ControlPlane.start({
    // No CRDs here: the chart installs them (and its uninstall must leave them).
    nodeAddress: layout.address,
    kubeconfigPath: path.join(layout.root, 'admin.kubeconfig'),
    progress: (line) => log(`[controlplane] ${line}`),
  });
  let node: Node | undefined;
  try {
    const base = await buildBaseImages(images);
    node = await Node.start({
      layout,
      binaries,
      kubeconfig: cp.kubeconfigPath,
      kubectl: cp.binaries.kubectl,
      images: [...base, operator],
      progress: (line) => log(`[node] ${line}`),
    });
    log(`node ${layout.nodeName} Ready; logs in ${path.join(layout.root, 'logs')} (UGO_E2E_KEEP=1 keeps them)`);
  } catch (err) {
    await node?.stop();
    await cp.stop();
    throw err;
  }
  project.provide('kubeconfig', cp.kubeconfigPath);
  project.provide('binDir', cp.binaries.dir);
  project.provide('kubernetesVersion', cp.binaries.versions.kubernetes);
  project.provide('nodeAddress', layout.address);
  project.provide('nodeName', layout.nodeName);
  project.provide('nodeRoot', layout.root);
  project.provide('operatorImage', { ...OPERATOR_IMAGE });
  const running = node;
  return async () => {
    await running.stop();
    await cp.stop();
  };
}
