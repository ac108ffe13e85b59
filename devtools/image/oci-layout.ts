import { createHash } from 'node:crypto';
import type { Platform } from '../platform-node.js';
import type { RunConfig } from './image-config.js';

/** The OCI documents of an image layout, as bytes with their digests: no file system here, so they can be tested. */
export const MEDIA_TYPE = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** A content-addressed blob: its bytes, their sha256 and length, as descriptors and the layout's blobs/ need them. */
export interface Blob {
  readonly data: Buffer;
  readonly digest: string;
  readonly size: number;
}

/** A layer already written elsewhere: digest and size of the gzipped tar, diffId of the tar itself. */
export interface LayerRef {
  readonly digest: string;
  readonly diffId: string;
  readonly size: number;
  /** The image config's history line for it. */
  readonly createdBy: string;
}

export function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export function jsonBlob(document: unknown): Blob {
  const data = Buffer.from(JSON.stringify(document));
  return { data, digest: sha256(data), size: data.length };
}

/** The image config: how the container runs, for which platform, and the uncompressed layers it is made of. */
export function imageConfig(platform: Platform, config: RunConfig, layers: readonly LayerRef[]): Blob {
  return jsonBlob({
    architecture: platform.arch,
    os: platform.os,
    config: { User: config.user, Env: config.env, Entrypoint: config.entrypoint, Cmd: config.cmd, WorkingDir: config.workingDir },
    rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
    history: layers.map((l) => ({ created_by: l.createdBy })),
  });
}

export function imageManifest(config: Blob, layers: readonly LayerRef[]): Blob {
  return jsonBlob({
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.manifest,
    config: { mediaType: MEDIA_TYPE.config, digest: config.digest, size: config.size },
    layers: layers.map((l) => ({ mediaType: MEDIA_TYPE.layer, digest: l.digest, size: l.size })),
  });
}

/** The multi-platform image: one manifest per platform, each labelled with it so a client pulls only its own. */
export function imageIndex(manifests: readonly { readonly platform: Platform; readonly manifest: Blob }[]): Blob {
  return jsonBlob({
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.index,
    manifests: manifests.map(({ platform, manifest }) => ({
      mediaType: MEDIA_TYPE.manifest,
      digest: manifest.digest,
      size: manifest.size,
      platform: { architecture: platform.arch, os: platform.os },
    })),
  });
}

/**
 * The layout's own index.json: one entry, the image (a manifest, or an index for several platforms), named twice:
 * `ctr images import` takes io.containerd.image.name as the full reference; OCI tools (skopeo, crane, registries'
 * importers) read org.opencontainers.image.ref.name, which holds the tag.
 */
export function layoutIndex(image: Blob, mediaType: string, name: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType,
          digest: image.digest,
          size: image.size,
          annotations: { 'org.opencontainers.image.ref.name': name.slice(name.lastIndexOf(':') + 1), 'io.containerd.image.name': name },
        },
      ],
    }),
  );
}
