// The files .github/workflows/release.yaml attaches to a GitHub release: its ASSETS globs, expanded as its shell does.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from './repo-root.js';

const WORKFLOW = path.join(repoRoot, '.github/workflows/release.yaml');

/** The ASSETS value of the workflow's `gh release create` step; fails if there is not exactly one such step. */
export function workflowAssets(): string {
  const workflow: unknown = parse(fs.readFileSync(WORKFLOW, 'utf8'));
  const steps = field(field(field(workflow, 'jobs'), 'release'), 'steps');
  if (!Array.isArray(steps)) throw new Error(`${WORKFLOW}: jobs.release.steps is not a list`);
  const runOf = (step: unknown): string => {
    const run = field(step, 'run');
    return typeof run === 'string' ? run : '';
  };
  const uploads = steps.filter((step: unknown) => runOf(step).includes('gh release create'));
  if (uploads.length !== 1) throw new Error(`${WORKFLOW}: ${uploads.length} steps run \`gh release create\`, expected 1`);
  const assets = field(field(uploads[0], 'env'), 'ASSETS');
  if (typeof assets !== 'string' || !runOf(uploads[0]).includes('$ASSETS')) {
    throw new Error(`${WORKFLOW}: the \`gh release create\` step must take its files from env.ASSETS`);
  }
  return assets;
}

/** The files of `dir` the workflow uploads: bash expands ASSETS there (failglob: a glob matching nothing fails, as gh would). */
export function workflowUploads(dir: string): string[] {
  const out = execFileSync('bash', ['-O', 'failglob', '-c', 'printf "%s\\n" $ASSETS'], {
    cwd: dir,
    env: { ...process.env, ASSETS: workflowAssets() },
    encoding: 'utf8',
  });
  return out.split('\n').filter(Boolean).sort();
}

function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}
