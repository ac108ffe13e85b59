import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { parseCopy, parseDockerfile } from '../../devtools/image/dockerfile.js';
import { createNamespace, deleteNamespace, eventually, run } from '../support/kube.js';

// Without a Docker engine, the runtime stage is rebuilt as a directory: the files its COPY lines name,
// with production dependencies only (what `npm prune --omit=dev` leaves), then its entry point is run from
// there. A runtime import of a dev dependency, or a file the image lacks, fails here.
describe("the image's runtime stage, as a directory", () => {
  let root: string;
  let entrypoint: string[];
  let cmd: string[];

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-image-'));
    const runtime = parseDockerfile(fs.readFileSync(path.join(repoRoot, 'Dockerfile'), 'utf8')).filter((i) => i.stage === 1);
    for (const copy of runtime.filter((i) => i.keyword === 'COPY').map((i) => parseCopy(i.args))) {
      for (const source of copy.sources) {
        // --from=build paths are under the build stage's WORKDIR (/src), i.e. the checkout after npm ci and build.
        const from = copy.from === 'build' ? path.join(repoRoot, path.relative('/src', source)) : path.join(repoRoot, source);
        if (path.basename(source) === 'node_modules') continue; // installed below, production only
        const dest = path.join(root, copy.dest.endsWith('/') ? path.join(copy.dest, path.basename(source)) : copy.dest);
        expect(fs.existsSync(from), `${from} (built by npm run build?)`).toBe(true);
        fs.cpSync(from, dest, { recursive: true });
      }
    }
    fs.copyFileSync(path.join(repoRoot, 'package-lock.json'), path.join(root, 'package-lock.json'));
    const npm = await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { timeoutMs: 300_000, cwd: root });
    expect(npm.code, npm.stderr).toBe(0);
    fs.rmSync(path.join(root, 'package-lock.json'));
    entrypoint = JSON.parse(runtime.find((i) => i.keyword === 'ENTRYPOINT')?.args ?? '[]') as string[];
    cmd = JSON.parse(runtime.find((i) => i.keyword === 'CMD')?.args ?? '[]') as string[];
  }, 300_000);
  afterAll(() => {
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  /** The entry point with our Node in place of the image's /nodejs/bin/node. */
  const image = (args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    run(process.execPath, [...entrypoint.slice(1), ...args], { cwd: root });

  it('holds none of the build and test tools', () => {
    // (@types/node stays: @kubernetes/client-node depends on it.)
    for (const dep of ['typescript', 'vitest', 'tsx', 'node', 'esbuild', 'vite']) expect(fs.existsSync(path.join(root, 'node_modules', dep)), dep).toBe(false);
    expect(fs.existsSync(path.join(root, 'node_modules/@kubernetes/client-node'))).toBe(true);
  });

  it('its entry point starts: --help, run --help, sim --help, version', async () => {
    expect(entrypoint[0]).toBe('/nodejs/bin/node');
    const help = await image(['--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/usage/i);
    const runHelp = await image([...cmd, '--help']);
    expect(runHelp.code, runHelp.stderr).toBe(0);
    expect(runHelp.stdout).toContain('usage: usergroup-operator run');
    // The image ships the simulator (src/sim, loaded on demand) for demos against a cluster.
    const simHelp = await image(['sim', '--help']);
    expect(simHelp.code, simHelp.stderr).toBe(0);
    expect(simHelp.stdout).toContain('usage: usergroup-operator sim');
    const version = await image(['version']);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout).toContain((JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version);
  });

  it('its default command runs the controller against the test cluster and stops on SIGTERM with exit 0', async () => {
    const ns = await createNamespace('image');
    try {
      const child = spawn(
        process.execPath,
        [...entrypoint.slice(1), ...cmd, '--kubeconfig', inject('kubeconfig'), '--namespaces', ns, '--metrics-addr', '0', '--health-addr', '0'],
        { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      await eventually('workers started', async () => (out.includes('"workers started"') ? true : undefined), 30_000);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      await deleteNamespace(ns);
    }
  });
});
