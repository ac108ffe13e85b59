import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { ensureBinaries } from '../../devtools/controlplane/binaries.js';
import { CHART_DIR } from '../../devtools/manifests.js';

// The README installs a release pinned by digest (image.digest, from the verified release.json): the Deployment must
// then name repository@digest, whatever the tag says, and a malformed digest must fail the install, not reach the kubelet.
const exec = promisify(execFile);
let helm: string;
beforeAll(() => {
  helm = ensureBinaries().helm;
});

async function containerImage(...sets: string[]): Promise<string> {
  const { stdout } = await exec(helm, ['template', 'ugo', CHART_DIR, ...sets.flatMap((s) => ['--set', s])], { maxBuffer: 16 << 20 });
  const deployments = parseAllDocuments(stdout)
    .map((d) => d.toJS() as { kind?: string; spec?: { template: { spec: { containers: { image: string }[] } } } } | null)
    .filter((o) => o?.kind === 'Deployment');
  expect(deployments).toHaveLength(1);
  return deployments[0]?.spec?.template.spec.containers[0]?.image ?? '';
}

describe('the chart image.digest value', () => {
  const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
  const appVersion = (parse(fs.readFileSync(path.join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { appVersion: string }).appVersion;

  it('unset: the image is pulled by the chart appVersion tag (or image.tag)', async () => {
    expect(await containerImage()).toBe(`ghcr.io/usergroup-operator/usergroup-operator:${appVersion}`);
    expect(await containerImage('image.tag=1.2.3')).toBe('ghcr.io/usergroup-operator/usergroup-operator:1.2.3');
  });

  it('set: repository@digest, and the tag is ignored', async () => {
    expect(await containerImage('image.repository=registry.example/ugo', `image.digest=${digest}`)).toBe(`registry.example/ugo@${digest}`);
    expect(await containerImage(`image.digest=${digest}`, 'image.tag=1.2.3')).toBe(`ghcr.io/usergroup-operator/usergroup-operator@${digest}`);
  });

  it('refuses a digest that is not sha256:<64 hex> (values.schema.json)', async () => {
    for (const bad of ['sha256:abc', digest.slice(7), `sha512:${'0'.repeat(64)}`]) {
      await expect(containerImage(`image.digest=${bad}`), bad).rejects.toThrow(/image\.digest|\/image\/digest/);
    }
  });
});
