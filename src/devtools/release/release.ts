import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../controlplane/binaries.js';
import { buildImage } from '../image/build.js';
import { buildPluginRelease } from '../kubectl-plugin/release.js';
import type { Platform } from '../platform-node.js';
import { sha256sums } from './checksums.js';
import { writeSboms } from './artifact-sboms.js';
import { signInScratchRegistry } from './sign.js';
import { run } from './run.js';
import { releaseTools } from './tools.js';
import { versionMismatches } from './versions.js';

/**
 * `npm run release -- <version> <out-dir>`: everything a release publishes, in one directory.
 *
 *   oci/usergroup-operator/            the image: an OCI layout whose index is linux/amd64 + linux/arm64
 *   oci/usergroup-operator.sig/        cosign's signature of that index (signed releases)
 *   oci/chart.sig/                     cosign's signature of the chart's OCI manifest (signed releases)
 *   usergroup-operator-<v>.tgz         the chart (helm package), for oci:// and classic Helm repositories
 *   kubectl-usergroup_<os>_<arch>.tar.gz  the kubectl plugin, four platforms, and usergroup.yaml, their krew manifest
 *   sbom/*.cdx.json                    a CycloneDX SBOM per artifact
 *   release.json                       what was built: digests, references; `npm run release:push` reads it
 *   cosign.pub, SHA256SUMS, SHA256SUMS.sigstore.json   the key that verifies, checksums, their signature
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
    readonly signature: string | null;
    readonly platforms: readonly { readonly platform: string; readonly digest: string }[];
  };
  readonly chart: { readonly repository: string; readonly file: string; readonly digest: string | null; readonly signature: string | null };
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
  fs.mkdirSync(path.join(outDir, 'sbom'), { recursive: true });

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

    say('kubectl plugin: linux/amd64, linux/arm64, darwin/amd64, darwin/arm64');
    const plugin = await buildPluginRelease({ outDir: path.join(work, 'plugin') });
    for (const file of [...plugin.platforms.map((p) => p.tarball), plugin.manifest]) fs.copyFileSync(file, path.join(outDir, path.basename(file)));

    say('SBOMs (CycloneDX): npm sbom for the image, the build inputs for the rest');
    const sboms = writeSboms(outDir, version, image, plugin, imageRepository, chartRepository);

    let signature: { image: string; chart: string; chartDigest: string } | undefined;
    if (options.signing) {
      say('signing the image index and the chart with cosign in a scratch registry');
      const signed = await signInScratchRegistry({
        tools,
        work,
        key: options.signing.key,
        password: options.signing.password,
        image: { layout: path.join(outDir, layout), repository: imageRepository, tag: version, digest: image.indexDigest },
        chart: { tgz: path.join(outDir, chartFile), repository: chartRepository },
        imageSignatureLayout: path.join(outDir, 'oci/usergroup-operator.sig'),
        chartSignatureLayout: path.join(outDir, 'oci/chart.sig'),
      });
      signature = { image: 'oci/usergroup-operator.sig', chart: 'oci/chart.sig', chartDigest: signed.chartDigest };
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
        signature: signature?.image ?? null,
        platforms: image.platforms.map((p) => ({ platform: `${p.platform.os}/${p.platform.arch}`, digest: p.manifestDigest })),
      },
      chart: { repository: chartRepository, file: chartFile, digest: signature?.chartDigest ?? null, signature: signature?.chart ?? null },
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
      signed: signature !== undefined,
    };
    fs.writeFileSync(path.join(outDir, 'release.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    const summed = ['release.json', chartFile, path.basename(plugin.manifest), ...manifest.plugin.platforms.map((p) => p.file), ...sboms];
    fs.writeFileSync(path.join(outDir, 'SHA256SUMS'), sha256sums(outDir, summed));
    if (options.signing) {
      say('signing SHA256SUMS (cosign sign-blob)');
      await run(
        tools.cosign,
        [
          'sign-blob',
          '--key',
          options.signing.key,
          '--use-signing-config=false',
          '--tlog-upload=false',
          '--yes',
          '--bundle',
          'SHA256SUMS.sigstore.json',
          'SHA256SUMS',
        ],
        { env: { COSIGN_PASSWORD: options.signing.password }, cwd: outDir },
      );
    }
    return manifest;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
