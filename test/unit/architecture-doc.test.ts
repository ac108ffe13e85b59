import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { tsSources } from '../support/import-graph.js';

// docs/architecture.md is how a newcomer finds each step of the flow by its file: it must name only files that
// exist, and every module of the controller must be in it.
describe('docs/architecture.md', () => {
  const doc = fs.readFileSync(path.join(repoRoot, 'docs/architecture.md'), 'utf8');

  it('every relative link points at a file or folder that exists', () => {
    const missing = [...doc.matchAll(/\]\((\.\.\/[^)#\s]+|[a-z-]+\.md)(#[^)]*)?\)/g)]
      .map((m) => m[1] ?? '')
      .filter((target) => !fs.existsSync(path.resolve(repoRoot, 'docs', target)));
    expect(missing).toEqual([]);
  });

  it('names every module of the controller, the runner and the writers it uses', () => {
    const modules = ['src/controller', 'src/kube']
      .flatMap((dir) => tsSources(path.join(repoRoot, dir)))
      .map((f) => path.relative(path.join(repoRoot, 'src'), f));
    const unnamed = modules.filter((m) => !doc.includes(`(../src/${m})`) && !doc.includes(`\`${path.basename(m)}\``));
    expect(unnamed).toEqual([]);
  });
});
