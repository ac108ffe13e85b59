import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../support/repo-root.js';
import { crdBundle } from '../../devtools/release/crds.js';

// usergroup-operator-crds.yaml, the release asset a user applies before upgrading: every CRD of crds/, nothing else.
describe('the release CRD file', () => {
  const crds = path.join(repoRoot, 'crds');
  const files = fs.readdirSync(crds).filter((f) => f.endsWith('.yaml'));

  it('holds every CRD of crds/ once, each document equal to its file', () => {
    const docs = parseAllDocuments(crdBundle(crds)).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    expect(docs.map((d) => d.kind)).toEqual(files.map(() => 'CustomResourceDefinition'));
    const expected = files.map((f) => parseAllDocuments(fs.readFileSync(path.join(crds, f), 'utf8'))[0]?.toJS() as unknown);
    expect([...docs].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))).toEqual(
      [...expected].sort((a, b) => (a as { metadata: { name: string } }).metadata.name.localeCompare((b as { metadata: { name: string } }).metadata.name)),
    );
  });

  it('is byte-stable: the same crds/ gives the same bytes, whatever order the directory lists them in', () => {
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-crds-'));
    try {
      for (const f of [...files].reverse()) fs.copyFileSync(path.join(crds, f), path.join(copy, f));
      expect(crdBundle(copy)).toBe(crdBundle(crds));
      expect(crdBundle(crds).startsWith('---\napiVersion: apiextensions.k8s.io/v1\n')).toBe(true);
    } finally {
      fs.rmSync(copy, { recursive: true, force: true });
    }
  });

  it('refuses a directory without CRDs, or a file that is not one', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-crds-'));
    try {
      expect(() => crdBundle(dir)).toThrow(/has no CRD \(\*\.yaml\) files/);
      fs.writeFileSync(path.join(dir, 'x.yaml'), 'apiVersion: v1\nkind: ConfigMap\n');
      expect(() => crdBundle(dir)).toThrow(/x\.yaml is not a CustomResourceDefinition/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
