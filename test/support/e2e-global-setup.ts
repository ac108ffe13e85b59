import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startOneNodeCluster } from '../../devtools/node/cluster.js';
import { operatorImageTarball, OPERATOR_IMAGE } from '../../devtools/node/images.js';
import { layoutFromEnv } from '../../devtools/node/layout.js';
import { PREVIOUS_OPERATOR_IMAGE_ENV } from '../e2e/support/previous-release.js';

declare module 'vitest' {
  export interface ProvidedContext {
    nodeAddress: string;
    nodeName: string;
    nodeRoot: string;
    operatorImage: { repository: string; tag: string };
    /**
     * The previous release's image as an OCI layout tarball, when `npm run test:e2e` built it (else null):
     * test/e2e/upgrade.test.ts pushes it to its registry, from which the kubelet pulls it.
     */
    previousOperatorImageTarball: string | null;
  }
}

/**
 * One node and its control plane for the whole e2e run (`npm run test:e2e`): this process already runs inside
 * the node's namespaces (devtools/node/run-in-node.ts made them), so the control plane, the node's daemons,
 * the tests, kubectl and helm share one network in which nothing leaves.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const layout = layoutFromEnv();
  if (!layout) throw new Error("the e2e tests run inside a node's namespaces: use `npm run test:e2e` (as root), not vitest directly");
  const started = Date.now();
  const log = (line: string): void => void process.stderr.write(`[e2e ${((Date.now() - started) / 1000).toFixed(1)} s] ${line}\n`);
  const cluster = await startOneNodeCluster(layout, { images: [operatorImageTarball()], progress: log });
  log(`node ${layout.nodeName} Ready; logs in ${path.join(layout.root, 'logs')} (UGO_E2E_KEEP=1 keeps them)`);
  const cp = cluster.controlPlane;
  project.provide('kubeconfig', cp.kubeconfigPath);
  project.provide('binDir', cp.binaries.dir);
  project.provide('kubernetesVersion', cp.binaries.versions.kubernetes);
  project.provide('nodeAddress', layout.address);
  project.provide('nodeName', layout.nodeName);
  project.provide('nodeRoot', layout.root);
  project.provide('operatorImage', { ...OPERATOR_IMAGE });
  project.provide('previousOperatorImageTarball', process.env[PREVIOUS_OPERATOR_IMAGE_ENV] ?? null);
  return () => cluster.stop();
}
