import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { dockerIgnored, imageEnv, imageNodeFlags, parseCopy, parseDockerfile, readDockerignore, type Instruction } from '../../devtools/image/dockerfile.js';

// No Docker engine here: these check what can be checked without one. The image's entry point itself is
// started from a copy of the runtime stage's files in test/integration/image.test.ts.
const instructions = parseDockerfile(fs.readFileSync(path.join(repoRoot, 'Dockerfile'), 'utf8'));
const ignore = readDockerignore(repoRoot);
const stages = (): Instruction[][] => {
  const byStage: Instruction[][] = [];
  for (const i of instructions) (byStage[i.stage] ??= []).push(i);
  return byStage;
};

describe('Dockerfile', () => {
  it('is multi-stage: a build stage on Node 26 LTS, a distroless Node 26 runtime', () => {
    const froms = instructions.filter((i) => i.keyword === 'FROM').map((i) => i.args);
    expect(froms).toHaveLength(2);
    expect(froms[0]).toMatch(/^node:26[-.\w]* AS build$/);
    expect(froms[1]).toMatch(/^gcr\.io\/distroless\/nodejs26-debian\d+:nonroot$/);
  });

  it('builds with buildah and kaniko as well as Docker: no BuildKit-only RUN flags, no heredocs (docs/operations.md: The image)', () => {
    const text = fs.readFileSync(path.join(repoRoot, 'Dockerfile'), 'utf8');
    for (const run of instructions.filter((i) => i.keyword === 'RUN')) expect(run.args).not.toMatch(/^--(mount|network|security)\b/);
    expect(text).not.toMatch(/<<-?\s*["']?[A-Z]+/);
  });

  it('installs with npm ci from the lockfile, builds, then keeps production dependencies only', () => {
    const build = (stages()[0] ?? []).filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(build[0]).toMatch(/^npm ci\b/);
    expect(build.join(' && ')).toMatch(/npm run build/);
    expect(build.join(' && ')).toMatch(/npm prune --omit=dev/);
    // The runtime stage copies node_modules from the pruned build stage, never from the context.
    const runtimeCopies = (stages()[1] ?? []).filter((i) => i.keyword === 'COPY').map((i) => parseCopy(i.args));
    for (const copy of runtimeCopies.filter((c) => c.sources.some((s) => s.includes('node_modules')))) expect(copy.from).toBe('build');
  });

  it('copies only paths that exist in the build context and that .dockerignore lets through', () => {
    const fromContext = instructions
      .filter((i) => i.keyword === 'COPY')
      .map((i) => parseCopy(i.args))
      .filter((c) => c.from === undefined);
    expect(fromContext.length).toBeGreaterThan(0);
    for (const source of fromContext.flatMap((c) => c.sources)) {
      expect(fs.existsSync(path.join(repoRoot, source)), `${source} exists`).toBe(true);
      expect(dockerIgnored(ignore, source), `${source} is not excluded by .dockerignore`).toBe(false);
    }
    // What the build stage compiles must be in the context too.
    const tsconfigBuild = JSON.parse(fs.readFileSync(path.join(repoRoot, 'tsconfig.build.json'), 'utf8')) as { include: string[]; extends: string };
    for (const p of [...tsconfigBuild.include, tsconfigBuild.extends]) expect(dockerIgnored(ignore, path.posix.normalize(p)), p).toBe(false);
  });

  it('copies from the build stage only what the build stage produces', () => {
    const workdir = (stages()[0] ?? []).find((i) => i.keyword === 'WORKDIR')?.args;
    expect(workdir).toBe('/src');
    const produced = new Set(['/src/package.json', '/src/node_modules', '/src/dist']);
    const fromBuild = instructions
      .filter((i) => i.keyword === 'COPY')
      .map((i) => parseCopy(i.args))
      .filter((c) => c.from === 'build');
    for (const source of fromBuild.flatMap((c) => c.sources)) expect(produced.has(source), source).toBe(true);
    // dist/ is what `npm run build` writes (tsconfig.build.json's outDir).
    expect(
      (JSON.parse(fs.readFileSync(path.join(repoRoot, 'tsconfig.build.json'), 'utf8')) as { compilerOptions: { outDir: string } }).compilerOptions.outDir,
    ).toBe('dist');
  });

  it('keeps secrets, build output and dependencies of the host out of the context', () => {
    for (const p of ['node_modules', 'dist', '.git', '.controlplane', 'node_modules/got/package.json', 'dist/cli/main.js', 'devtools/controlplane/build.sh'])
      expect(dockerIgnored(ignore, p), p).toBe(true);
    // The image ships the simulator (src/sim); only the top-level Go modules of the control plane stay out.
    for (const p of ['src/cli/main.ts', 'src/sim/command.ts', 'package.json', 'package-lock.json', 'crds/usergroup.dev_usergroups.yaml', 'tsconfig.json'])
      expect(dockerIgnored(ignore, p), p).toBe(false);
  });

  it('runs as a non-root numeric user, with node itself as PID 1 receiving SIGTERM (exec-form entry point, no shell)', () => {
    const runtime = stages()[1] ?? [];
    expect(runtime.find((i) => i.keyword === 'USER')?.args).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    const entrypoint = JSON.parse(runtime.find((i) => i.keyword === 'ENTRYPOINT')?.args ?? 'null') as unknown;
    expect(entrypoint).toEqual(['/nodejs/bin/node', '--max-semi-space-size=4', '--heap-growing-percent=10', '--no-opt', 'dist/cli/main.js']);
    // What the benchmark runs the controller with.
    expect(imageNodeFlags(repoRoot)).toEqual(['--max-semi-space-size=4', '--heap-growing-percent=10', '--no-opt']);
    expect(imageEnv(repoRoot)).toEqual({ NODE_ENV: 'production', MALLOC_ARENA_MAX: '2' });
    expect(JSON.parse(runtime.find((i) => i.keyword === 'CMD')?.args ?? 'null')).toEqual(['run']);
    expect(runtime.some((i) => i.keyword === 'STOPSIGNAL' && i.args !== 'SIGTERM')).toBe(false);
  });
});

describe('the Dockerfile checks themselves', () => {
  it('parse continuations, flags and .dockerignore rules', () => {
    expect(parseDockerfile('# c\nFROM a AS b\nRUN x \\\n  && y\nFROM c\nCOPY --from=b /s/d ./d\n')).toEqual([
      { stage: 0, keyword: 'FROM', args: 'a AS b' },
      { stage: 0, keyword: 'RUN', args: 'x  && y' },
      { stage: 1, keyword: 'FROM', args: 'c' },
      { stage: 1, keyword: 'COPY', args: '--from=b /s/d ./d' },
    ]);
    expect(parseCopy('--chown=1:1 a b ./')).toEqual({ from: undefined, sources: ['a', 'b'], dest: './' });
    expect(() => parseCopy('["a", "b"]')).toThrow(/JSON form/);
    expect(dockerIgnored(['dist', '*.log', '!keep.log'], 'dist/x.js')).toBe(true);
    expect(dockerIgnored(['dist', '*.log', '!keep.log'], 'keep.log')).toBe(false);
    expect(dockerIgnored(['dist', '*.log'], 'src/a.log')).toBe(false);
    expect(dockerIgnored(['dist'], 'distribution')).toBe(false);
  });
});
