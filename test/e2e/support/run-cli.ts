import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { repoRoot } from '../../support/repo-root.js';
import { OPERATOR_IMAGE, OPERATOR_IMAGE_ENV } from '../../../devtools/node/images.js';
import { PREVIOUS_OPERATOR_IMAGE_ENV } from './previous-release.js';
import { RELEASE_DIR_ENV } from './release.js';

// `npm run test:e2e [-- vitest args…]`: the e2e suite on two one-node clusters at once. chart.test.ts spends 11 of
// its ~12 minutes waiting for its Pods' first projected tokens to expire (the TokenRequest API's 10-minute minimum
// plus the apiserver's minute of leeway); the other files run meanwhile on a node of their own, which they need
// anyway (upgrade.test.ts replaces the usergroup.dev CRDs with 0.2.0's). The chart's node starts as soon as the
// operator image is built; the previous release's image and this tree's release are built beside it, before the
// second node. With vitest arguments (a file filter), everything is built and one node runs what they select.
// The images are built here, outside the nodes' namespaces, which have no network.

const tmp = process.env['TMPDIR'] ?? '/tmp';
const operatorImage = path.join(tmp, 'ugo-e2e-operator.tar');
const previousImage = path.join(tmp, 'ugo-e2e-operator-previous.tar');
const releaseDir = path.join(tmp, 'ugo-e2e-release');
/** The file that waits on projected tokens: it gets a node to itself. */
const CHART = 'test/e2e/chart.test.ts';

type Run = (label: string, command: readonly string[], env?: Record<string, string>) => Promise<number>;

/** Runs a command to its end, each line of its output prefixed with `label`; resolves with its exit code. */
const run: Run = (label, command, env = {}) =>
  new Promise((resolve) => {
    const [file = '', ...args] = command;
    const child = spawn(file, args, { cwd: repoRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const forward = (signal: NodeJS.Signals): void => void child.kill(signal);
    process.on('SIGTERM', forward);
    process.on('SIGHUP', forward);
    for (const [stream, out] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ] as const) {
      readline.createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => void out.write(`[${label}] ${line}\n`));
    }
    child.once('error', (err) => {
      process.stderr.write(`[${label}] could not run ${file}: ${err.message}\n`);
      resolve(1);
    });
    child.once('close', (code, signal) => {
      process.off('SIGTERM', forward);
      process.off('SIGHUP', forward);
      if (signal) process.stderr.write(`[${label}] ${file} was killed by ${signal}\n`);
      resolve(code ?? 1);
    });
  });

/** Runs the steps one after another, each only if those before it succeeded; resolves with the first failure's code. */
async function chain(...steps: (() => Promise<number>)[]): Promise<number> {
  for (const step of steps) {
    const code = await step();
    if (code !== 0) return code;
  }
  return 0;
}

const started = Date.now();
const minutes = (): string => `${((Date.now() - started) / 60_000).toFixed(1)} min`;
const vitestArgs = process.argv.slice(2);
const inNode = (files: readonly string[]): string[] => ['tsx', 'devtools/node/run-in-node.ts', '--', 'vitest', 'run', '--project', 'e2e', ...files];
const imageEnv = { [OPERATOR_IMAGE_ENV]: operatorImage };
const allEnv = { ...imageEnv, [PREVIOUS_OPERATOR_IMAGE_ENV]: previousImage, [RELEASE_DIR_ENV]: releaseDir };

const buildOperator = (): Promise<number> =>
  run('image', ['tsx', 'devtools/image/build-cli.ts', operatorImage, `${OPERATOR_IMAGE.repository}:${OPERATOR_IMAGE.tag}`]);
const buildRest = (): Promise<number> =>
  chain(
    () => run('image 0.2.0', ['tsx', 'test/e2e/support/previous-release-image-cli.ts', previousImage]),
    () => run('release', ['tsx', 'test/e2e/support/release-cli.ts', releaseDir]),
  );

let code: number;
if (vitestArgs.length > 0) {
  code = await chain(buildOperator, buildRest, () => run('e2e', inNode(vitestArgs), allEnv));
} else {
  const others = fs
    .readdirSync(path.join(repoRoot, 'test/e2e'))
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `test/e2e/${f}`)
    .filter((f) => f !== CHART);
  const built = await buildOperator();
  if (built !== 0) process.exit(built);
  const [chart, rest] = await Promise.all([
    run('chart', inNode([CHART]), imageEnv).then((c) => (process.stderr.write(`[chart] done after ${minutes()}: exit ${c}\n`), c)),
    chain(buildRest, () => run('others', inNode(others), allEnv)).then((c) => (process.stderr.write(`[others] done after ${minutes()}: exit ${c}\n`), c)),
  ]);
  code = chart !== 0 ? chart : rest;
}
process.stderr.write(`[e2e] ${code === 0 ? 'passed' : `failed (${code})`} in ${minutes()}\n`);
process.exit(code);
