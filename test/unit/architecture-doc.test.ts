// docs/architecture.md is how a newcomer finds each step by its file: every link true, every module of the controller,
// the kube edge and the service edge named by its full path, and every name an entry gives found in the files it names.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { tsSources } from '../support/import-graph.js';

const DOC = path.join(repoRoot, 'docs/architecture.md');
const sources = tsSources(path.join(repoRoot, 'src')).map((f) => path.relative(repoRoot, f));
const byBasename = new Map<string, string[]>();
for (const f of sources) byBasename.set(path.basename(f), [...(byBasename.get(path.basename(f)) ?? []), f]);

/** A table row, a bullet (with its continuation lines) or a paragraph: what one claim of the doc spans. */
function entriesOf(doc: string): string[] {
  const entries: string[] = [];
  for (const block of doc.split(/\n\s*\n/)) {
    let current: string[] = [];
    for (const line of block.split('\n')) {
      if ((line.startsWith('|') || line.startsWith('- ')) && current.length > 0) {
        entries.push(current.join('\n'));
        current = [];
      }
      current.push(line);
    }
    if (current.length > 0) entries.push(current.join('\n'));
  }
  return entries;
}

/** The source files an entry names: its links under src/ (a folder: every file in it), and backticked basenames that name one file. */
function filesOf(entry: string): string[] {
  const linked = [...entry.matchAll(/\]\(\.\.\/(src\/[^)#\s]+)\)/g)].flatMap(([, target = '']) =>
    sources.filter((f) => f === target || f.startsWith(`${target.replace(/\/$/, '')}/`)),
  );
  const named = [...entry.matchAll(/`([a-z0-9-]+\.ts)`/g)].flatMap(([, name = '']) => {
    const found = byBasename.get(name) ?? [];
    return found.length === 1 ? found : [];
  });
  return [...new Set([...linked, ...named])];
}

/** Code names an entry gives (camelCase or PascalCase with an inner capital, as `upsertLocal` or `InformerGroup`), each missing from every file it names. */
function unfoundNames(entry: string, read: (file: string) => string): string[] {
  const files = filesOf(entry);
  if (files.length === 0) return [];
  const names = new Set(
    [...entry.matchAll(/`([A-Za-z][A-Za-z0-9]*)(?:\(\))?`/g)].map(([, n = '']) => n).filter((n) => /^(?:[a-z]+|[A-Z][a-z0-9]+)[A-Z][A-Za-z0-9]*$/.test(n)),
  );
  return [...names].filter((n) => !files.some((f) => new RegExp(`\\b${n}\\b`).test(read(f))));
}

describe('docs/architecture.md', () => {
  const doc = fs.readFileSync(DOC, 'utf8');
  const read = (file: string): string => fs.readFileSync(path.join(repoRoot, file), 'utf8');

  it('every relative link points at a file or folder that exists', () => {
    const missing = [...doc.matchAll(/\]\((\.\.\/[^)#\s]+|[a-z-]+\.md)(#[^)]*)?\)/g)]
      .map((m) => m[1] ?? '')
      .filter((target) => !fs.existsSync(path.resolve(repoRoot, 'docs', target)));
    expect(missing).toEqual([]);
  });

  it('links every module of src/controller, src/kube and src/service by its full path', () => {
    const unlinked = sources.filter((f) => /^src\/(controller|kube|service)\//.test(f)).filter((f) => !doc.includes(`](../${f})`));
    expect(unlinked).toEqual([]);
  });

  it('every code name an entry gives is in a file that entry names', () => {
    const wrong = entriesOf(doc).flatMap((entry) => unfoundNames(entry, read).map((n) => `${n} in: ${entry.slice(0, 100)}`));
    expect(wrong).toEqual([]);
  });

  it('the name check fails for a name the named file does not hold, and passes for one it does', () => {
    const entry = '| 7 | rotate | [`rotate.ts`](../src/controller/usergroup/rotate.ts) | `rotateIfAsked`, `awaitSomethingElse` |';
    expect(unfoundNames(entry, read)).toEqual(['awaitSomethingElse']);
    expect(entriesOf('a\n- one `x.ts`\n  more\n- two\n\n| r1 |\n| r2 |')).toEqual(['a', '- one `x.ts`\n  more', '- two', '| r1 |', '| r2 |']);
  });
});
