import fs from 'node:fs';
import path from 'node:path';
import { pushRelease } from './push.js';
import type { ReleaseManifest } from './release.js';
import { releaseTools } from './tools.js';

/**
 * `npm run release:push -- <release-dir> [--registry REGISTRY] [--plain-http]`: push.ts. Log in first as each tool
 * does (`crane auth login`, `helm registry login`); the default registry is the one the release was made for.
 */
const usage = 'usage: npm run release:push -- <release-dir> [--registry REGISTRY] [--plain-http]';
const args = process.argv.slice(2);
let registry: string | undefined;
let plainHttp = false;
const positional: string[] = [];
for (let i = 0; i < args.length; i++) {
  const arg = args[i] ?? '';
  if (arg === '--registry') registry = args[++i] ?? fail('--registry needs a value');
  else if (arg === '--plain-http') plainHttp = true;
  else if (arg.startsWith('-')) fail(`unknown option ${arg}`);
  else positional.push(arg);
}
const [dir] = positional;
if (dir === undefined || positional.length !== 1) fail('the release directory is required');
const manifestFile = path.join(dir, 'release.json');
if (!fs.existsSync(manifestFile)) fail(`${dir} has no release.json: not a release directory (npm run release)`);
const parsed: unknown = JSON.parse(fs.readFileSync(manifestFile, 'utf8'));
// release.json from before the flat layout named one signature per artifact and may lack the chart digest.
if (!hasKeys(parsed, 'image', ['signatures', 'digest']) || !hasKeys(parsed, 'chart', ['signatures', 'digest'])) {
  fail(`${manifestFile} lacks image/chart signatures or digests: made by an older release command; make the release again`);
}
const manifest = parsed as ReleaseManifest;
const tools = releaseTools();
const pushed = await pushRelease({ tools, dir, manifest, ...(registry !== undefined ? { registry } : {}), plainHttp });
process.stdout.write(`pushed ${manifest.version}${manifest.signed ? ' with its signatures' : ''}\n  image ${pushed.image}\n  chart ${pushed.chart}\n`);

function hasKeys(value: unknown, field: string, keys: readonly string[]): boolean {
  const inner = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[field] : undefined;
  return typeof inner === 'object' && inner !== null && keys.every((k) => k in inner);
}

function fail(message: string): never {
  process.stderr.write(`${message}\n${usage}\n`);
  process.exit(2);
}
