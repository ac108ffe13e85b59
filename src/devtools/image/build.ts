import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { dockerIgnored, parseDockerfile, readDockerignore } from './dockerfile.js';
import { DISTROLESS_NODEJS_NONROOT, stagesOf, type RunConfig, type Stage } from './image-config.js';

/**
 * Builds the project's image without a daemon, from the Dockerfile's own stages: the build stage's COPY and RUN
 * lines are carried out in a directory standing for its filesystem (with the Node the project pins, as the
 * node:26 base would have it), and the runtime stage's COPY, WORKDIR, ENV, USER, ENTRYPOINT and CMD on top of a
 * stand-in for the distroless Node base made from Debian packages (glibc, libgcc, libstdc++, libatomic,
 * ca-certificates, tzdata) and that Node binary. The result is an OCI image layout (a tarball `ctr images import`
 * takes), two layers: the base, then what the runtime stage adds. The base images cannot be pulled here; the
 * Dockerfile stays the one users build with, and its runtime config is what the image carries.
 */
export interface BuildOptions {
  /** The build context: the repository root, with its Dockerfile and .dockerignore. */
  readonly context: string;
  /** Image reference written into the layout, e.g. usergroup-operator.dev/e2e/usergroup-operator:dev. */
  readonly name: string;
  /** Where the layout tarball goes. */
  readonly out: string;
  /** The Node binary of the build stage and of the base (default: the project's pinned one). */
  readonly node?: string;
  readonly progress?: (line: string) => void;
}

export interface BuiltImage {
  readonly tarball: string;
  readonly name: string;
  readonly config: RunConfig;
  /** sha256 digests of the manifest and config blobs. */
  readonly manifestDigest: string;
  readonly configDigest: string;
}

/** The Debian packages the distroless Node base is made of (what Node 26 links against, CA bundle, zones). */
export const BASE_PACKAGES = ['libc6', 'libgcc-s1', 'libstdc++6', 'libatomic1', 'ca-certificates', 'tzdata'] as const;

/** The build stage's base (node:26-trixie-slim): Node and npm on PATH, root, `/`. */
const NODE_BUILD_BASE: RunConfig = {
  entrypoint: ['docker-entrypoint.sh'],
  cmd: ['node'],
  user: 'root',
  workingDir: '/',
  env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
};

export function baseConfigOf(image: string): RunConfig {
  if (/^gcr\.io\/distroless\/nodejs\d+-debian\d+:nonroot$/.test(image)) return DISTROLESS_NODEJS_NONROOT;
  if (/^node:\d+[-.\w]*$/.test(image)) return NODE_BUILD_BASE;
  throw new Error(`no stand-in for the base image ${image}`);
}

export async function buildImage(options: BuildOptions): Promise<BuiltImage> {
  const say = options.progress ?? (() => undefined);
  const node = options.node ?? path.join(options.context, 'node_modules/node/bin/node');
  if (!fs.existsSync(node)) throw new Error(`${node} is missing (npm ci first)`);
  const stages = stagesOf(parseDockerfile(fs.readFileSync(path.join(options.context, 'Dockerfile'), 'utf8')), baseConfigOf);
  const runtime = stages.at(-1);
  if (!runtime) throw new Error('the Dockerfile has no stage');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-image-'));
  try {
    const roots = new Map<string, string>();
    for (const [i, stage] of stages.slice(0, -1).entries()) {
      const root = path.join(work, `stage-${i}`);
      say(`stage ${stage.name ?? i} (FROM ${stage.base}): its COPY and RUN lines in ${root}`);
      await buildStage(stage, root, options.context, roots, node, say);
      roots.set(stage.name ?? String(i), root);
    }
    const base = path.join(work, 'base');
    say(`runtime stage: stand-in for ${runtime.base} from Debian packages ${BASE_PACKAGES.join(', ')}`);
    await standInBase(base, node, work);
    const app = path.join(work, 'app');
    applyRuntimeSteps(runtime, app, options.context, roots);
    const layers = [await layer(base, work, 'base'), await layer(app, work, 'app')];
    return await writeLayout(layers, runtime.config, options.name, options.out, work);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** A builder stage: COPY from the context (minus .dockerignore) or an earlier stage, RUN in its working directory. */
async function buildStage(
  stage: Stage,
  root: string,
  context: string,
  earlier: ReadonlyMap<string, string>,
  node: string,
  say: (line: string) => void,
): Promise<void> {
  let workdir = '/';
  fs.mkdirSync(root, { recursive: true });
  for (const step of stage.steps) {
    if (step.kind === 'workdir') {
      workdir = step.path;
      fs.mkdirSync(path.join(root, workdir), { recursive: true });
    } else if (step.kind === 'copy') {
      copyInto(root, workdir, step.copy, context, earlier);
    } else {
      say(`  RUN ${step.command}`);
      const env = { ...process.env, PATH: `${path.dirname(node)}:${process.env['PATH'] ?? ''}` };
      const code = await runShell(step.command, path.join(root, workdir), env);
      if (code !== 0) throw new Error(`RUN ${step.command}: exit ${code}`);
    }
  }
}

/** The runtime stage's files, in a tree of their own (its layer). It has no shell: RUN is refused. */
function applyRuntimeSteps(stage: Stage, root: string, context: string, earlier: ReadonlyMap<string, string>): void {
  let workdir = '/';
  fs.mkdirSync(root, { recursive: true });
  for (const step of stage.steps) {
    if (step.kind === 'run') throw new Error(`RUN in the runtime stage cannot run here (distroless has no shell): ${step.command}`);
    if (step.kind === 'workdir') {
      workdir = step.path;
      fs.mkdirSync(path.join(root, workdir), { recursive: true });
    } else {
      copyInto(root, workdir, step.copy, context, earlier);
    }
  }
}

function copyInto(
  root: string,
  workdir: string,
  copy: { readonly from: string | undefined; readonly sources: readonly string[]; readonly dest: string },
  context: string,
  earlier: ReadonlyMap<string, string>,
): void {
  const destIn = path.posix.isAbsolute(copy.dest) ? copy.dest : path.posix.join(workdir, copy.dest);
  const intoDir = copy.dest.endsWith('/') || copy.sources.length > 1;
  const ignore = copy.from === undefined ? readDockerignore(context) : [];
  for (const source of copy.sources) {
    let from: string;
    if (copy.from === undefined) {
      from = path.join(context, source);
    } else {
      const stageRoot = earlier.get(copy.from);
      if (!stageRoot) throw new Error(`COPY --from=${copy.from}: no such earlier stage`);
      from = path.join(stageRoot, source);
    }
    if (!fs.existsSync(from)) throw new Error(`COPY ${source}: ${from} does not exist`);
    const dest = path.join(root, intoDir ? path.posix.join(destIn, path.posix.basename(source)) : destIn);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.cpSync(from, dest, {
      recursive: true,
      verbatimSymlinks: true,
      filter: (file) => copy.from !== undefined || !dockerIgnored(ignore, path.relative(context, file) || '.'),
    });
  }
}

/** The distroless Node base, stood in for: its Debian packages unpacked, Node at /nodejs/bin/node, the nonroot user. */
async function standInBase(root: string, node: string, work: string): Promise<void> {
  const debs = path.join(work, 'debs');
  fs.mkdirSync(debs, { recursive: true });
  const download = await runCommand('apt-get', ['download', ...BASE_PACKAGES], debs);
  if (download.code !== 0) throw new Error(`apt-get download ${BASE_PACKAGES.join(' ')}: ${download.stderr.trim()} (apt-get update first?)`);
  for (const deb of fs.readdirSync(debs).filter((f) => f.endsWith('.deb'))) {
    const x = await runCommand('dpkg-deb', ['-x', path.join(debs, deb), root], debs);
    if (x.code !== 0) throw new Error(`dpkg-deb -x ${deb}: ${x.stderr.trim()}`);
  }
  // Debian packages install the documentation distroless leaves out.
  for (const dir of ['usr/share/doc', 'usr/share/man', 'usr/share/lintian']) fs.rmSync(path.join(root, dir), { recursive: true, force: true });
  // ca-certificates builds its bundle in a maintainer script (update-ca-certificates): done here.
  const certs = path.join(root, 'usr/share/ca-certificates');
  const pems = fs.existsSync(certs) ? listFiles(certs).filter((f) => f.endsWith('.crt')) : [];
  fs.mkdirSync(path.join(root, 'etc/ssl/certs'), { recursive: true });
  fs.writeFileSync(path.join(root, 'etc/ssl/certs/ca-certificates.crt'), pems.map((f) => fs.readFileSync(f, 'utf8')).join(''));
  fs.mkdirSync(path.join(root, 'nodejs/bin'), { recursive: true });
  fs.copyFileSync(node, path.join(root, 'nodejs/bin/node'));
  fs.chmodSync(path.join(root, 'nodejs/bin/node'), 0o755);
  fs.mkdirSync(path.join(root, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n');
  fs.writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\nnonroot:x:65532:\n');
  for (const dir of ['home/nonroot', 'tmp', 'proc', 'sys', 'dev']) fs.mkdirSync(path.join(root, dir), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.chownSync(path.join(root, 'home/nonroot'), 65532, 65532);
}

function listFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}

interface Layer {
  readonly digest: string;
  readonly diffId: string;
  readonly size: number;
  readonly file: string;
}

/** A reproducible gzipped tar of a tree: sorted names, times at 0, numeric owners. */
async function layer(tree: string, work: string, name: string): Promise<Layer> {
  const tarFile = path.join(work, `${name}.tar`);
  const tar = await runCommand(
    'tar',
    ['--sort=name', '--mtime=@0', '--numeric-owner', '--format=posix', '--pax-option=delete=atime,delete=ctime', '-cf', tarFile, '-C', tree, '.'],
    work,
  );
  if (tar.code !== 0) throw new Error(`tar ${name}: ${tar.stderr.trim()}`);
  const raw = fs.readFileSync(tarFile);
  const gz = gzipSync(raw, { level: 6 });
  const file = path.join(work, `${name}.tar.gz`);
  fs.writeFileSync(file, gz);
  return { digest: sha256(gz), diffId: sha256(raw), size: gz.length, file };
}

async function writeLayout(layers: readonly Layer[], config: RunConfig, name: string, out: string, work: string): Promise<BuiltImage> {
  const layout = path.join(work, 'layout');
  const blobs = path.join(layout, 'blobs/sha256');
  fs.mkdirSync(blobs, { recursive: true });
  const blob = (data: Buffer): { digest: string; size: number } => {
    const digest = sha256(data);
    fs.writeFileSync(path.join(blobs, digest.slice('sha256:'.length)), data);
    return { digest, size: data.length };
  };
  for (const l of layers) fs.copyFileSync(l.file, path.join(blobs, l.digest.slice('sha256:'.length)));
  const configBlob = blob(
    Buffer.from(
      JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config: { User: config.user, Env: config.env, Entrypoint: config.entrypoint, Cmd: config.cmd, WorkingDir: config.workingDir },
        rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
        history: [{ created_by: 'stand-in for the distroless Node base (Debian packages + pinned Node)' }, { created_by: 'the Dockerfile runtime stage' }],
      }),
    ),
  );
  const manifest = blob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configBlob },
        layers: layers.map((l) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: l.digest, size: l.size })),
      }),
    ),
  );
  fs.writeFileSync(path.join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  fs.writeFileSync(
    path.join(layout, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          annotations: { 'org.opencontainers.image.ref.name': name.slice(name.lastIndexOf(':') + 1), 'io.containerd.image.name': name },
        },
      ],
    }),
  );
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const tar = await runCommand('tar', ['-cf', out, '-C', layout, '.'], work);
  if (tar.code !== 0) throw new Error(`tar layout: ${tar.stderr.trim()}`);
  return { tarball: out, name, config, manifestDigest: manifest.digest, configDigest: configBlob.digest };
}

function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

function runShell(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

function runCommand(cmd: string, args: readonly string[], cwd: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code: code ?? 1, stderr }));
  });
}
