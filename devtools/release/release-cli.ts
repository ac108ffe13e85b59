import fs from 'node:fs';
import path from 'node:path';
import { release } from './release.js';

/**
 * `npm run release -- <version> <out-dir> [--registry REGISTRY] [--key cosign.key]`: see release.ts. The key's
 * password comes from COSIGN_PASSWORD, as cosign takes it. Prints the release directory's files with their sizes.
 */
const usage = 'usage: npm run release -- <version> <out-dir> [--registry ghcr.io/usergroup-operator] [--key cosign.key]';
const args = process.argv.slice(2);
const positional: string[] = [];
const flags = new Map<string, string>();
for (let i = 0; i < args.length; i++) {
  const arg = args[i] ?? '';
  if (arg === '--registry' || arg === '--key') {
    const value = args[++i];
    if (value === undefined) fail(`${arg} needs a value`);
    flags.set(arg.slice(2), value);
  } else if (arg.startsWith('-')) {
    fail(`unknown option ${arg}`);
  } else {
    positional.push(arg);
  }
}
const [version, outDir] = positional;
if (version === undefined || outDir === undefined || positional.length !== 2) fail('a version and an output directory are required');
const key = flags.get('key');
if (key !== undefined && !fs.existsSync(key)) fail(`--key ${key}: no such file`);
const password = process.env['COSIGN_PASSWORD'];
if (key !== undefined && password === undefined) fail('--key needs its password in COSIGN_PASSWORD (empty for a key without one)');

const started = Date.now();
const out = path.resolve(outDir);
const manifest = await release({
  version,
  outDir: out,
  registry: flags.get('registry') ?? 'ghcr.io/usergroup-operator',
  signing: key !== undefined ? { key: path.resolve(key), password: password ?? '' } : undefined,
  progress: (line) => process.stderr.write(`[release] ${line}\n`),
});
process.stdout.write(`release ${manifest.version} in ${((Date.now() - started) / 1000).toFixed(0)} s: ${out}\n`);
process.stdout.write(`  image ${manifest.image.repository}:${manifest.image.tag}@${manifest.image.digest}${manifest.signed ? ' (signed)' : ' (unsigned)'}\n`);
for (const p of manifest.image.platforms) process.stdout.write(`    ${p.platform}  ${p.digest}\n`);
for (const line of listing(out)) process.stdout.write(`  ${line}\n`);

function listing(dir: string): string[] {
  const lines: string[] = [];
  const size = (bytes: number): string => (bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e3).toFixed(1)} kB`);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      lines.push(`${`${entry.name}/`.padEnd(48)} ${size(bytesUnder(file)).padStart(9)}  (${filesUnder(file).length} files)`);
      if (entry.name === 'oci') {
        for (const sub of fs.readdirSync(file).sort()) lines.push(`  ${sub.padEnd(46)} ${size(bytesUnder(path.join(file, sub))).padStart(9)}`);
      }
    } else {
      lines.push(`${entry.name.padEnd(48)} ${size(fs.statSync(file).size).padStart(9)}`);
    }
  }
  return lines;
}

/** The regular files under a directory (recursively), or the file itself. */
function filesUnder(p: string): string[] {
  if (!fs.statSync(p).isDirectory()) return [p];
  return fs
    .readdirSync(p, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

function bytesUnder(p: string): number {
  return filesUnder(p).reduce((sum, f) => sum + fs.statSync(f).size, 0);
}

function fail(message: string): never {
  process.stderr.write(`${message}\n${usage}\n`);
  process.exit(2);
}
