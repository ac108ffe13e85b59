import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { Metrics } from '../../src/observability/metrics.js';
import { run } from '../support/kube.js';
import { CHART_DIR } from '../../devtools/manifests.js';
import { metricNamesIn } from '../support/promtool.js';

/*
 * The chart's optional PrometheusRule and Grafana dashboard, as `helm template` renders them: the alert rules pass
 * Prometheus' own `promtool check rules` and rule unit tests (test/fixtures/alerts.test.yaml, promtool built from
 * Prometheus' Go module), and every metric an alert or a dashboard panel reads is one the operator exports.
 */

const SETS = [
  'connection.url=https://analytics.invalid',
  'connection.apiKey.existingSecret=k',
  'metrics.prometheusRule.enabled=true',
  'metrics.dashboard.enabled=true',
];

async function rendered(): Promise<Record<string, unknown>[]> {
  const res = await run(
    path.join(inject('binDir'), 'helm'),
    ['template', 'ugo', CHART_DIR, '--namespace', 'ugo-system', ...SETS.flatMap((s) => ['--set', s])],
    {
      timeoutMs: 120_000,
    },
  );
  expect(res.code, res.stderr).toBe(0);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as Record<string, unknown> | null)
    .filter((d): d is Record<string, unknown> => d !== null);
}

const ofKind = (docs: Record<string, unknown>[], kind: string): Record<string, unknown> => {
  const found = docs.filter((d) => d['kind'] === kind);
  expect(found, kind).toHaveLength(1);
  return found[0] ?? {};
};

/** Every series name the operator's registry exports (histograms with their _bucket, _sum and _count). */
async function exportedNames(): Promise<Set<string>> {
  const metrics = new Metrics('test');
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    // prom-client types this as an enum; at run time it is the Prometheus type name.
    if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${m.name}${suffix}`);
  }
  return names;
}

describe("the chart's alert rules and dashboard", () => {
  it('the PrometheusRule passes promtool check rules and promtool test rules', async () => {
    const rule = ofKind(await rendered(), 'PrometheusRule');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-promtool-'));
    try {
      // What promtool reads is what the chart ships: the PrometheusRule's spec is a rule file.
      fs.writeFileSync(path.join(dir, 'alerts.yaml'), JSON.stringify(rule['spec']));
      fs.copyFileSync(path.resolve('test/fixtures/alerts.test.yaml'), path.join(dir, 'alerts.test.yaml'));
      const check = await run(inject('promtool'), ['check', 'rules', path.join(dir, 'alerts.yaml')], { timeoutMs: 60_000 });
      expect(check.code, check.stdout + check.stderr).toBe(0);
      expect(check.stdout).toMatch(/SUCCESS: 5 rules found/);
      const tests = await run(inject('promtool'), ['test', 'rules', path.join(dir, 'alerts.test.yaml')], { timeoutMs: 60_000 });
      console.log(`[alerts] promtool test rules: ${tests.stdout.trim().split('\n').pop() ?? ''}`);
      expect(tests.code, tests.stdout + tests.stderr).toBe(0);
      expect(tests.stdout).toMatch(/SUCCESS/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('promtool test rules fails when an alert does not fire as the test expects (the check can fail)', async () => {
    const rule = ofKind(await rendered(), 'PrometheusRule');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-promtool-'));
    try {
      const spec = JSON.stringify(rule['spec']).replace('> usergroup_token_max_age_seconds', '> 2 * usergroup_token_max_age_seconds');
      fs.writeFileSync(path.join(dir, 'alerts.yaml'), spec);
      fs.copyFileSync(path.resolve('test/fixtures/alerts.test.yaml'), path.join(dir, 'alerts.test.yaml'));
      const tests = await run(inject('promtool'), ['test', 'rules', path.join(dir, 'alerts.test.yaml')], { timeoutMs: 60_000 });
      expect(tests.code).not.toBe(0);
      expect(tests.stdout + tests.stderr).toMatch(/UserGroupTokenTooOld/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('every metric the alerts and the dashboard read is one the operator exports', async () => {
    const docs = await rendered();
    const exported = await exportedNames();
    const rule = ofKind(docs, 'PrometheusRule');
    const groups = (rule['spec'] as { groups: { rules: { expr: string }[] }[] }).groups;
    const alertExprs = groups.flatMap((g) => g.rules.map((r) => r.expr));

    const configMap = ofKind(docs, 'ConfigMap');
    expect((configMap['metadata'] as { labels: Record<string, string> }).labels['grafana_dashboard']).toBe('1');
    const dashboard = JSON.parse((configMap['data'] as Record<string, string>)['usergroup-operator.json'] ?? '') as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const panelExprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));
    expect(panelExprs.length).toBeGreaterThanOrEqual(15);

    const read = new Set([...alertExprs, ...panelExprs].flatMap(metricNamesIn));
    console.log(
      `[alerts] ${alertExprs.length} alert expressions and ${panelExprs.length} panel queries read ${read.size} metrics: ${[...read].sort().join(', ')}`,
    );
    expect(read.size).toBeGreaterThanOrEqual(15);
    expect([...read].filter((name) => !exported.has(name))).toEqual([]);
    // The extractor itself: a made-up name is caught.
    expect(metricNamesIn('sum by (reason) (rate(usergroup_made_up_total{job="x"}[5m])) > on() group_left vector(1)')).toEqual(['usergroup_made_up_total']);
  });
});
