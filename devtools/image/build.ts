import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { dockerIgnored, parseDockerfile, readDockerignore } from './dockerfile.js';
import { platformName, platformNode, type Platform } from '../platform-node.js';
import { debianArchOf, debianPackages, type DebianPackage, type DownloadedDeb } from './debian-packages.js';
import { DISTROLESS_NODEJS_NONROOT, stagesOf, type RunConfig, type Stage } from './image-config.js';
import { imageConfig, imageIndex, imageManifest, layoutIndex, MEDIA_TYPE, sha256, type Blob, type LayerRef } from './oci-layout.js';

/**
 * Builds the project's image without a daemon, from the Dockerfile's own stages: the build stage's COPY and RUN
 * lines are carried out once, on this machine, in a directory standing for its filesystem (with the Node the
 * project pins, as the node:26 base would have it), and the runtime stage's COPY, WORKDIR, ENV, USER, ENTRYPOINT and
 * CMD on top of a stand-in for the distroless Node base made from Debian packages (glibc, libgcc, libstdc++,
 * libatomic, ca-certificates, tzdata) and Node. The result is an OCI image layout (a tarball `ctr images import`
 * takes), each image two layers: the base, then what the runtime stage adds. The base images cannot be pulled here;
 * the Dockerfile stays the one users build with, and its runtime config is what the image carries.
 *
 * One platform (the default, linux/amd64): index.json points at that image's manifest. Several: it points at an
 * OCI image index with one manifest per platform. Each platform's base is made of that architecture's Debian
 * packages (debian-packages.ts: a private apt for a foreign architecture, the host's untouched) and its official
 * Node build (platform-node.ts; the host's own is the pinned binary itself, the same build). The app layer is
 * JavaScript and JSON only (checked: no native addons), so all platforms share the one blob.
 */
export interface BuildOptions {
  /** The build context: the repository root, with its Dockerfile and .dockerignore. */
  readonly context: string;
  /** Image reference written into the layout, e.g. usergroup-operator.dev/e2e/usergroup-operator:dev. */
  readonly name: string;
  /** Where the layout tarball goes. */
  readonly out: string;
  /** The Node binary of the build stage and of the host platform's base (default: the project's pinned one). */
  readonly node?: string;
  /** Linux platforms to build for, in the index's order (default: linux/amd64 alone). */
  readonly platforms?: readonly Platform[];
  readonly progress?: (line: string) => void;
}

/** What went into one platform's base: for an SBOM. */
export interface PlatformContents {
  readonly platform: Platform;
  readonly debs: readonly DebianPackage[];
  readonly node: { readonly version: string };
}

export interface BuiltImage {
  readonly tarball: string;
  readonly name: string;
  readonly config: RunConfig;
  /** sha256 digests of the first platform's image manifest and config blobs (for one platform: the image's). */
  readonly manifestDigest: string;
  readonly configDigest: string;
  /** The image index's digest when several platforms were built (what a registry serves for the name), else undefined. */
  readonly indexDigest: string | undefined;
  readonly platforms: readonly { readonly platform: Platform; readonly manifestDigest: string; readonly configDigest: string }[];
  readonly contents: readonly PlatformContents[];
}

export const LINUX_AMD64: Platform = { os: 'linux', arch: 'amd64' };

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

/** The Node this process runs on is the host platform's (the pinned binary is for it). */
export const hostPlatform = (): Platform => ({ os: 'linux', arch: process.arch === 'arm64' ? 'arm64' : 'amd64' });

export async function buildImage(options: BuildOptions): Promise<BuiltImage> {
  const say = options.progress ?? (() => undefined);
  const node = options.node ?? path.join(options.context, 'node_modules/node/bin/node');
  if (!fs.existsSync(node)) throw new Error(`${node} is missing (npm ci first)`);
  const platforms = options.platforms ?? [LINUX_AMD64];
  if (platforms.length === 0) throw new Error('no platform to build for');
  for (const p of platforms) if (p.os !== 'linux') throw new Error(`the image is Linux only, not ${platformName(p)}`);
  if (new Set(platforms.map(platformName)).size < platforms.length) throw new Error(`a platform twice: ${platforms.map(platformName).join(', ')}`);
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
    const app = path.join(work, 'app');
    applyRuntimeSteps(runtime, app, options.context, roots);
    const addons = nativeAddons(app);
    if (platforms.length > 1 && addons.length > 0) {
      throw new Error(
        `the app layer has native addons built for this machine only, it cannot serve ${platforms.map(platformName).join(', ')}: ${addons.join(', ')}`,
      );
    }
    const appLayer = await layer(app, work, 'app', 'the Dockerfile runtime stage');
    const nodeVersion = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
    const images: PlatformImage[] = [];
    for (const platform of platforms) {
      say(`${platformName(platform)}: stand-in for ${runtime.base} from Debian packages ${BASE_PACKAGES.join(', ')} and Node ${nodeVersion}`);
      const base = path.join(work, `base-${platform.arch}`);
      const sameAsHost = platformName(platform) === platformName(hostPlatform());
      // The host's own Node is the pinned binary (the same official build); another platform's comes from npm.
      const platformBinary = sameAsHost ? node : platformNode(platform, nodeVersion).binary;
      const debs = debianPackages(BASE_PACKAGES, debianArchOf(platform), say);
      await standInBase(base, debs, platformBinary);
      const createdBy = sameAsHost
        ? 'stand-in for the distroless Node base (Debian packages + pinned Node)'
        : `stand-in for the distroless Node base (Debian packages + official Node ${platformName(platform)} build)`;
      const baseLayer = await layer(base, work, `base-${platform.arch}`, createdBy);
      images.push({
        platform,
        layers: [baseLayer, appLayer],
        contents: { platform, debs: debs.map(({ name, version, arch }) => ({ name, version, arch })), node: { version: nodeVersion } },
      });
    }
    return await writeLayout(images, runtime.config, options.name, options.out, work);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

interface PlatformImage {
  readonly platform: Platform;
  readonly layers: readonly Layer[];
  readonly contents: PlatformContents;
}

/** Compiled Node addons (.node files) in a tree: built for one architecture, they would break the others. */
function nativeAddons(tree: string): string[] {
  return listFiles(tree)
    .filter((f) => f.endsWith('.node'))
    .map((f) => path.relative(tree, f));
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
async function standInBase(root: string, debs: readonly DownloadedDeb[], node: string): Promise<void> {
  fs.mkdirSync(root, { recursive: true });
  // In name order, as before the cache: the same packages give the same tree whatever apt's order.
  for (const deb of [...debs].sort((a, b) => (a.file < b.file ? -1 : 1))) {
    const x = await runCommand('dpkg-deb', ['-x', deb.file, root], root);
    if (x.code !== 0) throw new Error(`dpkg-deb -x ${deb.file}: ${x.stderr.trim()}`);
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

interface Layer extends LayerRef {
  readonly file: string;
}

/** A reproducible gzipped tar of a tree: sorted names, times at 0, numeric owners. */
async function layer(tree: string, work: string, name: string, createdBy: string): Promise<Layer> {
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
  fs.rmSync(tarFile);
  return { digest: sha256(gz), diffId: sha256(raw), size: gz.length, file, createdBy };
}

async function writeLayout(images: readonly PlatformImage[], config: RunConfig, name: string, out: string, work: string): Promise<BuiltImage> {
  const layout = path.join(work, 'layout');
  const blobs = path.join(layout, 'blobs/sha256');
  fs.mkdirSync(blobs, { recursive: true });
  const blobPath = (digest: string): string => path.join(blobs, digest.slice('sha256:'.length));
  const write = (blob: Blob): Blob => {
    fs.writeFileSync(blobPath(blob.digest), blob.data);
    return blob;
  };
  const manifests = images.map(({ platform, layers }) => {
    // The shared app layer is one blob: copied once.
    for (const l of layers) if (!fs.existsSync(blobPath(l.digest))) fs.copyFileSync(l.file, blobPath(l.digest));
    const configBlob = write(imageConfig(platform, config, layers));
    return { platform, config: configBlob, manifest: write(imageManifest(configBlob, layers)) };
  });
  const [first] = manifests;
  if (!first) throw new Error('no image to write');
  const index = manifests.length > 1 ? write(imageIndex(manifests)) : undefined;
  fs.writeFileSync(path.join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  fs.writeFileSync(
    path.join(layout, 'index.json'),
    index ? layoutIndex(index, MEDIA_TYPE.index, name) : layoutIndex(first.manifest, MEDIA_TYPE.manifest, name),
  );
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const tar = await runCommand('tar', ['-cf', out, '-C', layout, '.'], work);
  if (tar.code !== 0) throw new Error(`tar layout: ${tar.stderr.trim()}`);
  return {
    tarball: out,
    name,
    config,
    manifestDigest: first.manifest.digest,
    configDigest: first.config.digest,
    indexDigest: index?.digest,
    platforms: manifests.map((m) => ({ platform: m.platform, manifestDigest: m.manifest.digest, configDigest: m.config.digest })),
    contents: images.map((i) => i.contents),
  };
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
