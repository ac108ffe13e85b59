import path from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot } from '../repo-root.js';
import { platformName, type Platform } from '../platform-node.js';
import { buildImage, LINUX_AMD64 } from './build.js';

/**
 * `npm run image -- OUT.tar [NAME] [--platforms linux/amd64,linux/arm64]`: the image as an OCI layout tarball, built
 * without a daemon (build.ts); for several platforms, one layout with an image index. Prints the tarball's path.
 */
const { positionals, values } = parseArgs({ allowPositionals: true, options: { platforms: { type: 'string' } } });
const [out = 'usergroup-operator-image.tar', name = 'usergroup-operator.dev/local/usergroup-operator:dev'] = positionals;
const platforms = values.platforms?.split(',').map(parsePlatform) ?? [LINUX_AMD64];
const started = Date.now();
const say = (line: string): void => void process.stderr.write(`[image] ${line}\n`);
const built = await buildImage({ context: repoRoot, name, out: path.resolve(out), platforms, progress: say });
const digest = built.indexDigest ?? built.manifestDigest;
say(`${built.name} → ${built.tarball} (${digest}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
if (built.indexDigest) for (const p of built.platforms) say(`  ${platformName(p.platform)}: ${p.manifestDigest}`);
process.stdout.write(`${built.tarball}\n`);

function parsePlatform(text: string): Platform {
  const [os, arch] = text.trim().split('/');
  if (os !== 'linux' || (arch !== 'amd64' && arch !== 'arm64')) throw new Error(`--platforms: ${text} is not linux/amd64 or linux/arm64`);
  return { os, arch };
}
