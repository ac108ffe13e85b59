// `npm start`: a local control plane, the simulator, the controller in this process and deploy/examples, with a live view.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { ROTATE_ANNOTATION } from '../src/api/constants.js';
import { parseRunConfig } from '../src/cli/config.js';
import { renderStatusTable } from '../src/cli/kubectl/status-table.js';
import { loadKubeConfig, startOperator, type Io, type RunningOperator } from '../src/cli/run.js';
import { createLogger } from '../src/observability/log.js';
import { flagsOnlyProblem, lastValue, scanArgv } from '../src/platform/argv.js';
import { repoRoot } from './repo-root.js';
import { ControlPlane } from './controlplane/controlplane.js';
import { startSimulator, type Simulator } from '../src/sim/server.js';

const devUsage = `usage: npm start -- [--dir <path>] [--examples <path>]

Everything on this machine, nothing to configure: starts a local Kubernetes
control plane, the service simulator, applies crds/ and the examples, runs the
controller, and shows the UserGroups live. Ctrl-C stops it all.

  --dir <path>       where the kubeconfig and logs go (default .controlplane)
  --examples <path>  manifests to apply (default deploy/examples)
`;

/** `npm start`: the main job on an embedded default, for people. */
export async function devCommand(argv: readonly string[], io: Io): Promise<number> {
  const scanned = scanArgv(argv, { dir: { arity: 'value' }, examples: { arity: 'value' }, help: { arity: 'switch', short: 'h' } });
  if (lastValue(scanned, 'help') === 'true') {
    io.out(devUsage);
    return 0;
  }
  const refused = flagsOnlyProblem(scanned, 'npm start');
  if (refused) {
    io.err(`npm start: ${refused}\n\n${devUsage}`);
    return 2;
  }
  const dir = path.resolve(lastValue(scanned, 'dir') ?? '.controlplane');
  const examples = path.resolve(lastValue(scanned, 'examples') ?? path.join(repoRoot, 'deploy/examples'));
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
    const controlPlane = await ControlPlane.start({
      kubeconfigPath: path.join(dir, 'kubeconfig'),
      crds: [path.join(repoRoot, 'crds')],
      progress: (l) => say(`  ${l}`),
    });
    cp = controlPlane;

    const apiKey = randomBytes(24).toString('hex');
    fs.writeFileSync(path.join(dir, 'sim-api-key'), apiKey, { mode: 0o600 });
    const simulator = await startSimulator({ apiKeys: [apiKey], faults: { latencyMs: 30, latencyJitterMs: 40 }, stateFile: path.join(dir, 'sim-state.json') });
    sim = simulator;
    say(`service simulator at ${sim.url} (API key in ${path.join(dir, 'sim-api-key')})`);

    const kubectl = (args: string[]): Promise<string> =>
      new Promise((resolve, reject) =>
        execFile(controlPlane.binaries.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, ...args], (err, stdout, stderr) =>
          err ? reject(new Error(stderr || err.message, { cause: err })) : resolve(stdout),
        ),
      );
    const manifests = localExamples(examples, sim.url, apiKey);
    const applied = path.join(dir, 'examples.yaml');
    fs.writeFileSync(applied, manifests.yaml, { mode: 0o600 });
    say(`applying ${examples} (its ClusterUserGroupService pointed at the simulator, with the API-key Secret it names)`);
    await kubectl(['apply', '-f', applied]);

    const flags = [
      '--metrics-addr',
      '0',
      '--health-addr',
      '0',
      '--log-level',
      'info',
      ...(manifests.defaultService ? ['--default-service', manifests.defaultService] : []),
    ];
    const parsed = parseRunConfig(flags, {});
    if (parsed.ok !== true) throw new Error('internal: the dev configuration does not parse');
    const logFile = path.join(dir, 'operator.log');
    const log = createLogger('info', fs.createWriteStream(logFile, { flags: 'a' }));
    const running = await startOperator(parsed.config, log, await loadKubeConfig(controlPlane.kubeconfigPath));
    operator = running;
    say(`controller running, default connection: ClusterUserGroupService ${manifests.defaultService ?? '(none)'} (logs: ${logFile})\n`);

    // Commands to try against the examples (deploy/examples: UserGroup team-a/acme, its Secret acme, key token).
    const hints = [
      `export KUBECONFIG=${cp.kubeconfigPath}   # a kubectl of this version: ${cp.binaries.kubectl}`,
      'kubectl get usergroups -A; kubectl get clusterusergroupservices,usergroupclaims',
      `kubectl -n team-a annotate usergroup acme ${ROTATE_ANNOTATION}="$(date +%s)" --overwrite`,
      "kubectl -n team-a get secret acme -o jsonpath='{.data.token}' | base64 -d",
    ];
    const tryText = `try:\n${hints.map((h) => `  ${h}`).join('\n')}\n`;
    // Once, whatever stdout is (a log or a pipe shows only the table's changes after this); a terminal also keeps
    // them in its redrawn view below.
    io.out(`${tryText}\n`);
    const interactive = process.stdout.isTTY;
    let last = '';
    const render = (): void => {
      const groups = running.controller.caches.userGroups.list();
      const table = renderStatusTable(groups, { allNamespaces: true, wide: false, now: Date.now() }).trimEnd();
      const { upsert, rotate } = simulator.stats().operations;
      const calls = `PUT created ${upsert.created}, updated ${upsert.updated}; POST rotated ${rotate.ok}`;
      const text = `${table}\n\nservice calls so far: ${calls}\n\n${tryText}\nCtrl-C stops everything.\n`;
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
        shutdown().then(
          () => resolve(0),
          (err: unknown) => {
            io.err(`stop failed: ${String(err)}\n`);
            resolve(1);
          },
        );
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
  } catch (err) {
    io.err(`npm start: ${err instanceof Error ? err.message : String(err)}\n`);
    await shutdown();
    return 1;
  }
}

/**
 * The examples, made to work here: every ClusterUserGroupService points at the simulator, and the API-key Secret
 * it names exists (with its namespace). Namespaces go first, so what lives in them applies in one go. The first
 * ClusterUserGroupService becomes the controller's default.
 */
function localExamples(dir: string, simUrl: string, apiKey: string): { yaml: string; defaultService: string | undefined } {
  interface Doc {
    kind?: unknown;
    metadata?: { name?: unknown };
    spec?: Record<string, unknown>;
  }
  const docs: Doc[] = fs
    .readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .flatMap((f) => parseAllDocuments(fs.readFileSync(path.join(dir, f), 'utf8')).map((d) => d.toJS() as Doc | null))
    .filter((d): d is Doc => d !== null && typeof d === 'object');
  const extra: Doc[] = [];
  let defaultService: string | undefined;
  for (const doc of docs) {
    if (doc.kind !== 'ClusterUserGroupService' || !doc.spec) continue;
    if (defaultService === undefined && typeof doc.metadata?.name === 'string') defaultService = doc.metadata.name;
    doc.spec['url'] = simUrl;
    const ref = doc.spec['apiKeySecretRef'] as { namespace?: string; name?: string; key?: string } | undefined;
    if (!ref?.namespace || !ref.name) continue;
    extra.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ref.namespace } } as Doc);
    extra.push({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: ref.name, namespace: ref.namespace },
      stringData: { [ref.key ?? 'apiKey']: apiKey },
    } as Doc);
  }
  const all = [...docs, ...extra];
  const rank = (d: Doc): number => (d.kind === 'Namespace' ? 0 : 1);
  const ordered = all.filter((d) => rank(d) === 0).concat(all.filter((d) => rank(d) === 1));
  return { yaml: ordered.map((d) => stringify(d)).join('---\n'), defaultService };
}
