import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { isBuiltin } from 'node:module';
import path from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../src/devtools/controlplane/binaries.js';

// npm test builds first: dist/cli/main.js is the bundle the image runs (src/devtools/build/controller-bundle.ts).
const main = path.join(repoRoot, 'dist/cli/main.js');

/** The bundle's own imports, read by esbuild's parser (strings and comments that look like imports are not). */
async function importsOf(file: string): Promise<{ readonly path: string; readonly kind: string }[]> {
  const result = await build({
    entryPoints: [file],
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    external: ['*'],
    logLevel: 'silent',
  });
  const rel = path.relative(process.cwd(), file);
  return result.metafile.inputs[rel]?.imports.map((i) => ({ path: i.path, kind: i.kind })) ?? [];
}

describe('dist/cli/main.js: the controller as one module', () => {
  it("imports nothing at start but Node's built-ins: the sources and npm packages are inside", async () => {
    const imports = await importsOf(main);
    const atStart = imports.filter((i) => i.kind === 'import-statement').map((i) => i.path);
    expect(atStart).toContain('node:http2'); // got's, now inside
    expect(atStart.filter((id) => !isBuiltin(id))).toEqual([]);
  });

  it('leaves to Node only client-node (exec kubeconfigs) and the developer commands, which exist beside it', async () => {
    const later = (await importsOf(main)).filter((i) => i.kind === 'dynamic-import').map((i) => i.path);
    expect([...new Set(later)].sort()).toEqual(['../devtools/dev.js', '../devtools/sim/command.js', '@kubernetes/client-node']);
    for (const id of later.filter((i) => i.startsWith('.'))) expect(fs.existsSync(path.resolve(path.dirname(main), id))).toBe(true);
  });

  it('runs: version, and a developer command loaded from beside it', () => {
    const version = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
    expect(execFileSync(process.execPath, [main, 'version'], { encoding: 'utf8' }).trim()).toBe(`usergroup-operator ${version}`);
    expect(execFileSync(process.execPath, [main, 'sim', '--help'], { encoding: 'utf8' })).toContain('--latency-ms');
  });
});
