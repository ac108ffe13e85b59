import { describe, expect, it } from 'vitest';
import { DISTROLESS_NODEJS_NONROOT } from '../../devtools/image/image-config.js';
import { imageConfig, imageIndex, imageManifest, jsonBlob, layoutIndex, MEDIA_TYPE, sha256, type LayerRef } from '../../devtools/image/oci-layout.js';

const layer = (n: number, createdBy: string): LayerRef => ({
  digest: `sha256:${String(n).repeat(64)}`,
  diffId: `sha256:${String(n + 1).repeat(64)}`,
  size: 100 * n,
  createdBy,
});
const app = layer(1, 'the Dockerfile runtime stage');
const amd64 = { os: 'linux', arch: 'amd64' } as const;
const arm64 = { os: 'linux', arch: 'arm64' } as const;

/** Parses a blob's bytes back, after checking the digest and size it carries are its own. */
const parsed = (blob: { data: Buffer; digest: string; size: number }): Record<string, unknown> => {
  expect(blob.digest).toBe(sha256(blob.data));
  expect(blob.size).toBe(blob.data.length);
  return JSON.parse(blob.data.toString('utf8')) as Record<string, unknown>;
};

describe('the OCI documents of the image layout', () => {
  it("config: the platform's architecture, the run config, the layers' diff ids and history in order", () => {
    const config = parsed(imageConfig(arm64, DISTROLESS_NODEJS_NONROOT, [layer(3, 'base'), app]));
    expect(config).toEqual({
      architecture: 'arm64',
      os: 'linux',
      config: { User: '65532', Env: DISTROLESS_NODEJS_NONROOT.env, Entrypoint: ['/nodejs/bin/node'], Cmd: [], WorkingDir: '/home/nonroot' },
      rootfs: { type: 'layers', diff_ids: [`sha256:${'4'.repeat(64)}`, `sha256:${'2'.repeat(64)}`] },
      history: [{ created_by: 'base' }, { created_by: 'the Dockerfile runtime stage' }],
    });
  });

  it('manifest: the config and gzipped layers by digest and size', () => {
    const config = imageConfig(amd64, DISTROLESS_NODEJS_NONROOT, [layer(3, 'base'), app]);
    expect(parsed(imageManifest(config, [layer(3, 'base'), app]))).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.manifest,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: config.digest, size: config.size },
      layers: [
        { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${'3'.repeat(64)}`, size: 300 },
        { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: app.digest, size: 100 },
      ],
    });
  });

  it('index: one manifest per platform, in order, each labelled with its platform', () => {
    const forAmd64 = jsonBlob({ a: 1 });
    const forArm64 = jsonBlob({ b: 2 });
    const index = parsed(
      imageIndex([
        { platform: amd64, manifest: forAmd64 },
        { platform: arm64, manifest: forArm64 },
      ]),
    );
    expect(index).toEqual({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        { mediaType: MEDIA_TYPE.manifest, digest: forAmd64.digest, size: forAmd64.size, platform: { architecture: 'amd64', os: 'linux' } },
        { mediaType: MEDIA_TYPE.manifest, digest: forArm64.digest, size: forArm64.size, platform: { architecture: 'arm64', os: 'linux' } },
      ],
    });
  });

  it("index.json: the one image under containerd's full name and OCI's tag, whatever it points at", () => {
    const image = jsonBlob({ an: 'index' });
    const json = JSON.parse(layoutIndex(image, MEDIA_TYPE.index, 'registry.example:5000/team/operator:v1.2.3').toString('utf8')) as unknown;
    expect(json).toEqual({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.index.v1+json',
          digest: image.digest,
          size: image.size,
          annotations: { 'org.opencontainers.image.ref.name': 'v1.2.3', 'io.containerd.image.name': 'registry.example:5000/team/operator:v1.2.3' },
        },
      ],
    });
  });

  it('the same inputs give the same digests (a rebuild can be checked against a signed digest)', () => {
    const a = imageConfig(amd64, DISTROLESS_NODEJS_NONROOT, [app]);
    expect(imageConfig(amd64, DISTROLESS_NODEJS_NONROOT, [app]).digest).toBe(a.digest);
    expect(imageConfig(arm64, DISTROLESS_NODEJS_NONROOT, [app]).digest).not.toBe(a.digest);
  });
});
