// Every shipped source file opens with a one-line `//` comment saying what the file is for, so a reader
// (or a reviewer of a listing) learns a module's purpose before its first import.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { tsSources } from '../support/import-graph.js';

// Long enough to say something ("// Utils." is not a purpose); the shortest real header is about 40 characters.
const MIN_HEADER_LENGTH = 20;

/** Why a file's text does not open with a header line, or undefined when it does. A shebang may come first. */
function headerProblem(text: string): string | undefined {
  const lines = text.split('\n');
  const first = lines[0]?.startsWith('#!') ? lines[1] : lines[0];
  if (!first?.startsWith('//')) return `starts with ${JSON.stringify((first ?? '').slice(0, 60))}, not a // line`;
  if (first.startsWith('///')) return 'starts with a triple-slash directive, not a header';
  if (first.trim().length < MIN_HEADER_LENGTH) return `header ${JSON.stringify(first)} is shorter than ${MIN_HEADER_LENGTH} characters`;
  return undefined;
}

describe('a header line on every shipped file', () => {
  it('every src/**/*.ts begins with a // line saying what the file is for', () => {
    const files = tsSources(path.join(repoRoot, 'src'));
    expect(files.length).toBeGreaterThan(100);
    const problems = files.flatMap((file) => {
      const problem = headerProblem(fs.readFileSync(file, 'utf8'));
      return problem === undefined ? [] : [`${path.relative(repoRoot, file)}: ${problem}`];
    });
    expect(problems, 'files without a one-line // header (add one above the first import or doc comment)').toEqual([]);
  });

  it('the check can fail: code, an import, a doc comment, a directive or a stub first are all refused', () => {
    expect(headerProblem("import { x } from './x.js';\n")).toMatch(/not a \/\/ line/);
    expect(headerProblem('export const A = 1;\n')).toMatch(/not a \/\/ line/);
    expect(headerProblem('/** About the first export. */\nexport const A = 1;\n')).toMatch(/not a \/\/ line/);
    expect(headerProblem('/// <reference types="node" />\n')).toMatch(/triple-slash/);
    expect(headerProblem('// Utils.\nexport const A = 1;\n')).toMatch(/shorter than/);
    expect(headerProblem('')).toMatch(/not a \/\/ line/);
    expect(headerProblem('#!/usr/bin/env node\nimport { x } from "./x.js";\n')).toMatch(/not a \/\/ line/);
  });

  it('accepts a header, after a shebang too', () => {
    expect(headerProblem('// The work queue: dedup, delayed adds and backoff.\nexport const A = 1;\n')).toBeUndefined();
    expect(headerProblem('#!/usr/bin/env node\n// The executable: runs the command line.\nimport { x } from "./x.js";\n')).toBeUndefined();
  });
});
