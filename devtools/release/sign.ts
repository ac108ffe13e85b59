import path from 'node:path';
import { startRegistry } from '../registry.js';
import { helmPush, run } from './run.js';
import type { ReleaseTools } from './tools.js';

/**
 * cosign signs what is in a registry: the release puts the image index and the chart into a scratch registry on
 * 127.0.0.1 (which also tells the chart's OCI manifest digest, signed or not), signs both there with the caller's
 * key in both of cosign's formats, and keeps each signature as an OCI layout in the release directory:
 *
 *   bundle  cosign v3's Sigstore bundle, an OCI 1.1 referrer of the signed digest (index under tag `sha256-<hex>`)
 *   legacy  the `sha256-<hex>.sig` tag (--new-bundle-format=false): what cosign up to 2.6.2, Kyverno's `type: Cosign`
 *           and policy-controller's default read; cosign 3 and 2.6.3+ take the bundle when there is one
 *
 * Publishing (push.ts) pushes the artifacts byte for byte — the same digests — and the signatures beside them, so
 * `cosign verify` works against the real registry. The signed claims name the repositories the release is for
 * (--sign-container-identity), not the scratch registry. No transparency log: keyed signing here; keyless signing
 * with Rekor is the CI workflow's (.github/workflows/release.yaml).
 */
export interface ScratchRequest {
  readonly tools: ReleaseTools;
  readonly work: string;
  readonly image: { readonly layout: string; readonly repository: string; readonly tag: string; readonly digest: string };
  readonly chart: { readonly tgz: string; readonly repository: string };
  /** Without a key only the chart's digest is learnt (the release is signed after pushing, e.g. keyless in CI). */
  readonly signing:
    | {
        readonly key: string;
        /** COSIGN_PASSWORD for the key; cosign reads it from the environment. */
        readonly password: string;
        /** Where the four signature layouts go. */
        readonly image: SignatureLayouts;
        readonly chart: SignatureLayouts;
      }
    | undefined;
}

/** The two OCI layouts of one artifact's signature, cosign's two formats. */
export interface SignatureLayouts {
  readonly bundle: string;
  readonly legacy: string;
}

export interface ScratchResult {
  /** The chart's OCI manifest digest, what `helm push` of the same .tgz produces anywhere. */
  readonly chartDigest: string;
}

export async function digestAndSignInScratchRegistry(request: ScratchRequest): Promise<ScratchResult> {
  const { tools, signing } = request;
  const registry = await startRegistry({ crane: tools.crane, dir: path.join(request.work, 'scratch-registry') });
  try {
    const scratch = (repository: string): string => `${registry.host}/${repository.slice(repository.indexOf('/') + 1)}`;
    const imageRef = scratch(request.image.repository);
    await run(tools.crane, ['push', '--insecure', request.image.layout, `${imageRef}:${request.image.tag}`]);
    const pushed = (await run(tools.crane, ['digest', '--insecure', `${imageRef}:${request.image.tag}`])).trim();
    if (pushed !== request.image.digest) throw new Error(`the scratch registry holds ${pushed} for the image, the layout says ${request.image.digest}`);

    const chartRef = scratch(request.chart.repository);
    const chartDigest = await helmPush(tools.helm, request.chart.tgz, chartRef, true);
    if (!signing) return { chartDigest };

    const env = { COSIGN_PASSWORD: signing.password };
    const sign = async (ref: string, identity: string): Promise<void> => {
      const common = ['--key', signing.key, '--allow-http-registry', '--use-signing-config=false', '--tlog-upload=false', '--yes'];
      await run(tools.cosign, ['sign', ...common, '--sign-container-identity', identity, ref], { env });
      await run(tools.cosign, ['sign', ...common, '--new-bundle-format=false', '--sign-container-identity', identity, ref], { env });
    };
    await sign(`${imageRef}@${request.image.digest}`, request.image.repository);
    await sign(`${chartRef}@${chartDigest}`, request.chart.repository);

    await exportSignatures(tools, imageRef, request.image.digest, signing.image);
    await exportSignatures(tools, chartRef, chartDigest, signing.chart);
    return { chartDigest };
  } finally {
    await registry.stop();
  }
}

/**
 * The referrers tag scheme's tag of a digest (`sha256-<hex>`): where a registry without the referrers API keeps the
 * index of a manifest's referrers — cosign v3's signature bundle among them.
 */
export const referrersTag = (digest: string): string => digest.replace(':', '-');

/** cosign's legacy signature tag of a digest (`sha256-<hex>.sig`), which cosign 2.x and Kyverno's `type: Cosign` read. */
export const legacySignatureTag = (digest: string): string => `${referrersTag(digest)}.sig`;

async function exportSignatures(tools: ReleaseTools, ref: string, digest: string, layouts: SignatureLayouts): Promise<void> {
  await run(tools.crane, ['pull', '--insecure', '--format', 'oci', `${ref}:${referrersTag(digest)}`, layouts.bundle]);
  await run(tools.crane, ['pull', '--insecure', '--format', 'oci', `${ref}:${legacySignatureTag(digest)}`, layouts.legacy]);
}
