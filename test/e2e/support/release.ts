import fs from 'node:fs';
import type { ReleaseManifest } from '../../../devtools/release/release.js';

/** The registry test/e2e/release.test.ts runs on the node's address; the release is made for it (release-cli.ts). */
export const E2E_REGISTRY = { port: 5000 } as const;

/**
 * The registry test/e2e/upgrade.test.ts publishes both releases to: another port, so that the image references it
 * makes the kubelet pull are not release.test.ts's (which asserts the kubelet pulls its own, whichever file runs first).
 */
export const E2E_UPGRADE_REGISTRY = { port: 5001 } as const;

/** Where `npm run test:e2e` puts the release it made before entering the node's namespaces. */
export const RELEASE_DIR_ENV = 'UGO_E2E_RELEASE_DIR';

export function releaseDir(): string {
  const dir = process.env[RELEASE_DIR_ENV];
  if (!dir || !fs.existsSync(`${dir}/release.json`))
    throw new Error(`${RELEASE_DIR_ENV} names no release directory: run the e2e tests with \`npm run test:e2e\``);
  return dir;
}

export function readRelease(dir: string): ReleaseManifest {
  return JSON.parse(fs.readFileSync(`${dir}/release.json`, 'utf8')) as ReleaseManifest;
}
