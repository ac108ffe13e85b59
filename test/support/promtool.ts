import { buildGoTool } from './go-tool.js';

/** Builds promtool from Prometheus' Go module (or finds it in the cache) and returns its path; progress goes to stderr. */
export function buildPromtool(): string {
  return buildGoTool('promtool', 'devtools/promtool/build.sh');
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
