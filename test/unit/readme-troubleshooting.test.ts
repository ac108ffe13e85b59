import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Reason } from '../../src/controller/policies/conditions.js';
import { repoRoot } from '../support/repo-root.js';

// Users meet a reason in `kubectl get ug`; the README must tell them what it means and what to do.
describe('README troubleshooting table', () => {
  const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const start = readme.indexOf('## Troubleshooting');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));

  it.each(Object.values(Reason))('explains %s', (reason) => {
    expect(start).toBeGreaterThan(0);
    const row = section.split('\n').find((line) => line.startsWith(`| \`${reason}\``));
    expect(row, `a row for ${reason}`).toBeDefined();
    // reason | meaning | what to do: both filled in.
    expect(
      row
        ?.split('|')
        .map((c) => c.trim())
        .filter(Boolean).length,
    ).toBe(3);
  });
});
