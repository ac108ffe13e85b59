import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../support/repo-root.js';
import { OPERATOR_IMAGE } from '../../../devtools/node/images.js';
import { PREVIOUS_RELEASE } from '../../support/previous-release.js';

// The release this tree upgrades from is named once, in test/support/previous-release.ts.
export { PREVIOUS_RELEASE };

/** The previous release's image in the node's containerd: the same repository as this tree's, tagged with its version. */
export const PREVIOUS_OPERATOR_IMAGE = { repository: OPERATOR_IMAGE.repository, tag: PREVIOUS_RELEASE.version } as const;

/** Where `npm run test:e2e` puts the previous release's image tarball (built before the node's namespaces, which have no network). */
export const PREVIOUS_OPERATOR_IMAGE_ENV = 'UGO_E2E_PREVIOUS_OPERATOR_IMAGE';

/**
 * Writes the previous release's tree (or only its package.json and `paths`) into `dest` with `git archive`. Fails with what to
 * do when the commit is not in this clone (a shallow clone, say).
 * @throws Error when the commit is missing or the tree is not the version PREVIOUS_RELEASE names
 */
export function extractPreviousRelease(dest: string, paths?: readonly string[]): string {
  const { version, commit } = PREVIOUS_RELEASE;
  const present = spawnSync('git', ['-C', repoRoot, 'cat-file', '-e', `${commit}^{commit}`], { stdio: 'ignore' });
  if (present.status !== 0) {
    throw new Error(
      `commit ${commit} (release ${version}) is not in the git repository at ${repoRoot}: the upgrade test builds the previous ` +
        'release from its source, so it needs the full history (a shallow clone lacks it: git fetch --unshallow)',
    );
  }
  fs.mkdirSync(dest, { recursive: true });
  const pathspec = paths === undefined ? [] : ['--', 'package.json', ...paths];
  const tar = execFileSync('git', ['-C', repoRoot, 'archive', '--format=tar', commit, ...pathspec], { maxBuffer: 256 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', dest], { input: tar });
  const manifest = JSON.parse(fs.readFileSync(path.join(dest, 'package.json'), 'utf8')) as { version?: string };
  if (manifest.version !== version) throw new Error(`commit ${commit} is version ${manifest.version ?? '?'}, not ${version}: PREVIOUS_RELEASE is wrong`);
  return dest;
}
