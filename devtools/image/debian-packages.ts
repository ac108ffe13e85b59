import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Platform } from '../platform-node.js';

/** A Debian package as it went into an image (what an SBOM lists). */
export interface DebianPackage {
  readonly name: string;
  readonly version: string;
  readonly arch: string;
}

/** A downloaded .deb and what its control file says it is. */
export interface DownloadedDeb extends DebianPackage {
  readonly file: string;
}

/** Debian's name for a platform's architecture (the same words as Go's and OCI's for the two we build). */
export function debianArchOf(platform: Platform): string {
  if (platform.os !== 'linux') throw new Error(`no Debian packages for ${platform.os}`);
  return { amd64: 'amd64', arm64: 'arm64' }[platform.arch];
}

/** One line of `apt-get --print-uris download`: 'URI' FILENAME SIZE SHA256:HEX. */
export interface DebUri {
  readonly uri: string;
  readonly filename: string;
  readonly size: number;
  readonly sha256: string;
}

export function parsePrintUris(output: string): DebUri[] {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const m = /^'([^']+)' (\S+) (\d+) SHA256:([0-9a-f]{64})$/.exec(line.trim());
      if (!m) throw new Error(`apt-get --print-uris: unexpected line ${JSON.stringify(line)}`);
      return { uri: m[1] ?? '', filename: m[2] ?? '', size: Number(m[3]), sha256: m[4] ?? '' };
    });
}

/** `dpkg-deb -f DEB Package Version Architecture`, one "Field: value" a line. */
export function parseControlFields(output: string): DebianPackage {
  const field = (name: string): string => {
    const value = new RegExp(`^${name}: (.+)$`, 'm').exec(output)?.[1]?.trim();
    if (!value) throw new Error(`dpkg-deb -f: no ${name} in ${JSON.stringify(output)}`);
    return value;
  };
  return { name: field('Package'), version: field('Version'), arch: field('Architecture') };
}

/**
 * The apt options for packages of `arch`. The host's own architecture uses the host's apt as it is (its lists, kept
 * fresh by the usual `apt-get update`). Another architecture gets an apt of its own: its own state, lists and cache
 * under `dir`, the host's sources (one Debian mirror carries every architecture) and keyrings, and only that
 * architecture, so the host's dpkg is never told about it (no `dpkg --add-architecture`) and its lists stay as
 * they are. An empty status file: what the host has installed is no business of a download for another machine.
 * Only the Packages indexes are fetched (no AppStream metadata, no translations): that is all `download` reads.
 */
export function aptOptions(arch: string, hostArch: string, dir: string): string[] {
  if (arch === hostArch) return [];
  const o = (kv: string): string[] => ['-o', kv];
  return [
    ...o(`APT::Architecture=${arch}`),
    ...o(`APT::Architectures::=${arch}`),
    ...o(`Dir::State=${path.join(dir, 'state')}`),
    ...o(`Dir::State::status=${path.join(dir, 'state/status')}`),
    ...o(`Dir::Cache=${path.join(dir, 'cache')}`),
    ...o('Acquire::Languages=none'),
    ...['DEP-11', 'DEP-11-icons-small', 'DEP-11-icons', 'DEP-11-icons-hidpi'].flatMap((t) => o(`Acquire::IndexTargets::deb::${t}::DefaultEnabled=false`)),
    // The cache lives in root's home, which apt's unprivileged download user cannot enter: it would warn each time.
    ...o('APT::Sandbox::User=root'),
  ];
}

/** How long a foreign architecture's package lists are trusted before `apt-get update` again (security updates). */
const LISTS_MAX_AGE_MS = 24 * 3600 * 1000;

/**
 * The .debs of `packages` for `arch`, from the cache (~/.cache/usergroup-operator/debian/ARCH/debs) when a file
 * with the name and SHA-256 apt asks for is there, otherwise downloaded into it. The lists of a foreign
 * architecture are fetched on first use, again after a day, and again when apt cannot find or fetch a package
 * with the lists it has (the mirror has moved on).
 */
export function debianPackages(
  packages: readonly string[],
  arch: string,
  say: (line: string) => void = () => undefined,
  cacheDir = defaultCacheDir(),
): DownloadedDeb[] {
  const dir = path.join(cacheDir, arch);
  const host = execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8' }).trim();
  const options = aptOptions(arch, host, dir);
  const foreign = options.length > 0;
  const stamp = path.join(dir, 'state/updated');
  const update = (): void => {
    say(`  apt-get update for ${arch} (its own lists in ${dir}/state)`);
    for (const d of ['state/lists/partial', 'cache/archives/partial']) fs.mkdirSync(path.join(dir, d), { recursive: true });
    fs.writeFileSync(path.join(dir, 'state/status'), '');
    apt([...options, 'update'], dir);
    fs.writeFileSync(stamp, '');
  };
  if (foreign && !(fs.existsSync(stamp) && Date.now() - fs.statSync(stamp).mtimeMs < LISTS_MAX_AGE_MS)) update();
  try {
    return fetchDebs(packages, options, path.join(dir, 'debs'), say);
  } catch (err) {
    if (!foreign) throw new Error(`${(err as Error).message} (apt-get update first?)`, { cause: err });
    update();
    return fetchDebs(packages, options, path.join(dir, 'debs'), say);
  }
}

function fetchDebs(packages: readonly string[], options: readonly string[], debs: string, say: (line: string) => void): DownloadedDeb[] {
  fs.mkdirSync(debs, { recursive: true });
  // A directory of its own: an interrupted download never leaves a partial file under a cached name, and apt sees
  // no .deb there (it leaves out of --print-uris any package whose file is already in the current directory).
  const fresh = fs.mkdtempSync(path.join(debs, '.download-'));
  try {
    const wanted = parsePrintUris(apt([...options, '--print-uris', 'download', ...packages], fresh));
    const missing = wanted.filter((d) => !hasFile(path.join(debs, d.filename), d.sha256));
    if (missing.length > 0) {
      say(`  apt-get download ${missing.map((d) => d.filename).join(' ')}`);
      apt([...options, 'download', ...missing.map((d) => d.filename.replace(/_.*/, ''))], fresh);
      for (const d of missing) {
        if (!hasFile(path.join(fresh, d.filename), d.sha256)) throw new Error(`apt-get download gave no ${d.filename} with SHA256 ${d.sha256}`);
        fs.renameSync(path.join(fresh, d.filename), path.join(debs, d.filename));
      }
    }
    const got = wanted.map((d) => {
      const file = path.join(debs, d.filename);
      return { file, ...parseControlFields(execFileSync('dpkg-deb', ['-f', file, 'Package', 'Version', 'Architecture'], { encoding: 'utf8' })) };
    });
    const absent = absentPackages(packages, got);
    if (absent.length > 0) throw new Error(`apt-get --print-uris download listed no ${absent.join(', ')}`);
    return got;
  } finally {
    fs.rmSync(fresh, { recursive: true, force: true });
  }
}

/** The packages asked for that are not among those got: a base without its libc must not be built quietly. */
export function absentPackages(asked: readonly string[], got: readonly DebianPackage[]): string[] {
  return asked.filter((name) => !got.some((p) => p.name === name));
}

function hasFile(file: string, sha256: string): boolean {
  return fs.existsSync(file) && createHash('sha256').update(fs.readFileSync(file)).digest('hex') === sha256;
}

function apt(args: readonly string[], cwd: string): string {
  try {
    return execFileSync('apt-get', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const stderr = ((err as { stderr?: string }).stderr ?? '').trim();
    throw new Error(`apt-get ${args.filter((a) => !a.includes('=') && a !== '-o').join(' ')}: ${stderr || (err as Error).message}`, { cause: err });
  }
}

function defaultCacheDir(): string {
  const root = process.env['USERGROUP_OPERATOR_CACHE'] ?? path.join(process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache'), 'usergroup-operator');
  return path.join(root, 'debian');
}
