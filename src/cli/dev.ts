import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { renderStatusTable } from './kubectl/status-table.js';
import { repoRoot } from '../devcluster/binaries.js';
import { ControlPlane } from '../devcluster/controlplane.js';
import { createLogger } from '../observability/log.js';
import { SecretValue } from '../service/secret-value.js';
import { startSimulator, type Simulator } from '../sim/server.js';
import { parseRunConfig } from './config.js';
import { loadKubeConfig, startOperator, type Io, type RunningOperator } from './run.js';

const devUsage = `usage: usergroup-operator dev [--dir <path>] [--examples <path>]

Everything on this machine, nothing to configure: starts a local Kubernetes
control plane, the service simulator, applies crds/ and the examples, runs the
controller, and shows the UserGroups live. Ctrl-C stops it all.

  --dir <path>       where the kubeconfig and logs go (default .controlplane)
  --examples <path>  manifests to apply (default deploy/examples)
`;

/** `usergroup-operator dev`: the main job on an embedded default, for people. */
export async function devCommand(argv: readonly string[], io: Io): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { dir: { type: 'string' }, examples: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (err) {
    io.err(`usergroup-operator dev: ${err instanceof Error ? err.message : String(err)}\n\n${devUsage}`);
    return 2;
  }
  if (values.help) {
    io.out(devUsage);
    return 0;
  }
  const dir = path.resolve(values.dir ?? '.controlplane');
  const examples = path.resolve(values.examples ?? path.join(repoRoot, 'deploy/examples'));
  fs.mkdirSync(dir, { recursive: true });
  const say = (line: string): void => io.out(`${line}\n`);

  let cp: ControlPlane | undefined;
  let sim: Simulator | undefined;
  let operator: RunningOperator | undefined;
  let view: NodeJS.Timeout | undefined;
  const shutdown = async (): Promise<void> => {
    if (view) clearInterval(view);
    await operator?.stop();
    await sim?.stop();
    await cp?.stop();
  };

  try {
    say('starting a local control plane (the first run builds it from Go modules: several minutes)');
    cp = await ControlPlane.start({ kubeconfigPath: path.join(dir, 'kubeconfig'), crds: [path.join(repoRoot, 'crds')], progress: (l) => say(`  ${l}`) });

    const apiKey = randomBytes(24).toString('hex');
    fs.writeFileSync(path.join(dir, 'sim-api-key'), apiKey, { mode: 0o600 });
    sim = await startSimulator({ apiKeys: [apiKey], faults: { latencyMs: 30, latencyJitterMs: 40 }, stateFile: path.join(dir, 'sim-state.json') });
    say(`service simulator at ${sim.url} (API key in ${path.join(dir, 'sim-api-key')})`);

    const kubectl = (args: string[]): Promise<string> =>
      new Promise((resolve, reject) =>
        execFile(cp!.binaries.kubectl, ['--kubeconfig', cp!.kubeconfigPath, ...args], (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(stdout))),
      );
    say(`applying ${examples}`);
    await kubectl(['apply', '-f', examples]);

    const parsed = parseRunConfig(['--metrics-addr', '0', '--health-addr', '0', '--log-level', 'info'], {});
    if (parsed.ok !== true) throw new Error('internal: the dev configuration does not parse');
    const logFile = path.join(dir, 'operator.log');
    const log = createLogger('info', fs.createWriteStream(logFile, { flags: 'a' }) as unknown as NodeJS.WritableStream & { write(s: string): boolean });
    operator = await startOperator(parsed.config, { url: sim.url, apiKey: new SecretValue(apiKey), allowInsecure: false }, log, await loadKubeConfig(cp.kubeconfigPath));
    say(`controller running (logs: ${logFile})\n`);

    const hints = [
      `export KUBECONFIG=${cp.kubeconfigPath}   # a kubectl of this version: ${cp.binaries.kubectl}`,
      'kubectl get usergroups',
      'kubectl annotate usergroup acme usergroup.dev/rotate-requested-at="$(date +%s)" --overwrite',
      "kubectl get secret acme -o jsonpath='{.data.token}' | base64 -d",
    ];
    const interactive = process.stdout.isTTY === true;
    let last = '';
    const render = (): void => {
      const groups = operator!.controller.userGroups.list();
      const table = renderStatusTable(groups, { allNamespaces: true, wide: false, now: Date.now() }).trimEnd();
      const { upsert, rotate } = sim!.stats().operations;
      const calls = `PUT created ${upsert.created}, updated ${upsert.updated}; POST rotated ${rotate.ok}`;
      const text = `${table}\n\nservice calls so far: ${calls}\n\ntry:\n${hints.map((h) => `  ${h}`).join('\n')}\n\nCtrl-C stops everything.\n`;
      // The AGE column changes every second: a terminal redraws for it, a log prints only real changes.
      const changed = interactive ? text : `${groups.map((g) => `${g.metadata.uid}@${g.metadata.resourceVersion}`).join(',')}|${calls}`;
      if (changed === last) return;
      last = changed;
      if (interactive) io.out(`\x1b[2J\x1b[H${text}`);
      else io.out(`${table}\n\n`);
    };
    render();
    view = setInterval(render, 1000);

    return await new Promise<number>((resolve) => {
      const stop = (): void => {
        say('\nstopping…');
        shutdown().then(() => resolve(0), (err: unknown) => {
          io.err(`stop failed: ${String(err)}\n`);
          resolve(1);
        });
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
  } catch (err) {
    io.err(`usergroup-operator dev: ${err instanceof Error ? err.message : String(err)}\n`);
    await shutdown();
    return 1;
  }
}


