// `npm run build:plugin`: the kubectl plugin's release tarballs, one per platform, and its krew manifest (release.ts).
import fs from 'node:fs';
import path from 'node:path';
import { platformName } from '../platform-node.js';
import { buildPluginRelease } from './release.js';

const started = Date.now();
const release = await buildPluginRelease();
const mb = (file: string): string => `${(fs.statSync(file).size / 1e6).toFixed(1)} MB`;
const shown = (file: string): string => path.relative(process.cwd(), file);
process.stdout.write(
  `${release.rebuilt ? 'built' : 'up to date'} in ${((Date.now() - started) / 1000).toFixed(1)} s (v${release.version})\n` +
    release.platforms.map((p) => `  ${shown(p.tarball)}  ${mb(p.tarball)}  ${platformName(p.platform)} ${p.kind}  sha256 ${p.sha256}\n`).join('') +
    `  ${shown(release.manifest)}  (krew manifest)\n`,
);
