// `npm run node:up`: a one-node cluster to work with by hand (the e2e suite's, devtools/node), up until
// Ctrl-C. run-in-node.ts makes the node's namespaces and runs this inside them; the apiserver and the Pods are
// reachable only from there, so it prints the nsenter line that gets you in. With UGO_E2E_OPERATOR_IMAGE naming
// an image tarball (`npm run image -- /tmp/operator.tar`), the operator image is imported too.
import fs from 'node:fs';
import path from 'node:path';
import { CLUSTER_FILE, startOneNodeCluster, type ClusterFile } from './cluster.js';
import { OPERATOR_IMAGE, OPERATOR_IMAGE_ENV } from './images.js';
import { layoutFromEnv } from './layout.js';

const layout = layoutFromEnv();
if (!layout) {
  process.stderr.write("serve-cli: runs inside a node's namespaces: use `npm run node:up`\n");
  process.exit(2);
}
const log = (line: string): void => void process.stderr.write(`[node:up] ${line}\n`);
const operatorImage = process.env[OPERATOR_IMAGE_ENV];
const cluster = await startOneNodeCluster(layout, { images: operatorImage ? [operatorImage] : [], progress: log });
const bins = cluster.controlPlane.binaries;
const state: ClusterFile = {
  pid: process.pid,
  holderPid: layout.holderPid,
  kubeconfig: cluster.controlPlane.kubeconfigPath,
  kubectl: bins.kubectl,
  helm: bins.helm,
};
fs.writeFileSync(path.join(layout.root, CLUSTER_FILE), JSON.stringify(state));
log(`node ${layout.nodeName} Ready (${layout.address}); logs in ${path.join(layout.root, 'logs')}`);
log(`in another shell: sudo nsenter -t ${layout.holderPid} -n -m -- ${bins.kubectl} --kubeconfig ${state.kubeconfig} get nodes`);
if (operatorImage) log(`operator image: ${OPERATOR_IMAGE.repository}:${OPERATOR_IMAGE.tag} (image.pullPolicy=Never)`);
log('Ctrl-C stops it and tears the node down');

// The daemons do not hold the event loop open (their handles are unref'd): this does, until a signal.
const alive = setInterval(() => undefined, 3_600_000);
await new Promise<void>((resolve) => {
  process.once('SIGINT', resolve);
  process.once('SIGTERM', resolve);
  process.once('SIGHUP', resolve);
});
clearInterval(alive);
await cluster.stop();
