import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { buildImage } from '../../devtools/image/build.js';
import type { Platform } from '../../devtools/platform-node.js';

// Refused before any stage runs (these return in milliseconds): a layout the caller did not ask for is never written.
describe('buildImage: the platforms it is asked for', () => {
  const build = (platforms: readonly Platform[]): Promise<unknown> =>
    buildImage({ context: repoRoot, name: 'x.dev/a:b', out: path.join(os.tmpdir(), 'never-written.tar'), platforms });

  it('refuses none, a platform twice, and anything but Linux', async () => {
    await expect(build([])).rejects.toThrow(/no platform/);
    await expect(
      build([
        { os: 'linux', arch: 'arm64' },
        { os: 'linux', arch: 'arm64' },
      ]),
    ).rejects.toThrow(/a platform twice: linux\/arm64, linux\/arm64/);
    await expect(
      build([
        { os: 'linux', arch: 'amd64' },
        { os: 'darwin', arch: 'arm64' },
      ]),
    ).rejects.toThrow(/Linux only, not darwin\/arm64/);
  });
});
