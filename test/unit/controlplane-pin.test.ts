import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pinnedKubernetesVersion } from '../../devtools/controlplane/binaries.js';
import { repoRoot } from '../support/repo-root.js';

const gomod = (module: string): string => fs.readFileSync(path.join(repoRoot, 'devtools/controlplane', module, 'go.mod'), 'utf8');

describe('the control-plane pin', () => {
  it('points every kubernetes staging module at the release that ships with the pinned kubernetes', () => {
    const k8s = pinnedKubernetesVersion();
    const staging = `v0.${k8s.slice('v1.'.length)}`;
    const replaces = [...gomod('kube').matchAll(/^replace (k8s\.io\/\S+) => (k8s\.io\/\S+) (v\S+)$/gm)];
    expect(replaces.length).toBeGreaterThan(30);
    for (const [, from, to, version] of replaces) {
      expect(to).toBe(from);
      expect(version).toBe(staging);
    }
  });

  it('builds every binary from a tool directive', () => {
    expect(gomod('kube')).toMatch(
      /tool \(\n\tk8s\.io\/kubernetes\/cmd\/kube-apiserver\n\tk8s\.io\/kubernetes\/cmd\/kube-controller-manager\n\tk8s\.io\/kubernetes\/cmd\/kubectl\n\)/,
    );
    expect(gomod('etcd')).toMatch(/^tool go\.etcd\.io\/etcd\/server\/v3$/m);
    expect(gomod('helm')).toMatch(/^tool helm\.sh\/helm\/v4\/cmd\/helm$/m);
  });
});
