import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';
import type { BuiltImage } from '../image/build.js';
import type { PluginRelease } from '../kubectl-plugin/release.js';
import { nodePackageOf } from '../platform-node.js';
import { chartSbom, imageSbom, onlyProduction, parseNpmSbom, pluginSbom, productionPackages, type Sbom } from './sbom.js';

/**
 * The release's SBOMs, one per artifact, into `<outDir>` (flat, as a GitHub release carries them): each image platform (npm's tree from `npm sbom`, the
 * Node build and the base's Debian packages the image build used), each plugin platform (the packages esbuild
 * bundled, and Node for a single executable), the chart (the image it installs). Returns their file names.
 */
export function writeSboms(
  outDir: string,
  version: string,
  image: BuiltImage,
  plugin: PluginRelease,
  imageRepository: string,
  chartRepository: string,
): string[] {
  const timestamp = sourceDate();
  const npm = onlyProduction(
    parseNpmSbom(
      execFileSync('npm', ['sbom', '--omit', 'dev', '--sbom-format', 'cyclonedx', '--sbom-type', 'application'], {
        cwd: repoRoot,
        encoding: 'utf8',
        maxBuffer: 64 << 20,
      }),
    ),
    productionPackages(fs.readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8')),
  );
  const distro = hostDistro();
  const written: string[] = [];
  const write = (name: string, sbom: Sbom): void => {
    const file = `${name}.cdx.json`;
    fs.writeFileSync(path.join(outDir, file), `${JSON.stringify(sbom, null, 2)}\n`);
    written.push(file);
  };
  const ociPurl = (repository: string, digest: string, qualifiers = ''): string =>
    `pkg:oci/${repository.split('/').pop() ?? repository}@${encodeURIComponent(digest)}?repository_url=${encodeURIComponent(repository)}${qualifiers}`;
  for (const contents of image.contents) {
    const { os: platformOs, arch } = contents.platform;
    const digest = image.platforms.find((p) => p.platform.arch === arch && p.platform.os === platformOs)?.manifestDigest ?? '';
    write(
      `usergroup-operator-image_${platformOs}_${arch}`,
      imageSbom({
        subject: { name: 'usergroup-operator', version, type: 'container', purl: ociPurl(imageRepository, digest, `&arch=${arch}`) },
        npm,
        node: { version: contents.node.version.replace(/^v/, ''), npmPackage: nodePackageOf(contents.platform) },
        debs: contents.debs.map((d) => ({ name: d.name, version: d.version, arch: d.arch })),
        distro,
        timestamp,
      }),
    );
  }
  for (const p of plugin.platforms) {
    write(
      `kubectl-usergroup_${p.platform.os}_${p.platform.arch}`,
      pluginSbom({
        subject: { name: 'kubectl-usergroup', version, type: 'application' },
        packages: plugin.packages,
        node: p.kind === 'sea' ? { version: pinnedNodeVersion(), npmPackage: nodePackageOf(p.platform) } : undefined,
        timestamp,
      }),
    );
  }
  write(
    'usergroup-operator-chart',
    chartSbom({
      subject: {
        name: 'usergroup-operator',
        version,
        type: 'application',
        purl: `pkg:generic/usergroup-operator-chart@${version}?repository_url=${encodeURIComponent(chartRepository)}`,
      },
      image: { name: 'usergroup-operator', version, type: 'container', purl: ociPurl(imageRepository, image.indexDigest ?? '') },
      timestamp,
    }),
  );
  return written;
}

/** The commit's time: SBOMs name when their sources were, so rebuilding a commit gives the same documents. */
function sourceDate(): string {
  try {
    return execFileSync('git', ['log', '-1', '--format=%cI'], { cwd: repoRoot, encoding: 'utf8' }).trim() || new Date(0).toISOString();
  } catch {
    return new Date(0).toISOString();
  }
}

function pinnedNodeVersion(): string {
  return (
    (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies['node'] ?? ''
  );
}

/** `debian-12`: the purl qualifier of the Debian release the base packages come from (the host's apt sources). */
function hostDistro(): string {
  const osRelease = fs.readFileSync('/etc/os-release', 'utf8');
  const id = /^ID=(.*)$/m.exec(osRelease)?.[1]?.replace(/"/g, '') ?? 'debian';
  const version = /^VERSION_ID=(.*)$/m.exec(osRelease)?.[1]?.replace(/"/g, '') ?? '';
  return `${id}-${version}`;
}
