import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { pinnedKubernetesVersion } from '../../../devtools/controlplane/binaries.js';
import { repoRoot } from '../../support/repo-root.js';
import { readRows, renderReport, renderTable, reportPath } from './report.js';
import { SCALE } from './scale.js';

/** Collects the scenarios' rows; at the end prints the summary table and writes the report. */
export default function setup(project: TestProject): () => void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-reliability-'));
  const rowsFile = path.join(dir, 'rows.jsonl');
  project.provide('reliabilityRowsFile', rowsFile);
  return () => {
    const rows = readRows(rowsFile);
    fs.rmSync(dir, { recursive: true, force: true });
    if (rows.length === 0) return;
    const file = reportPath(repoRoot, SCALE);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const kubernetes = pinnedKubernetesVersion();
    fs.writeFileSync(
      file,
      renderReport(rows, SCALE, {
        date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
        kubernetes,
        node: process.versions.node,
        cpus: os.cpus().length,
      }),
    );
    process.stdout.write(`\nReliability summary (${SCALE}):\n\n${renderTable(rows)}\nwritten to ${path.relative(repoRoot, file)}\n`);
  };
}
