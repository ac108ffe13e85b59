import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '../../src/devtools/controlplane/binaries.js';

const BUILD = path.join(repoRoot, 'test/promtool/build.sh');

/** Builds promtool from Prometheus' Go module (or finds it in the cache) and returns its path; progress goes to stderr. */
export function buildPromtool(): string {
  const res = spawnSync('bash', [BUILD], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (res.error) throw res.error;
  if (res.status !== 0) throw new Error(`building promtool failed (bash ${BUILD} exited ${String(res.status)}); see its output above`);
  const binary = res.stdout.trim().split('\n').pop();
  if (!binary) throw new Error(`bash ${BUILD} printed no binary path`);
  return binary;
}

/**
 * The metric names a PromQL expression reads: identifiers that are neither functions nor aggregations (followed by
 * "("), nor keywords, nor label names (inside {}, or in by/without/on/ignoring/group_left/group_right lists).
 */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = match[0];
    const after = stripped.slice(match.index + word.length).trimStart();
    // A Grafana variable ($__rate_interval, $job) is not PromQL.
    if (after.startsWith('(') || KEYWORDS.has(word) || stripped[match.index - 1] === '$') continue;
    names.add(word);
  }
  return [...names];
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan', 'Inf', 'NaN']);
