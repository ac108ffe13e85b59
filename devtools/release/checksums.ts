import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * SHA256SUMS in the format `sha256sum -c` checks: one line per file of the release directory (sorted, subdirectories
 * by their relative path), so a user can verify a download with the tool they already have.
 */
export function sha256sums(dir: string, files: readonly string[]): string {
  return [...files]
    .sort()
    .map(
      (file) =>
        `${createHash('sha256')
          .update(fs.readFileSync(path.join(dir, file)))
          .digest('hex')}  ${file}\n`,
    )
    .join('');
}
