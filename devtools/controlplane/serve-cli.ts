// `npm run controlplane -- --kubeconfig <path>`: the test control plane in the foreground, for people.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot } from '../repo-root.js';
import { ControlPlane } from './controlplane.js';

const { values } = parseArgs({
  options: { kubeconfig: { type: 'string', default: path.resolve('.controlplane/kubeconfig') }, help: { type: 'boolean', short: 'h' } },
});
if (values.help) {
  process.stdout.write(
    'usage: npm run controlplane -- [--kubeconfig <path>]\n\nStarts etcd, kube-apiserver and kube-controller-manager on loopback\nand writes an admin kubeconfig (default .controlplane/kubeconfig). Ctrl-C stops it.\n',
  );
  process.exit(0);
}

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const cp = await ControlPlane.start({ kubeconfigPath: path.resolve(values.kubeconfig), crds: [path.join(repoRoot, 'crds')], progress: log });
log(`\nkube-apiserver ${cp.binaries.versions.kubernetes} at ${cp.serverUrl}`);
log(`kubeconfig written to ${cp.kubeconfigPath}`);
log(`try: ${cp.binaries.kubectl} --kubeconfig ${cp.kubeconfigPath} get namespaces`);
log('Ctrl-C (or SIGTERM) stops it.');

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  log(`\n${signal}: stopping the control plane`);
  cp.stop().then(
    () => {
      log('stopped');
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`stop failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
// Keep the event loop alive: the harness unrefs its children so tests never hang on them.
setInterval(() => undefined, 1 << 30);
