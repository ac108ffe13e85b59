import { parseCopy, type Copy, type Instruction } from './dockerfile.js';

/** The parts of an OCI image config that decide how the container runs. */
export interface RunConfig {
  readonly entrypoint: readonly string[];
  readonly cmd: readonly string[];
  readonly user: string;
  readonly workingDir: string;
  /** KEY=value, in the order they were set (later ones replace earlier ones of the same key). */
  readonly env: readonly string[];
}

/**
 * The base the runtime stage starts FROM, as the distroless project publishes it
 * (gcr.io/distroless/nodejs26-debian13:nonroot): Node at /nodejs/bin/node as the entry point, the nonroot user,
 * its home as working directory, PATH and the CA bundle in the environment.
 */
export const DISTROLESS_NODEJS_NONROOT: RunConfig = {
  entrypoint: ['/nodejs/bin/node'],
  cmd: [],
  user: '65532',
  workingDir: '/home/nonroot',
  env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'],
};

/** What a stage does, instruction by instruction, in the terms a builder needs. */
export type Step =
  { readonly kind: 'workdir'; readonly path: string } | { readonly kind: 'copy'; readonly copy: Copy } | { readonly kind: 'run'; readonly command: string };

export interface Stage {
  readonly name: string | undefined;
  readonly base: string;
  readonly steps: readonly Step[];
  readonly config: RunConfig;
}

/**
 * The stages of a Dockerfile with the config each ends with, on top of `baseConfig(image)` for its FROM (Docker's
 * rules: ENV appends or replaces, WORKDIR resolves against the previous one, an ENTRYPOINT resets the CMD it
 * inherits, exec (JSON) form only for ENTRYPOINT and CMD). Anything else it does not know is refused, so a new
 * instruction in the Dockerfile cannot be silently left out of the image built here.
 */
export function stagesOf(instructions: readonly Instruction[], baseConfig: (image: string) => RunConfig): Stage[] {
  const stages: { name: string | undefined; base: string; steps: Step[]; config: RunConfig }[] = [];
  for (const i of instructions) {
    if (i.keyword === 'FROM') {
      const [base = '', as, name] = i.args.split(/\s+/);
      if (as !== undefined && as.toUpperCase() !== 'AS') throw new Error(`FROM ${i.args}: expected "image [AS name]"`);
      stages.push({ name, base, steps: [], config: baseConfig(base) });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`${i.keyword} before any FROM`);
    const c = stage.config;
    switch (i.keyword) {
      case 'WORKDIR': {
        const dir = i.args.startsWith('/') ? i.args : `${c.workingDir.replace(/\/$/, '')}/${i.args}`;
        stage.config = { ...c, workingDir: dir };
        stage.steps.push({ kind: 'workdir', path: dir });
        break;
      }
      case 'COPY':
        stage.steps.push({ kind: 'copy', copy: parseCopy(i.args) });
        break;
      case 'RUN':
        stage.steps.push({ kind: 'run', command: i.args });
        break;
      case 'ENV':
        stage.config = { ...c, env: withEnv(c.env, envPairs(i.args)) };
        break;
      case 'USER':
        stage.config = { ...c, user: i.args };
        break;
      case 'ENTRYPOINT':
        stage.config = { ...c, entrypoint: execForm(i), cmd: [] };
        break;
      case 'CMD':
        stage.config = { ...c, cmd: execForm(i) };
        break;
      default:
        throw new Error(`Dockerfile instruction ${i.keyword} is not handled by the image builder`);
    }
  }
  return stages;
}

/** `ENV K=V K2="V 2"` (the K=V form only). */
export function envPairs(args: string): [string, string][] {
  const pairs: [string, string][] = [];
  for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("([^"]*)"|\S*)/g)) pairs.push([m[1] ?? '', m[3] ?? m[2] ?? '']);
  if (pairs.length === 0) throw new Error(`ENV ${args}: only the K=V form is supported`);
  return pairs;
}

function withEnv(env: readonly string[], pairs: readonly [string, string][]): string[] {
  const out = [...env];
  for (const [k, v] of pairs) {
    const at = out.findIndex((e) => e.startsWith(`${k}=`));
    if (at >= 0) out[at] = `${k}=${v}`;
    else out.push(`${k}=${v}`);
  }
  return out;
}

function execForm(i: Instruction): string[] {
  const argv: unknown = JSON.parse(i.args);
  if (!Array.isArray(argv) || !argv.every((a): a is string => typeof a === 'string')) throw new Error(`${i.keyword} must be in exec (JSON) form: ${i.args}`);
  return argv;
}
