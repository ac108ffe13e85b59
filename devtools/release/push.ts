import path from 'node:path';
import { chartRepositoryOf, imageRepositoryOf, type ReleaseManifest } from './release.js';
import { helmPush, run } from './run.js';
import { legacySignatureTag, referrersTag, type SignatureLayouts } from './sign.js';
import type { ReleaseTools } from './tools.js';

/**
 * Publishes a release directory to a registry: the image index (crane push of its layout, byte for byte, so the
 * signed digest is the pushed one), the chart (helm push of the packaged .tgz, which gives the same manifest
 * digest wherever it is pushed) and, for a signed release, each artifact's two signatures where cosign finds them:
 * the Sigstore bundle's referrers index under `sha256-<hex>`, the legacy signature under `sha256-<hex>.sig`. Every
 * digest is checked against release.json.
 */
export interface Pushed {
  readonly image: string;
  readonly chart: string;
}

export async function pushRelease(options: {
  readonly tools: Pick<ReleaseTools, 'crane' | 'helm'>;
  readonly dir: string;
  readonly manifest: ReleaseManifest;
  /** Another registry than the release was made for (its signatures still verify: they sign digests). */
  readonly registry?: string;
  /** Plain HTTP, for a registry on localhost or a test network. */
  readonly plainHttp: boolean;
}): Promise<Pushed> {
  const { tools, dir, manifest } = options;
  const imageRepository = options.registry ? imageRepositoryOf(options.registry) : manifest.image.repository;
  const chartRepository = options.registry ? chartRepositoryOf(options.registry) : manifest.chart.repository;
  const insecure = options.plainHttp ? ['--insecure'] : [];

  await run(tools.crane, ['push', ...insecure, path.join(dir, manifest.image.layout), `${imageRepository}:${manifest.image.tag}`]);
  const imageDigest = (await run(tools.crane, ['digest', ...insecure, `${imageRepository}:${manifest.image.tag}`])).trim();
  if (imageDigest !== manifest.image.digest)
    throw new Error(`${imageRepository}:${manifest.image.tag} is ${imageDigest}, the release's image is ${manifest.image.digest}`);
  const pushSignatures = async (layouts: SignatureLayouts | null, repository: string, digest: string): Promise<void> => {
    if (!layouts) return;
    await run(tools.crane, ['push', ...insecure, path.join(dir, layouts.bundle), `${repository}:${referrersTag(digest)}`]);
    await run(tools.crane, ['push', ...insecure, path.join(dir, layouts.legacy), `${repository}:${legacySignatureTag(digest)}`]);
  };
  await pushSignatures(manifest.image.signatures, imageRepository, imageDigest);

  const chartDigest = await helmPush(tools.helm, path.join(dir, manifest.chart.file), chartRepository, options.plainHttp);
  if (chartDigest !== manifest.chart.digest) throw new Error(`helm push gave the chart ${chartDigest}, the release says ${manifest.chart.digest}`);
  await pushSignatures(manifest.chart.signatures, chartRepository, chartDigest);
  return { image: `${imageRepository}@${imageDigest}`, chart: `${chartRepository}@${chartDigest}` };
}
