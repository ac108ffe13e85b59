import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';

/** The pieces of a node the control plane lacks (devtools/node/build.sh), plus what comes from Debian. */
export interface NodeBinaries {
  readonly dir: string;
  readonly kubelet: string;
  readonly kubeProxy: string;
  readonly kubeScheduler: string;
  readonly containerd: string;
  readonly containerdShim: string;
  readonly ctr: string;
  /** bridge, host-local, loopback, portmap. */
  readonly cniDir: string;
  /** Debian's runc (not built: it needs cgo and libseccomp), or $UGO_RUNC. */
  readonly runc: string;
  readonly versions: { readonly kubernetes: string; readonly containerd: string; readonly cniPlugins: string };
}

const buildScript = path.join(repoRoot, 'devtools/node/build.sh');

/**
 * Returns the pinned node binaries, building them first when the cache has none (build.sh prints its
 * progress on stderr, passed through; a cold build takes many minutes, a warm one seconds).
 */
export function ensureNodeBinaries(): NodeBinaries {
  const result = spawnSync('bash', [buildScript], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`building the node binaries failed (bash ${buildScript} exited ${result.status}); see its output above`);
  const dir = result.stdout.trim().split('\n').pop() ?? '';
  const bin = (name: string): string => {
    const file = path.join(dir, name);
    fs.accessSync(file, fs.constants.X_OK);
    return file;
  };
  for (const plugin of ['bridge', 'host-local', 'loopback', 'portmap']) bin(path.join('cni', plugin));
  const versions = new Map(
    fs
      .readFileSync(path.join(dir, 'versions'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('=', 2) as [string, string]),
  );
  const version = (key: string): string => {
    const v = versions.get(key);
    if (!v) throw new Error(`${path.join(dir, 'versions')} lacks ${key}`);
    return v;
  };
  return {
    dir,
    kubelet: bin('kubelet'),
    kubeProxy: bin('kube-proxy'),
    kubeScheduler: bin('kube-scheduler'),
    containerd: bin('containerd'),
    containerdShim: bin('containerd-shim-runc-v2'),
    ctr: bin('ctr'),
    cniDir: path.join(dir, 'cni'),
    runc: findRunc(),
    versions: { kubernetes: version('kubernetes'), containerd: version('containerd'), cniPlugins: version('cni-plugins') },
  };
}

function findRunc(): string {
  const candidates = process.env['UGO_RUNC'] ? [process.env['UGO_RUNC']] : (process.env['PATH'] ?? '').split(':').concat('/usr/sbin', '/usr/bin');
  for (const dir of candidates) {
    const file = process.env['UGO_RUNC'] ? dir : path.join(dir, 'runc');
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // Next candidate.
    }
  }
  throw new Error('runc not found: apt-get install runc (or set UGO_RUNC to a runc or crun binary)');
}
