import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';

// The README and docs/ are where a user finds every setting; a link or a file path in them that leads nowhere is a
// setting they cannot find. This keeps every relative link (its file or folder, and its #anchor under GitHub's
// heading slugs) and every repository path named in backticks true. No network: absolute URLs are not checked.

const documents = ['README.md', ...fs.readdirSync(path.join(repoRoot, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));

/** A piece of a Markdown file: its text and the 1-based line it starts on. */
interface Located {
  text: string;
  line: number;
}

/** A Markdown file's text with every fenced code block blanked (lines kept, so offsets still give line numbers). */
function withoutFences(markdown: string): string {
  let fence: string | undefined;
  return markdown
    .split('\n')
    .map((line) => {
      const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
      if (fence === undefined) {
        if (marker === undefined) return line;
        fence = marker;
        return '';
      }
      if (marker?.startsWith(fence.charAt(0)) === true && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      return '';
    })
    .join('\n');
}

function lineAt(text: string, offset: number): number {
  return text.slice(0, offset).split('\n').length;
}

/**
 * The code spans of a fence-free text (CommonMark: a run of n backticks up to the next run of exactly n, not
 * across a blank line; an unmatched run is literal), and the text with each span's characters replaced by `x` so
 * that what remains is prose (links inside code are not links).
 */
function codeSpans(text: string): { spans: Located[]; prose: string } {
  const spans: Located[] = [];
  let prose = '';
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '`') {
      prose += text.charAt(i);
      i++;
      continue;
    }
    let n = 0;
    while (text[i + n] === '`') n++;
    const run = '`'.repeat(n);
    let close = -1;
    for (let j = text.indexOf(run, i + n); j >= 0; j = text.indexOf(run, j + 1)) {
      if (text[j - 1] === '`') continue;
      let m = 0;
      while (text[j + m] === '`') m++;
      if (m === n) {
        close = j;
        break;
      }
      j += m - 1;
    }
    const content = close < 0 ? '' : text.slice(i + n, close);
    if (close < 0 || /\n\s*\n/.test(content)) {
      prose += run;
      i += n;
      continue;
    }
    spans.push({ text: content.trim(), line: lineAt(text, i) });
    prose += text.slice(i, close + n).replace(/[^\n]/g, 'x');
    i = close + n;
  }
  return { spans, prose };
}

/** The targets of the inline links and images of a fence-free, code-free text. */
function linkTargets(prose: string): Located[] {
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => ({
    text: m[1] ?? '',
    line: lineAt(prose, m.index),
  }));
}

/**
 * GitHub's anchors for a Markdown file's headings (ATX headings outside fenced code): the rendered text
 * (links as their text, code without backticks, no HTML tags), lowercased, punctuation and symbols removed except
 * `-` and `_`, each space a `-`; a repeated slug gets `-1`, `-2`, … in order.
 */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(markdown).split('\n')) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/`/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (anchors === undefined) {
    anchors = headingAnchors(fs.readFileSync(file, 'utf8'));
    anchorCache.set(file, anchors);
  }
  return anchors;
}

/** What is wrong with one link target of `doc` (a repository-relative path), or undefined when it leads somewhere. */
function brokenLink(doc: string, target: string): string | undefined {
  // Absolute URLs (https:, mailto:, …) are outside the repository: checking them needs the network.
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) return undefined;
  const hash = target.indexOf('#');
  const filePart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = filePart === '' ? path.join(repoRoot, doc) : path.resolve(repoRoot, path.dirname(doc), filePart);
  if (path.relative(repoRoot, file).startsWith('..')) return 'leads outside the repository';
  if (!fs.existsSync(file)) return 'no such file or folder';
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return 'an anchor into a file that is not Markdown';
  return anchorsOf(file).has(anchor) ? undefined : `no heading with the anchor #${anchor}`;
}

/**
 * Files the tests write and git ignores (reports/reliability-reduced.md, by the reduced reliability run): a
 * document may name them, a fresh clone does not have them. Only .gitignore's literal paths, not its patterns.
 */
const generated = new Set(
  fs
    .readFileSync(path.join(repoRoot, '.gitignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.includes('/') && !/[*?[!#]/.test(l)),
);

/** Top-level folders whose paths the documents name in backticks; dist/ and .controlplane/ are build output. */
const repositoryPath = /^(?:\.\/)?(?:src|test|deploy|crds|devtools|docs|bench|reports|\.github|\.ci)\/\S*$/;

/** The repository paths a code span names: its words (split at spaces and `=`, as in `--manifest=path`). */
function namedPaths(span: string): string[] {
  return (
    span
      .split(/[\s=]+/)
      .map((word) => word.replace(/:\d+$/, ''))
      .filter((word) => repositoryPath.test(word))
      // A placeholder (`<arch>`, `…`), a glob (`test/e2e/**/*.test.ts`) or a shell expansion (`$DIR`) stands for
      // paths, it is not one.
      .filter((word) => !/[<>…*?{}$]/.test(word))
  );
}

describe('the links and paths of README.md and docs/', () => {
  it('reads README.md and the files of docs/', () => {
    expect(documents).toContain('README.md');
    expect(documents.length).toBeGreaterThan(5);
    // A parser that finds nothing passes everything: the README links to its docs by the dozen.
    const { spans, prose } = codeSpans(withoutFences(fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8')));
    expect(linkTargets(prose).filter((l) => l.text.includes('#')).length).toBeGreaterThan(20);
    expect(spans.flatMap((s) => namedPaths(s.text)).length).toBeGreaterThan(5);
  });

  it.each(documents)('%s: every relative link leads to a file or folder, and every #anchor to a heading', (doc) => {
    const { prose } = codeSpans(withoutFences(fs.readFileSync(path.join(repoRoot, doc), 'utf8')));
    const broken = linkTargets(prose).flatMap(({ text, line }) => {
      const why = brokenLink(doc, text);
      return why === undefined ? [] : [`${doc}:${line}: (${text}) ${why}`];
    });
    expect(broken).toEqual([]);
  });

  // Fenced code blocks are left out: they are commands and their output, run where a user is (a release's files, a
  // clone elsewhere), and name files such as usergroup-operator-crds.yaml that are not in the repository by design.
  it.each(documents)('%s: every repository path in backticks outside code blocks exists', (doc) => {
    const { spans } = codeSpans(withoutFences(fs.readFileSync(path.join(repoRoot, doc), 'utf8')));
    const missing = spans.flatMap(({ text, line }) =>
      namedPaths(text)
        .filter((p) => !generated.has(p) && !fs.existsSync(path.join(repoRoot, p)))
        .map((p) => `${doc}:${line}: \`${p}\``),
    );
    expect(missing).toEqual([]);
  });

  it('computes anchors as GitHub does', () => {
    const anchors = headingAnchors(
      [
        '# Connections and tenancy',
        "## A namespace's own connection: egress policy and API-key Secrets",
        '### `kubectl usergroup` and [krew](https://krew.sigs.k8s.io)',
        '## Why the default connection became an object (upgrading from 0.1)',
        '```sh',
        '# not a heading',
        '```',
        '## In brief',
        '## In brief',
        '## snake_case — and more',
      ].join('\n'),
    );
    expect([...anchors]).toEqual([
      'connections-and-tenancy',
      'a-namespaces-own-connection-egress-policy-and-api-key-secrets',
      'kubectl-usergroup-and-krew',
      'why-the-default-connection-became-an-object-upgrading-from-01',
      'in-brief',
      'in-brief-1',
      'snake_case--and-more',
    ]);
  });

  it('finds links outside code only, and paths in code spans that cross a line', () => {
    const { spans, prose } = codeSpans(
      withoutFences(['see [a](a.md#x) and `[b](b.md)`', '```', '[c](c.md)', '```', 'run `bash', 'devtools/node/build.sh` and ``x`y``'].join('\n')),
    );
    expect(linkTargets(prose)).toEqual([{ text: 'a.md#x', line: 1 }]);
    expect(spans.flatMap((s) => namedPaths(s.text))).toEqual(['devtools/node/build.sh']);
    expect(spans.map((s) => s.text)).toContain('x`y');
  });
});
