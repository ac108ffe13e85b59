// The names of a release directory's files that a GitHub release carries, and which of them SHA256SUMS covers.
import type { ReleaseManifest } from './release.js';

export const SUMS_FILE = 'SHA256SUMS';
/**
 * cosign's signature of SHA256SUMS in its legacy bundle format (sign-blob --new-bundle-format=false --bundle): cosign 3
 * and cosign 2 both verify it with a key offline; cosign 2 reads a Sigstore bundle (the new format) only with a
 * trusted root fetched from Sigstore's TUF repository.
 */
export const SUMS_SIGNATURE_FILE = 'SHA256SUMS.cosign.bundle';
export const CRDS_FILE = 'usergroup-operator-crds.yaml';

/**
 * What SHA256SUMS lists: every file .github/workflows/release.yaml uploads but SHA256SUMS and its signature. All flat
 * (no directory), as a download of the GitHub release is, so `sha256sum -c SHA256SUMS` works on one.
 */
export function checksummedFiles(manifest: ReleaseManifest): string[] {
  const files = [
    'release.json',
    manifest.chart.file,
    manifest.crds,
    manifest.plugin.manifest,
    ...manifest.plugin.platforms.map((p) => p.file),
    ...manifest.sboms,
  ];
  const nested = files.filter((f) => f.includes('/'));
  if (nested.length > 0) throw new Error(`release files must be flat (a GitHub release has no directories): ${nested.join(', ')}`);
  return files.sort();
}
