import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../support/repo-root.js';

/**
 * The shell commands of the first ```sh block under a heading of one of the project's Markdown files, as a user
 * copies them: a line continued with `\` joined to the next, comment-only lines left out (a trailing comment is kept:
 * the shell ignores it). For tests that run what the documentation says instead of their own copy of it.
 * @throws Error when the heading or its block is missing (the documentation changed under the test)
 */
export function documentedCommands(file: string, heading: string): string[] {
  const lines = fs.readFileSync(path.join(repoRoot, file), 'utf8').split('\n');
  const at = lines.findIndex((l) => l.trim() === heading);
  if (at < 0) throw new Error(`${file} has no heading "${heading}"`);
  const open = lines.findIndex((l, i) => i > at && /^\s*```sh\s*$/.test(l));
  const nextHeading = lines.findIndex((l, i) => i > at && /^#{1,6} /.test(l));
  if (open < 0 || (nextHeading >= 0 && open > nextHeading)) throw new Error(`${file}: no \`\`\`sh block under "${heading}"`);
  const indent = /^\s*/.exec(lines[open] ?? '')?.[0].length ?? 0;
  const close = lines.findIndex((l, i) => i > open && /^\s*```\s*$/.test(l));
  if (close < 0) throw new Error(`${file}: the \`\`\`sh block under "${heading}" is not closed`);

  const commands: string[] = [];
  let pending = '';
  for (const raw of lines.slice(open + 1, close)) {
    const line = raw.slice(indent);
    if (pending === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    pending += pending === '' ? line : line.trimStart();
    if (pending.endsWith('\\')) {
      pending = `${pending.slice(0, -1).trimEnd()} `;
      continue;
    }
    commands.push(pending.trim());
    pending = '';
  }
  if (pending !== '') throw new Error(`${file}: the block under "${heading}" ends in a continued line`);
  return commands;
}
