import fs from 'node:fs';
import path from 'node:path';

/** One Dockerfile instruction, continuation lines joined. */
export interface Instruction {
  readonly stage: number;
  readonly keyword: string;
  readonly args: string;
}

/** Enough of the Dockerfile grammar for our checks: comments, parser directives, `\` continuations. */
export function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let stage = -1;
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const match = /^(\S+)\s*(.*)$/.exec(full);
    if (!match) continue;
    const keyword = (match[1] ?? '').toUpperCase();
    if (keyword === 'FROM') stage++;
    instructions.push({ stage, keyword, args: match[2] ?? '' });
  }
  return instructions;
}

export interface Copy {
  readonly from: string | undefined;
  readonly sources: readonly string[];
  readonly dest: string;
}

/** COPY in shell form (`COPY [--flag=x] src... dest`); the exec (JSON) form is refused so nothing is missed. */
export function parseCopy(args: string): Copy {
  if (args.startsWith('[')) throw new Error(`COPY in JSON form is not handled by this check: ${args}`);
  const words = args.split(/\s+/).filter(Boolean);
  const flags = words.filter((w) => w.startsWith('--'));
  const paths = words.filter((w) => !w.startsWith('--'));
  const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
  const dest = paths.pop();
  if (dest === undefined || paths.length === 0) throw new Error(`COPY needs a source and a destination: ${args}`);
  return { from, sources: paths, dest };
}

/**
 * Whether .dockerignore excludes a path of the build context. Handles what ours uses: plain names and
 * directory prefixes, `*` globs within one segment, and `!` exceptions (last match wins, as Docker does).
 */
export function dockerIgnored(patterns: readonly string[], relativePath: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    const pattern = path.posix.normalize((negate ? line.slice(1) : line).replace(/^\/+/, ''));
    const re = new RegExp(
      `^${pattern
        .split('*')
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('[^/]*')}(/.*)?$`,
    );
    if (re.test(relativePath)) ignored = !negate;
  }
  return ignored;
}

export function readDockerignore(root: string): string[] {
  return fs.readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n');
}

/**
 * The node flags of the runtime image: what its exec-form ENTRYPOINT puts between the node binary and the
 * entry script, e.g. ["/nodejs/bin/node", "--max-semi-space-size=1", "dist/cli/main.js"] → ["--max-semi-space-size=1"].
 * The benchmark runs the controller with these, so it measures what the image runs.
 */
export function imageNodeFlags(root: string): string[] {
  const entrypoint = runtimeStage(root)
    .filter((i) => i.keyword === 'ENTRYPOINT')
    .at(-1);
  if (!entrypoint) throw new Error('the Dockerfile has no ENTRYPOINT in its last stage');
  const argv: unknown = JSON.parse(entrypoint.args);
  if (!Array.isArray(argv) || !argv.every((a): a is string => typeof a === 'string')) throw new Error('the ENTRYPOINT is not in exec form');
  const script = argv.findIndex((a) => a.endsWith('.js'));
  if (script < 1) throw new Error(`the ENTRYPOINT runs no script: ${entrypoint.args}`);
  return argv.slice(1, script);
}

/** The runtime image's ENV settings (`ENV K=V …` form), which the benchmark gives the controller as the image would. */
export function imageEnv(root: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of runtimeStage(root).filter((x) => x.keyword === 'ENV')) {
    for (const pair of i.args.split(/\s+/).filter(Boolean)) {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new Error(`ENV ${i.args}: only the K=V form is supported`);
      env[pair.slice(0, eq)] = pair.slice(eq + 1).replace(/^"(.*)"$/, '$1');
    }
  }
  return env;
}

/** The instructions of the Dockerfile's last stage: the image that runs. */
function runtimeStage(root: string): Instruction[] {
  const instructions = parseDockerfile(fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8'));
  const lastStage = Math.max(...instructions.map((i) => i.stage));
  return instructions.filter((i) => i.stage === lastStage);
}
