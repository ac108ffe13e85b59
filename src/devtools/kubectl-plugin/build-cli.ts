// `npm run build:plugin`: the kubectl plugin as one executable, its release tarball and krew manifest (release.ts).
import fs from 'node:fs';
import path from 'node:path';
import { buildPluginRelease } from './release.js';

const started = Date.now();
const release = await buildPluginRelease();
const mb = (file: string): string => `${(fs.statSync(file).size / 1e6).toFixed(1)} MB`;
const shown = (file: string): string => path.relative(process.cwd(), file);
process.stdout.write(
  `${release.rebuilt ? 'built' : 'up to date'} in ${((Date.now() - started) / 1000).toFixed(1)} s (v${release.version})\n` +
    `  ${shown(release.executable)}  ${mb(release.executable)}\n` +
    `  ${shown(release.tarball)}  ${mb(release.tarball)}  sha256 ${release.sha256}\n` +
    `  ${shown(release.manifest)}  (krew manifest)\n`,
);
