// devtools/controlplane/build.sh under KUBEBUILDER_ASSETS (envtest's prebuilt etcd, kube-apiserver, kubectl): it uses
// what the directory holds and builds only what it lacks. The real script runs, with a `go` on PATH that records
// each build and writes a stand-in binary, so no Go build happens here (the integration test runs the real binaries).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';

const script = path.join(repoRoot, 'devtools/controlplane/build.sh');
let work: string;

beforeEach(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-assets-'));
  const bin = path.join(work, 'go-bin');
  fs.mkdirSync(bin);
  // `go version` feeds the cache key; `go build ... -o <out> <package>` logs the package and writes <out>.
  const fakeGo = [
    '#!/usr/bin/env bash',
    'if [ "$1" = version ]; then echo "go version go1.26.0 linux/amd64"; exit 0; fi',
    'out=""; while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift 2;; *) last=$1; shift;; esac; done',
    `echo "$last" >> ${JSON.stringify(path.join(work, 'builds'))}`,
    'printf "#!/bin/sh\\necho built\\n" > "$out"; chmod +x "$out"',
  ].join('\n');
  fs.writeFileSync(path.join(bin, 'go'), fakeGo, { mode: 0o755 });
});
afterEach(() => fs.rmSync(work, { recursive: true, force: true }));

/** An envtest-style directory: etcd, kube-apiserver and kubectl that report the versions given. */
function assets(kubernetes: string, etcd: string): string {
  const dir = path.join(work, 'assets');
  fs.mkdirSync(dir, { recursive: true });
  const tool = (name: string, line: string): void => fs.writeFileSync(path.join(dir, name), `#!/bin/sh\necho '${line}'\n`, { mode: 0o755 });
  tool('etcd', `etcd Version: ${etcd}`);
  tool('kube-apiserver', `Kubernetes ${kubernetes}`);
  tool('kubectl', `Client Version: ${kubernetes}`);
  return dir;
}

function build(env: Record<string, string>): { dir: string; stderr: string; builds: string[] } {
  const run = spawnSync('bash', [script], {
    encoding: 'utf8',
    env: { PATH: `${path.join(work, 'go-bin')}:/usr/bin:/bin`, HOME: work, USERGROUP_OPERATOR_CACHE: path.join(work, 'cache'), ...env },
  });
  expect(run.status, run.stderr).toBe(0);
  const buildsFile = path.join(work, 'builds');
  const builds = fs.existsSync(buildsFile) ? fs.readFileSync(buildsFile, 'utf8').trim().split('\n') : [];
  fs.rmSync(buildsFile, { force: true });
  return { dir: run.stdout.trim().split('\n').pop() ?? '', stderr: run.stderr, builds };
}

const versions = (dir: string): string => fs.readFileSync(path.join(dir, 'versions'), 'utf8');

describe('the control plane build under KUBEBUILDER_ASSETS', () => {
  it('builds only kube-controller-manager and helm, and links the prebuilt binaries with their versions', () => {
    const dir = assets('v1.37.2', '3.7.3');
    const first = build({ KUBEBUILDER_ASSETS: dir });
    expect(first.builds).toEqual(['k8s.io/kubernetes/cmd/kube-controller-manager', expect.stringMatching(/^helm\.sh\/helm\/v\d+\/cmd\/helm$/)]);
    for (const name of ['etcd', 'kube-apiserver', 'kubectl']) expect(fs.realpathSync(path.join(first.dir, name))).toBe(path.join(dir, name));
    for (const name of ['kube-controller-manager', 'helm']) expect(fs.realpathSync(path.join(first.dir, name)).startsWith(path.join(work, 'cache'))).toBe(true);
    expect(versions(first.dir)).toMatch(/^kubernetes=v1\.37\.2\netcd=v3\.7\.3\nhelm=v\S+\n$/);

    // Warm: nothing built again.
    expect(build({ KUBEBUILDER_ASSETS: dir }).builds).toEqual([]);
  });

  it('uses the versions the prebuilt binaries report, and says when Kubernetes is not the pin', () => {
    const run = build({ KUBEBUILDER_ASSETS: assets('v1.36.4', '3.6.9') });
    expect(versions(run.dir)).toMatch(/^kubernetes=v1\.36\.4\netcd=v3\.6\.9\n/);
    expect(run.stderr).toMatch(/KUBEBUILDER_ASSETS holds Kubernetes v1\.36\.4 \(the pin is v1\.37\.2\)/);
  });

  it('without it builds all five, and after a partial build only the rest', () => {
    build({ KUBEBUILDER_ASSETS: assets('v1.37.2', '3.7.3') });
    const all = build({});
    expect(all.builds).toEqual(['go.etcd.io/etcd/server/v3', 'k8s.io/kubernetes/cmd/kube-apiserver', 'k8s.io/kubernetes/cmd/kubectl']);
    expect(versions(all.dir)).toMatch(/^kubernetes=v1\.37\.2\netcd=v3\.7\.3\n/);
    expect(build({}).builds).toEqual([]);
  });

  it('refuses a KUBEBUILDER_ASSETS that is not a directory', () => {
    const run = spawnSync('bash', [script], {
      encoding: 'utf8',
      env: {
        PATH: `${path.join(work, 'go-bin')}:/usr/bin:/bin`,
        HOME: work,
        USERGROUP_OPERATOR_CACHE: path.join(work, 'cache'),
        KUBEBUILDER_ASSETS: path.join(work, 'nowhere'),
      },
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('is not a directory');
  });
});
