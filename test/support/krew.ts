import { buildGoTool } from './go-tool.js';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** Builds krew from its Go module (or finds it in the cache) and returns its path; progress goes to stderr. */
export function buildKrew(): string {
  return buildGoTool('krew', 'devtools/krew/build.sh');
}

/**
 * A git repository laid out like krew's default index (github.com/kubernetes-sigs/krew-index: plugins/*.yaml),
 * with no plugins, for KREW_DEFAULT_INDEX_URI. krew commands other than `install --manifest` refuse to run
 * until `kubectl krew update` has cloned an index, and the real one is out of reach of the tests.
 */
export function emptyKrewIndex(dir: string): string {
  fs.mkdirSync(path.join(dir, 'plugins'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'plugins/.gitkeep'), '');
  // The test's own identity and no user or system git config, so the commit works on any machine.
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'test',
    GIT_AUTHOR_EMAIL: 'test@example.invalid',
    GIT_COMMITTER_NAME: 'test',
    GIT_COMMITTER_EMAIL: 'test@example.invalid',
  };
  for (const args of [
    ['init', '-q', '-b', 'master'],
    ['add', 'plugins'],
    ['commit', '-q', '-m', 'empty index'],
  ]) {
    execFileSync('git', ['-C', dir, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  }
  return dir;
}
