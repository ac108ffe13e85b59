import path from 'node:path';
import { startRegistry } from '../registry.js';
import { helmPush, run } from './run.js';
import type { ReleaseTools } from './tools.js';

/**
 * cosign signs what is in a registry: the release puts the image index and the chart into a scratch registry on
 * 127.0.0.1, signs both there with the caller's key, and keeps each signature (cosign's Sigstore bundle, an OCI
 * 1.1 referrer of the signed digest) as an OCI layout in the release directory. Publishing (push.ts) pushes the
 * artifacts byte for byte — the same digests — and the signatures beside them, so `cosign verify` works against
 * the real registry. The signed claims name the repositories the release is for (--sign-container-identity), not
 * the scratch registry. No transparency log: keyed signing here; keyless signing with Rekor is the CI workflow's
 * (.github/workflows/release.yaml).
 */
export interface SignRequest {
  readonly tools: ReleaseTools;
  readonly work: string;
  readonly key: string;
  /** COSIGN_PASSWORD for the key; cosign reads it from the environment. */
  readonly password: string;
  readonly image: { readonly layout: string; readonly repository: string; readonly tag: string; readonly digest: string };
  readonly chart: { readonly tgz: string; readonly repository: string };
  /** Where the two signature layouts go. */
  readonly imageSignatureLayout: string;
  readonly chartSignatureLayout: string;
}

export interface Signed {
  /** The chart's OCI manifest digest, what `helm push` of the same .tgz produces anywhere. */
  readonly chartDigest: string;
}

export async function signInScratchRegistry(request: SignRequest): Promise<Signed> {
  const { tools } = request;
  const registry = await startRegistry({ crane: tools.crane, dir: path.join(request.work, 'scratch-registry') });
  try {
    const scratch = (repository: string): string => `${registry.host}/${repository.slice(repository.indexOf('/') + 1)}`;
    const imageRef = scratch(request.image.repository);
    await run(tools.crane, ['push', '--insecure', request.image.layout, `${imageRef}:${request.image.tag}`]);
    const pushed = (await run(tools.crane, ['digest', '--insecure', `${imageRef}:${request.image.tag}`])).trim();
    if (pushed !== request.image.digest) throw new Error(`the scratch registry holds ${pushed} for the image, the layout says ${request.image.digest}`);

    const chartRef = scratch(request.chart.repository);
    const chartDigest = await helmPush(tools.helm, request.chart.tgz, chartRef, true);

    const env = { COSIGN_PASSWORD: request.password };
    const sign = (ref: string, identity: string): Promise<string> =>
      run(
        tools.cosign,
        [
          'sign',
          '--key',
          request.key,
          '--allow-http-registry',
          '--use-signing-config=false',
          '--tlog-upload=false',
          '--yes',
          '--sign-container-identity',
          identity,
          ref,
        ],
        { env },
      );
    await sign(`${imageRef}@${request.image.digest}`, request.image.repository);
    await sign(`${chartRef}@${chartDigest}`, request.chart.repository);

    await exportSignature(tools, imageRef, request.image.digest, request.imageSignatureLayout);
    await exportSignature(tools, chartRef, chartDigest, request.chartSignatureLayout);
    return { chartDigest };
  } finally {
    await registry.stop();
  }
}

/**
 * The referrers tag scheme's tag of a digest (`sha256-<hex>`): where a registry without the referrers API keeps the index of a manifest's referrers — cosign's signature bundle among them.
 */
export const referrersTag = (digest: string): string => digest.replace(':', '-');

async function exportSignature(tools: ReleaseTools, ref: string, digest: string, layout: string): Promise<void> {
  await run(tools.crane, ['pull', '--insecure', '--format', 'oci', `${ref}:${referrersTag(digest)}`, layout]);
}
