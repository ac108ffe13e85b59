import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './repo-root.js';

/**
 * The release before this one, as users run it: the upgrade tests (test/e2e/upgrade.test.ts on the node,
 * test/integration/storage-migration*.test.ts) start from its CRDs, chart and image, taken from this repository's
 * history (a fresh clone has all of it) so that they are the bytes that release shipped, not a reconstruction:
 * there is no registry here. The commit is exactly what 0.2.0 shipped (its package.json, chart and CRDs say 0.2.0;
 * the next commit, b3edf8f, made 0.3.0 and moved the kinds to usergroup.dev/v1). Change both fields together when a
 * release is made, to the commit whose tree is that release.
 */
export const PREVIOUS_RELEASE = { version: '0.2.0', commit: '920f1a8957000f4046e5dfc5b9f6feaaff24932a' } as const;

/** One file of the previous release's tree, or a clear error when the clone lacks that commit (a shallow clone). */
export function previousReleaseFile(file: string): string {
  try {
    return execFileSync('git', ['show', `${PREVIOUS_RELEASE.commit}:${file}`], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
  } catch (err) {
    throw new Error(
      `cannot read ${file} of release ${PREVIOUS_RELEASE.version} (commit ${PREVIOUS_RELEASE.commit}) from git: upgrade tests need the full history (git fetch --unshallow)`,
      { cause: err },
    );
  }
}

/** The previous release's crds/ written to a new temporary directory (for ControlPlane.start's crds). */
export function previousReleaseCrds(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `usergroup-crds-${PREVIOUS_RELEASE.version}-`));
  const listing = execFileSync('git', ['ls-tree', '--name-only', `${PREVIOUS_RELEASE.commit}:crds`], { cwd: repoRoot, encoding: 'utf8' });
  for (const name of listing.split('\n').filter((n) => n.endsWith('.yaml'))) fs.writeFileSync(path.join(dir, name), previousReleaseFile(`crds/${name}`));
  return dir;
}
