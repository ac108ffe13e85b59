import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './repo-root.js';

/**
 * Runs a tool's build script (devtools/<dir>/build.sh or test/<dir>/build.sh: built from its Go module, or found in
 * the cache) and returns the binary's path, the script's last line of stdout; build progress goes to stderr.
 */
export function buildGoTool(name: string, script: string): string {
  const build = path.join(repoRoot, script);
  const res = spawnSync('bash', [build], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (res.error) throw res.error;
  if (res.status !== 0) throw new Error(`building ${name} failed (bash ${build} exited ${String(res.status)}); see its output above`);
  const binary = res.stdout.trim().split('\n').pop();
  if (!binary) throw new Error(`bash ${build} printed no binary path`);
  return binary;
}
