// A control plane from prebuilt binaries (KUBEBUILDER_ASSETS, controller-runtime envtest's convention): a directory
// holding the harness's own etcd, kube-apiserver and kubectl, as `setup-envtest use -p path` would print one. The
// build uses them as they are, builds nothing else when the cache has the rest, and the control plane runs on them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig, VersionApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinaries, pinnedKubernetesVersion } from '../../devtools/controlplane/binaries.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { repoRoot } from '../support/repo-root.js';

const ENVTEST_SET = ['etcd', 'kube-apiserver', 'kubectl'] as const;

describe('the control plane on KUBEBUILDER_ASSETS', () => {
  let assets: string;
  let cp: ControlPlane | undefined;
  const before = process.env['KUBEBUILDER_ASSETS'];

  beforeAll(() => {
    const built = ensureBinaries();
    assets = fs.mkdtempSync(path.join(os.tmpdir(), 'kubebuilder-assets-'));
    for (const name of ENVTEST_SET) fs.copyFileSync(path.join(built.dir, name), path.join(assets, name));
    for (const name of ENVTEST_SET) fs.chmodSync(path.join(assets, name), 0o755);
  });
  afterAll(async () => {
    await cp?.stop();
    if (before === undefined) delete process.env['KUBEBUILDER_ASSETS'];
    else process.env['KUBEBUILDER_ASSETS'] = before;
    fs.rmSync(assets, { recursive: true, force: true });
  });

  it('builds nothing and links the prebuilt three beside the cached kube-controller-manager and helm', () => {
    const run = spawnSync('bash', [path.join(repoRoot, 'devtools/controlplane/build.sh')], {
      encoding: 'utf8',
      env: { ...process.env, KUBEBUILDER_ASSETS: assets },
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('go build');
    expect(run.stderr).toContain(`using etcd kube-apiserver kubectl from KUBEBUILDER_ASSETS=${assets}`);
    const dir = run.stdout.trim().split('\n').pop() ?? '';
    for (const name of ENVTEST_SET) expect(fs.realpathSync(path.join(dir, name))).toBe(path.join(assets, name));
    expect(fs.readFileSync(path.join(dir, 'versions'), 'utf8')).toContain(`kubernetes=${pinnedKubernetesVersion()}\n`);
  });

  it('starts on them and serves', async () => {
    process.env['KUBEBUILDER_ASSETS'] = assets;
    cp = await ControlPlane.start();
    expect(fs.realpathSync(cp.binaries.kubeApiserver)).toBe(path.join(assets, 'kube-apiserver'));
    expect(fs.realpathSync(cp.binaries.etcd)).toBe(path.join(assets, 'etcd'));
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    expect((await kc.makeApiClient(VersionApi).getCode()).gitVersion).toBe(pinnedKubernetesVersion());
    const namespaces = await kc.makeApiClient(CoreV1Api).listNamespace();
    expect(namespaces.items.map((n) => n.metadata?.name)).toContain('default');
  });
});
