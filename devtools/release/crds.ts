// The release asset usergroup-operator-crds.yaml: every CRD of crds/ in one file, for `kubectl apply` before an upgrade.
import fs from 'node:fs';
import path from 'node:path';

/**
 * Every CRD file of `dir` (sorted by name), each as one `---`-started YAML document. Byte-stable: the same crds/
 * gives the same bytes, so the file's checksum only changes when a CRD does. Helm installs a chart's CRDs only on
 * a first install, so a user upgrading from a release whose chart carried older CRDs applies this file first.
 */
export function crdBundle(dir: string): string {
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  if (files.length === 0) throw new Error(`${dir} has no CRD (*.yaml) files`);
  return files
    .map((file) => {
      const text = fs.readFileSync(path.join(dir, file), 'utf8');
      if (!/^kind: CustomResourceDefinition$/m.test(text)) throw new Error(`${path.join(dir, file)} is not a CustomResourceDefinition`);
      return `---\n${text.replace(/^---\n/, '').trimEnd()}\n`;
    })
    .join('');
}
