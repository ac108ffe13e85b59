import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checksummedFiles, CRDS_FILE, SUMS_FILE, SUMS_SIGNATURE_FILE } from '../../devtools/release/assets.js';
import { sha256sums } from '../../devtools/release/checksums.js';
import type { ReleaseManifest } from '../../devtools/release/release.js';
import { workflowUploads } from '../support/release-workflow.js';

// A downloaded GitHub release is one flat directory: SHA256SUMS must name exactly what the workflow uploads (its
// ASSETS globs, expanded by bash in a directory laid out as `npm run release` lays one out), and `sha256sum -c`
// must pass on a copy of just those files. test/e2e/release.test.ts checks the same on a real release.

const manifest: ReleaseManifest = {
  version: '9.8.7',
  image: {
    repository: 'registry.example/usergroup-operator',
    tag: '9.8.7',
    digest: `sha256:${'a'.repeat(64)}`,
    layout: 'oci/usergroup-operator',
    signatures: { bundle: 'oci/usergroup-operator.bundle', legacy: 'oci/usergroup-operator.sig' },
    platforms: [],
  },
  chart: {
    repository: 'registry.example/charts/usergroup-operator',
    file: 'usergroup-operator-9.8.7.tgz',
    digest: `sha256:${'b'.repeat(64)}`,
    signatures: { bundle: 'oci/chart.bundle', legacy: 'oci/chart.sig' },
  },
  crds: CRDS_FILE,
  plugin: {
    manifest: 'usergroup.yaml',
    platforms: ['linux_amd64', 'linux_arm64', 'darwin_amd64', 'darwin_arm64'].map((p) => ({
      platform: p.replace('_', '/'),
      kind: 'sea',
      file: `kubectl-usergroup_${p}.tar.gz`,
      sha256: 'c'.repeat(64),
    })),
  },
  sboms: [
    'usergroup-operator-image_linux_amd64.cdx.json',
    'usergroup-operator-image_linux_arm64.cdx.json',
    'usergroup-operator-chart.cdx.json',
    'kubectl-usergroup_linux_amd64.cdx.json',
  ],
  signed: true,
};

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-sums-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A release directory as release.ts writes one: the listed files, the OCI layouts, the public key, the sums and their signature. */
function layOutRelease(): void {
  for (const file of checksummedFiles(manifest)) fs.writeFileSync(path.join(dir, file), `contents of ${file}\n`);
  for (const layout of ['oci/usergroup-operator', 'oci/usergroup-operator.bundle', 'oci/usergroup-operator.sig', 'oci/chart.bundle', 'oci/chart.sig']) {
    fs.mkdirSync(path.join(dir, layout), { recursive: true });
    fs.writeFileSync(path.join(dir, layout, 'index.json'), '{}');
  }
  fs.writeFileSync(path.join(dir, 'cosign.pub'), 'public key');
  fs.writeFileSync(path.join(dir, SUMS_FILE), sha256sums(dir, checksummedFiles(manifest)));
  fs.writeFileSync(path.join(dir, SUMS_SIGNATURE_FILE), '{}');
}

const sumsNames = (text: string): string[] =>
  text
    .trimEnd()
    .split('\n')
    .map((line) => /^[a-f0-9]{64} {2}(.+)$/.exec(line)?.[1] ?? `unparsable line: ${line}`);

describe('SHA256SUMS of a release', () => {
  it('names exactly the files the workflow uploads, but itself and its signature, none in a directory', () => {
    layOutRelease();
    const names = sumsNames(fs.readFileSync(path.join(dir, SUMS_FILE), 'utf8'));
    expect(names).toContain(CRDS_FILE);
    expect(names.filter((n) => n.includes('/'))).toEqual([]);
    expect(workflowUploads(dir)).toEqual([...names, SUMS_FILE, SUMS_SIGNATURE_FILE].sort());
  });

  it('passes the real `sha256sum -c` on a flat copy of the uploaded files; a changed byte fails it', () => {
    layOutRelease();
    const download = path.join(dir, 'download');
    fs.mkdirSync(download);
    for (const file of workflowUploads(dir)) fs.copyFileSync(path.join(dir, file), path.join(download, file));
    const out = execFileSync('sha256sum', ['-c', SUMS_FILE], { cwd: download, encoding: 'utf8' });
    expect(out.trimEnd().split('\n')).toEqual(checksummedFiles(manifest).map((f) => `${f}: OK`));

    const plugin = path.join(download, 'kubectl-usergroup_linux_arm64.tar.gz');
    const bytes = fs.readFileSync(plugin);
    bytes[0] = bytes[0]! ^ 1;
    fs.writeFileSync(plugin, bytes);
    const refused = spawnSync('sha256sum', ['-c', SUMS_FILE], { cwd: download, encoding: 'utf8' });
    expect(refused.status).toBe(1);
    expect(refused.stdout).toContain('kubectl-usergroup_linux_arm64.tar.gz: FAILED\n');
  });

  it('lists its files sorted, one `<hex>  <name>` line each', () => {
    fs.writeFileSync(path.join(dir, 'b.tgz'), 'chart');
    fs.writeFileSync(path.join(dir, 'a.cdx.json'), '{}');
    expect(sha256sums(dir, ['b.tgz', 'a.cdx.json'])).toBe(execFileSync('sha256sum', ['a.cdx.json', 'b.tgz'], { cwd: dir, encoding: 'utf8' }));
  });

  it('refuses a release file in a directory: a GitHub release has none', () => {
    expect(() => checksummedFiles({ ...manifest, sboms: ['sbom/a.cdx.json'] })).toThrow(/must be flat.*sbom\/a\.cdx\.json/);
  });
});
