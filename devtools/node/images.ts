import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';
import { run } from './exec.js';

/** The operator image's name in the node's containerd; the chart's image.repository and image.tag. */
export const OPERATOR_IMAGE = { repository: 'usergroup-operator.dev/e2e/usergroup-operator', tag: 'dev' } as const;

const scripts = path.join(repoRoot, 'devtools/node');

/**
 * Debian's static busybox as two OCI image layouts (devtools/node/busybox-image.sh): busybox:1 and the CRI
 * sandbox image pause:1. Returns the two tarballs.
 */
export async function buildBaseImages(dir: string): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  await run('bash', [path.join(scripts, 'busybox-image.sh'), dir], { timeoutMs: 120_000 });
  return [path.join(dir, 'busybox.tar'), path.join(dir, 'pause.tar')];
}

/** Where `npm run test:e2e` puts the operator image before it enters the node's namespaces (which have no network). */
export const OPERATOR_IMAGE_ENV = 'UGO_E2E_OPERATOR_IMAGE';

/**
 * The operator image as an OCI layout tarball, built from the Dockerfile's own stages by devtools/image
 * (`npm run image`): `npm run test:e2e` builds it outside the node (its build stage runs npm ci, its base comes
 * from Debian packages: both need the network the node's namespace does not have) and names it here.
 */
export function operatorImageTarball(): string {
  const file = process.env[OPERATOR_IMAGE_ENV];
  if (!file || !fs.existsSync(file)) throw new Error(`${OPERATOR_IMAGE_ENV} names no image tarball: run the e2e tests with \`npm run test:e2e\``);
  return file;
}
