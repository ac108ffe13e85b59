// `tsx devtools/node/run-in-node.ts [--keep] -- <command> [args…]`: runs a command inside a fresh node's
// namespaces (network + mount, see namespaces.ts) and tears the node down when it ends. `npm run test:e2e`
// runs vitest's e2e project this way; its global setup then starts the control plane and the node's daemons
// as its own children, so they, the tests, kubectl and helm all share the node's network: the apiserver is
// served on the node address, and Pods reach it through the default/kubernetes Service like on any cluster.
//
// Teardown (TeardownGuard) runs when the command ends, and also when this launcher dies (SIGKILL included):
// a detached shell waits on a pipe from this process. The command's own daemons are stopped first by its
// global setup (or by its Watchdog if it is killed). Needs root. UGO_E2E_KEEP=1 (or --keep) keeps the work dir.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TeardownGuard } from './guard.js';
import { LAYOUT_ENV, layoutToEnv } from './layout.js';
import { createNamespaces, nsenterArgs } from './namespaces.js';

const argv = process.argv.slice(2);
const keep = argv[0] === '--keep' || process.env['UGO_E2E_KEEP'] === '1';
const dash = argv.indexOf('--');
const command = dash >= 0 ? argv.slice(dash + 1) : argv.filter((a) => a !== '--keep');
if (command.length === 0) {
  process.stderr.write('usage: run-in-node.ts [--keep] -- <command> [args…]\n');
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  process.stderr.write('run-in-node: needs root (network and mount namespaces, cgroups)\n');
  process.exit(1);
}

const name = `ugo-e2e-${process.pid}`;
const root = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
// mkdtemp makes it 0700; containers (uid 65532) use state below it.
fs.chmodSync(root, 0o755);
const guard = new TeardownGuard(name, root, keep);
const log = (line: string): void => void process.stderr.write(`[node] ${line}\n`);

let code = 1;
try {
  const started = Date.now();
  const layout = await createNamespaces(name, root);
  log(`namespaces ${name} ready in ${Date.now() - started} ms (holder ${layout.holderPid}, work dir ${root})`);
  const tmp = path.join(root, 'tmp');
  fs.mkdirSync(tmp);
  const child = spawn('nsenter', [...nsenterArgs(layout.holderPid, process.cwd()), ...command], {
    stdio: 'inherit',
    env: { ...process.env, [LAYOUT_ENV]: layoutToEnv(layout), TMPDIR: tmp },
  });
  // Ctrl-C reaches the command too (same process group): let it stop on its own, then tear down.
  const forward = (signal: NodeJS.Signals): void => void child.kill(signal);
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', forward);
  process.on('SIGHUP', forward);
  code = await new Promise<number>((resolve) => {
    child.once('error', (err) => {
      log(`could not run ${command.join(' ')}: ${err.message}`);
      resolve(1);
    });
    child.once('exit', (exitCode, signal) => {
      if (signal) log(`${command[0] ?? ''} was killed by ${signal}`);
      resolve(exitCode ?? 1);
    });
  });
} catch (err) {
  log(`setting up the node failed: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  const t = Date.now();
  await guard.finish();
  log(`torn down in ${Date.now() - t} ms`);
}
process.exit(code);
