import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';
import { buildImage } from '../image/build.js';
import { buildPluginRelease } from '../kubectl-plugin/release.js';
import type { Platform } from '../platform-node.js';
import { CRDS_FILE, checksummedFiles, SUMS_FILE, SUMS_SIGNATURE_FILE } from './assets.js';
import { sha256sums } from './checksums.js';
import { crdBundle } from './crds.js';
import { writeSboms } from './artifact-sboms.js';
import { digestAndSignInScratchRegistry, type SignatureLayouts } from './sign.js';
import { run } from './run.js';
import { releaseTools } from './tools.js';
import { versionMismatches } from './versions.js';

/**
 * `npm run release -- <version> <out-dir>`: everything a release publishes, in one directory.
 *
 *   oci/usergroup-operator/            the image: an OCI layout whose index is linux/amd64 + linux/arm64
 *   oci/usergroup-operator.{bundle,sig}/  cosign's signatures of that index, both formats (signed releases; sign.ts)
 *   oci/chart.{bundle,sig}/            the same for the chart's OCI manifest
 *   usergroup-operator-<v>.tgz         the chart (helm package), for oci:// and classic Helm repositories
 *   usergroup-operator-crds.yaml       every CRD, to apply before upgrading (Helm upgrades no CRD)
 *   kubectl-usergroup_<os>_<arch>.tar.gz  the kubectl plugin, four platforms, and usergroup.yaml, their krew manifest
 *   *.cdx.json                         a CycloneDX SBOM per artifact
 *   release.json                       what was built: digests, references; `npm run release:push` reads it
 *   cosign.pub, SHA256SUMS, SHA256SUMS.cosign.bundle   the key that verifies, checksums, their signature
 *
 * Everything outside oci/ is what a GitHub release carries (assets.ts), flat.
 */
export interface ReleaseOptions {
  readonly version: string;
  readonly outDir: string;
  /** Where the release will be pushed: `<registry>/usergroup-operator` and `<registry>/charts/usergroup-operator`. */
  readonly registry: string;
  /** A cosign private key and its password; without one the release is unsigned (sign after pushing, e.g. keyless in CI). */
  readonly signing: { readonly key: string; readonly password: string } | undefined;
  readonly progress: (line: string) => void;
}

/** release.json: the facts `release:push`, the e2e suite and a reader of the release need. */
export interface ReleaseManifest {
  readonly version: string;
  readonly image: {
    readonly repository: string;
    readonly tag: string;
    readonly digest: string;
    readonly layout: string;
    /** The signature layouts, both of cosign's formats (null: unsigned, signed after pushing, e.g. keyless in CI). */
    readonly signatures: SignatureLayouts | null;
    readonly platforms: readonly { readonly platform: string; readonly digest: string }[];
  };
  readonly chart: { readonly repository: string; readonly file: string; readonly digest: string; readonly signatures: SignatureLayouts | null };
  /** usergroup-operator-crds.yaml */
  readonly crds: string;
  readonly plugin: {
    readonly manifest: string;
    readonly platforms: readonly { readonly platform: string; readonly kind: string; readonly file: string; readonly sha256: string }[];
  };
  readonly sboms: readonly string[];
  readonly signed: boolean;
}

export const IMAGE_PLATFORMS: readonly Platform[] = [
  { os: 'linux', arch: 'amd64' },
  { os: 'linux', arch: 'arm64' },
];
const CHART_DIR = 'deploy/helm/usergroup-operator';
/** Where the signatures are kept in the release directory (sign.ts says what each format is for). */
const SIGNATURE_LAYOUTS = {
  image: { bundle: 'oci/usergroup-operator.bundle', legacy: 'oci/usergroup-operator.sig' },
  chart: { bundle: 'oci/chart.bundle', legacy: 'oci/chart.sig' },
} as const satisfies Record<string, SignatureLayouts>;

export const imageRepositoryOf = (registry: string): string => `${registry}/usergroup-operator`;
export const chartRepositoryOf = (registry: string): string => `${registry}/charts/usergroup-operator`;

export async function release(options: ReleaseOptions): Promise<ReleaseManifest> {
  const { version, outDir, progress: say } = options;
  const problems = versionMismatches(
    version,
    fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'),
    fs.readFileSync(path.join(repoRoot, CHART_DIR, 'Chart.yaml'), 'utf8'),
  );
  if (problems.length > 0) throw new Error(`this checkout is not version ${version}: ${problems.join('; ')} (bump them together, commit, then release)`);
  if (fs.existsSync(outDir) && fs.readdirSync(outDir).length > 0) throw new Error(`${outDir} is not empty: a release goes into a new directory`);
  fs.mkdirSync(path.join(outDir, 'oci'), { recursive: true });

  say('tools: helm, crane, cosign (built from their Go modules, or cached)');
  const tools = releaseTools();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-release-'));
  try {
    const imageRepository = imageRepositoryOf(options.registry);
    const chartRepository = chartRepositoryOf(options.registry);
    say(`image ${imageRepository}:${version} for ${IMAGE_PLATFORMS.map((p) => `${p.os}/${p.arch}`).join(', ')}`);
    const image = await buildImage({
      context: repoRoot,
      name: `${imageRepository}:${version}`,
      out: path.join(work, 'image.tar'),
      platforms: IMAGE_PLATFORMS,
      progress: (line) => say(`  ${line}`),
    });
    if (!image.indexDigest) throw new Error('the image build wrote no index');
    const layout = 'oci/usergroup-operator';
    fs.mkdirSync(path.join(outDir, layout));
    execFileSync('tar', ['-xf', image.tarball, '-C', path.join(outDir, layout)]);

    say('chart: helm package');
    const chartFile = `usergroup-operator-${version}.tgz`;
    await run(tools.helm, ['package', path.join(repoRoot, CHART_DIR), '--version', version, '--app-version', version, '--destination', outDir]);
    fs.writeFileSync(path.join(outDir, CRDS_FILE), crdBundle(path.join(repoRoot, 'crds')));

    say('kubectl plugin: linux/amd64, linux/arm64, darwin/amd64, darwin/arm64');
    const plugin = await buildPluginRelease({ outDir: path.join(work, 'plugin') });
    for (const file of [...plugin.platforms.map((p) => p.tarball), plugin.manifest]) fs.copyFileSync(file, path.join(outDir, path.basename(file)));

    say('SBOMs (CycloneDX): npm sbom for the image, the build inputs for the rest');
    const sboms = writeSboms(outDir, version, image, plugin, imageRepository, chartRepository);

    const inOut = (layouts: SignatureLayouts): SignatureLayouts => ({ bundle: path.join(outDir, layouts.bundle), legacy: path.join(outDir, layouts.legacy) });
    say(
      options.signing
        ? 'the image index and the chart signed with cosign in a scratch registry (Sigstore bundle and legacy .sig)'
        : "the chart's OCI digest, from a scratch registry (an unsigned release)",
    );
    const { chartDigest } = await digestAndSignInScratchRegistry({
      tools,
      work,
      image: { layout: path.join(outDir, layout), repository: imageRepository, tag: version, digest: image.indexDigest },
      chart: { tgz: path.join(outDir, chartFile), repository: chartRepository },
      signing: options.signing && { ...options.signing, image: inOut(SIGNATURE_LAYOUTS.image), chart: inOut(SIGNATURE_LAYOUTS.chart) },
    });
    if (options.signing) {
      const publicKey = await run(tools.cosign, ['public-key', '--key', options.signing.key], { env: { COSIGN_PASSWORD: options.signing.password } });
      fs.writeFileSync(path.join(outDir, 'cosign.pub'), publicKey);
    }

    const manifest: ReleaseManifest = {
      version,
      image: {
        repository: imageRepository,
        tag: version,
        digest: image.indexDigest,
        layout,
        signatures: options.signing ? SIGNATURE_LAYOUTS.image : null,
        platforms: image.platforms.map((p) => ({ platform: `${p.platform.os}/${p.platform.arch}`, digest: p.manifestDigest })),
      },
      chart: { repository: chartRepository, file: chartFile, digest: chartDigest, signatures: options.signing ? SIGNATURE_LAYOUTS.chart : null },
      crds: CRDS_FILE,
      plugin: {
        manifest: path.basename(plugin.manifest),
        platforms: plugin.platforms.map((p) => ({
          platform: `${p.platform.os}/${p.platform.arch}`,
          kind: p.kind,
          file: path.basename(p.tarball),
          sha256: p.sha256,
        })),
      },
      sboms,
      signed: options.signing !== undefined,
    };
    fs.writeFileSync(path.join(outDir, 'release.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    fs.writeFileSync(path.join(outDir, SUMS_FILE), sha256sums(outDir, checksummedFiles(manifest)));
    if (options.signing) {
      say('signing SHA256SUMS (cosign sign-blob, the bundle format cosign 2 and 3 both verify)');
      await run(
        tools.cosign,
        [
          'sign-blob',
          '--key',
          options.signing.key,
          '--use-signing-config=false',
          '--tlog-upload=false',
          // The legacy bundle: cosign 2 reads a Sigstore bundle only with a trusted root (assets.ts).
          '--new-bundle-format=false',
          '--yes',
          '--bundle',
          SUMS_SIGNATURE_FILE,
          SUMS_FILE,
        ],
        { env: { COSIGN_PASSWORD: options.signing.password }, cwd: outDir },
      );
    }
    return manifest;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
