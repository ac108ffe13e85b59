import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './repo-root.js';

export const CHART_DIR = path.join(repoRoot, 'deploy/helm/usergroup-operator');
export const MANIFESTS_DIR = path.join(repoRoot, 'deploy/kubernetes/base');
export const CRDS_DIR = path.join(repoRoot, 'crds');
/** Where the plain manifests install the controller, and the names the README's kustomize examples use. */
const MANIFEST_NAMESPACE = 'usergroup-operator';
const MANIFEST_API_KEY_SECRET = 'usergroup-operator-api-key';
/** RFC 2606's reserved TLD: a URL nobody can mistake for a real one, and that can never resolve. */
const MANIFEST_PLACEHOLDER_URL = 'https://analytics.invalid';

const GENERATED = '# Generated from deploy/helm/usergroup-operator by `npm run manifests`; edit the chart, not this file.\n';

/** The CRD files, in a stable order. */
export function crdFiles(dir: string = CRDS_DIR): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
}

/**
 * The plain manifests, rendered from the chart so the two cannot disagree: file name → content.
 * `crds.yaml` is separate from `install.yaml` so `kubectl delete -f install.yaml` uninstalls
 * the controller without deleting the CRDs (and with them every UserGroup and token Secret).
 */
export async function renderManifests(helm: string): Promise<Map<string, string>> {
  const crds = crdFiles().map(
    (f) =>
      fs
        .readFileSync(path.join(CRDS_DIR, f), 'utf8')
        .replace(/^---\n/, '')
        .trimEnd() + '\n',
  );
  const { stdout } = await promisify(execFile)(
    helm,
    [
      'template',
      'usergroup-operator',
      CHART_DIR,
      '--namespace',
      MANIFEST_NAMESPACE,
      '--set',
      `connection.url=${MANIFEST_PLACEHOLDER_URL}`,
      '--set',
      `connection.apiKey.existingSecret=${MANIFEST_API_KEY_SECRET}`,
    ],
    { maxBuffer: 16 << 20 },
  );
  return new Map([
    ['crds.yaml', GENERATED + crds.map((c) => `---\n${c}`).join('')],
    ['install.yaml', GENERATED + stdout],
  ]);
}
