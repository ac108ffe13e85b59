import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { ensureBinaries } from '../../devtools/controlplane/binaries.js';
import { CHART_DIR, CRDS_DIR, crdFiles } from '../../devtools/manifests.js';

// Helm installs what is in the chart's crds/ (and, with crds.enabled, renders the same files as templates);
// everything else (tests, `npm start`, kubectl users) uses the top-level crds/. A CRD changed in one place only would
// ship a schema nobody tested.
describe('the Helm chart ships the CRDs unchanged', () => {
  const chartCrds = path.join(CHART_DIR, 'crds');

  it('has the same CRD files as crds/', () => {
    expect(crdFiles(chartCrds)).toEqual(crdFiles(CRDS_DIR));
    expect(crdFiles(CRDS_DIR).length).toBeGreaterThan(0);
  });

  it.each(crdFiles(CRDS_DIR))('%s is byte-identical (fix: cp crds/*.yaml deploy/helm/usergroup-operator/crds/)', (file) => {
    expect(fs.readFileSync(path.join(chartCrds, file), 'utf8')).toBe(fs.readFileSync(path.join(CRDS_DIR, file), 'utf8'));
  });
});

interface Crd {
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: unknown;
}

describe('crds.enabled: the CRDs as templates, rendered by the real helm', () => {
  let helm: string;
  beforeAll(() => {
    helm = ensureBinaries().helm;
  });

  const template = async (...sets: string[]): Promise<Crd[]> => {
    const { stdout } = await promisify(execFile)(helm, ['template', 'ugo', CHART_DIR, '--namespace', 'ugo-system', ...sets.flatMap((s) => ['--set', s])], {
      maxBuffer: 16 << 20,
    });
    return parseAllDocuments(stdout)
      .map((d) => d.toJS() as Crd | null)
      .filter((o): o is Crd => o?.kind === 'CustomResourceDefinition');
  };
  const chartVersion = (parseYaml(fs.readFileSync(path.join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { version: string }).version;
  const files = (): Crd[] => crdFiles().map((f) => parseYaml(fs.readFileSync(path.join(CRDS_DIR, f), 'utf8')) as Crd);

  it('by default renders no CRD (only crds/, as before)', async () => {
    expect(await template()).toEqual([]);
    expect(await template('crds.keep=false')).toEqual([]);
  });

  it('enabled: every CRD of crds/, its spec unchanged, with the chart labels and helm.sh/resource-policy: keep', async () => {
    const rendered = await template('crds.enabled=true');
    expect(rendered.map((c) => c.metadata.name).sort()).toEqual(
      files()
        .map((c) => c.metadata.name)
        .sort(),
    );
    expect(rendered).toHaveLength(4);
    for (const file of files()) {
      const crd = rendered.find((c) => c.metadata.name === file.metadata.name);
      expect(crd?.spec, file.metadata.name).toEqual(file.spec);
      expect(crd?.metadata.annotations).toEqual({ ...file.metadata.annotations, 'helm.sh/resource-policy': 'keep' });
      expect(crd?.metadata.labels).toMatchObject({
        ...file.metadata.labels,
        'app.kubernetes.io/instance': 'ugo',
        'app.kubernetes.io/managed-by': 'Helm',
        'helm.sh/chart': `usergroup-operator-${chartVersion}`,
      });
    }
  });

  it('crds.keep=false: the same CRDs without the keep policy', async () => {
    const rendered = await template('crds.enabled=true', 'crds.keep=false');
    expect(rendered).toHaveLength(4);
    for (const file of files()) {
      expect(rendered.find((c) => c.metadata.name === file.metadata.name)?.metadata.annotations).toEqual(file.metadata.annotations);
    }
  });

  it('passes helm lint --strict with them', async () => {
    const { stdout } = await promisify(execFile)(helm, ['lint', CHART_DIR, '--strict', '--set', 'crds.enabled=true']);
    expect(stdout).not.toMatch(/\[(ERROR|WARNING)\]/);
  });

  it('refuses an unknown key under crds', async () => {
    await expect(template('crds.enable=true')).rejects.toThrow("additional properties 'enable' not allowed");
  });
});
