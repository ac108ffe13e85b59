import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';

export interface Binaries {
  readonly dir: string;
  readonly etcd: string;
  readonly kubeApiserver: string;
  readonly kubeControllerManager: string;
  readonly kubectl: string;
  readonly helm: string;
  readonly versions: { readonly kubernetes: string; readonly etcd: string; readonly helm: string };
}

// The Go modules that pin the binaries, and the script that builds and caches them: developer tooling at the top
// of the checkout, not in test/ (what ships must not read the tests) and not in src/ (nothing to compile there).
const pinDir = path.join(repoRoot, 'devtools/controlplane');
const buildScript = path.join(pinDir, 'build.sh');

/**
 * Returns the pinned control-plane binaries, building them first when the cache
 * has none (build.sh prints its progress on stderr, which we pass through).
 */
export function ensureBinaries(): Binaries {
  const result = spawnSync('bash', [buildScript], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    throw new Error(`building the local control plane failed (bash ${buildScript} exited ${result.status}); see its output above`);
  }
  const dir = result.stdout.trim().split('\n').pop() ?? '';
  const versions = parseVersions(fs.readFileSync(path.join(dir, 'versions'), 'utf8'));
  const bin = (name: string): string => {
    const file = path.join(dir, name);
    fs.accessSync(file, fs.constants.X_OK);
    return file;
  };
  return {
    dir,
    etcd: bin('etcd'),
    kubeApiserver: bin('kube-apiserver'),
    kubeControllerManager: bin('kube-controller-manager'),
    kubectl: bin('kubectl'),
    helm: bin('helm'),
    versions,
  };
}

function parseVersions(text: string): Binaries['versions'] {
  const entries = new Map(
    text
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('=', 2) as [string, string]),
  );
  const get = (k: string): string => {
    const v = entries.get(k);
    if (!v) throw new Error(`control-plane versions file lacks ${k}`);
    return v;
  };
  return { kubernetes: get('kubernetes'), etcd: get('etcd'), helm: get('helm') };
}

/** The Kubernetes version pinned in the helper module, read from go.mod rather than from the build output. */
export function pinnedKubernetesVersion(): string {
  const file = path.join(pinDir, 'kube/go.mod');
  const match = /^(?:require )?\s*k8s\.io\/kubernetes (v\S+)/m.exec(fs.readFileSync(file, 'utf8'));
  if (!match?.[1]) throw new Error(`k8s.io/kubernetes is not required in ${path.relative(repoRoot, file)}`);
  return match[1];
}
