import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { buildImage, type BuiltImage } from '../../devtools/image/build.js';
import { imageEnv, parseDockerfile } from '../../devtools/image/dockerfile.js';
import { run } from '../support/kube.js';

interface OciConfig {
  config: { User: string; Env: string[]; Entrypoint: string[]; Cmd: string[]; WorkingDir: string };
  rootfs: { diff_ids: string[] };
}

/**
 * The image built without a daemon (devtools/image/build.ts) from the Dockerfile's own stages, on a stand-in
 * for the distroless Node base made from Debian packages: it must carry exactly what the Dockerfile declares (a
 * test that reads the Dockerfile on its own, so a builder that made something up fails here), and it must run as
 * the image runs: uid 65532, a read-only root, /app, the image's environment only.
 */
describe('the image, built without a daemon from the Dockerfile', () => {
  let work: string;
  let built: BuiltImage;
  let config: OciConfig;
  let rootfs: string;

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-image-build-'));
    built = await buildImage({ context: repoRoot, name: 'usergroup-operator.dev/test/usergroup-operator:dev', out: path.join(work, 'image.tar') });
    const layout = path.join(work, 'layout');
    fs.mkdirSync(layout);
    expect((await run('tar', ['-xf', built.tarball, '-C', layout])).code).toBe(0);
    const blob = (digest: string): string => path.join(layout, 'blobs/sha256', digest.replace(/^sha256:/, ''));
    const index = JSON.parse(fs.readFileSync(path.join(layout, 'index.json'), 'utf8')) as {
      manifests: { digest: string; annotations: Record<string, string> }[];
    };
    expect(index.manifests[0]?.annotations['io.containerd.image.name']).toBe(built.name);
    const manifest = JSON.parse(fs.readFileSync(blob(index.manifests[0]?.digest ?? ''), 'utf8')) as {
      config: { digest: string };
      layers: { digest: string }[];
    };
    config = JSON.parse(fs.readFileSync(blob(manifest.config.digest), 'utf8')) as OciConfig;
    rootfs = path.join(work, 'rootfs');
    fs.mkdirSync(rootfs);
    for (const l of manifest.layers) expect((await run('tar', ['-xzf', blob(l.digest), '-C', rootfs])).code).toBe(0);
  }, 600_000);
  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it("carries the Dockerfile's entry point, command, user, working directory and environment, over the distroless base's", () => {
    const runtime = parseDockerfile(fs.readFileSync(path.join(repoRoot, 'Dockerfile'), 'utf8')).filter((i) => i.stage === 1);
    const last = (keyword: string): string => runtime.filter((i) => i.keyword === keyword).at(-1)?.args ?? '';
    expect(config.config.Entrypoint).toEqual(JSON.parse(last('ENTRYPOINT')));
    expect(config.config.Cmd).toEqual(JSON.parse(last('CMD')));
    expect(config.config.User).toBe(last('USER'));
    expect(config.config.WorkingDir).toBe(last('WORKDIR'));
    const env = Object.entries(imageEnv(repoRoot)).map(([k, v]) => `${k}=${v}`);
    // distroless/nodejs sets PATH and the CA bundle; the Dockerfile's ENV comes on top.
    expect(config.config.Env).toEqual([
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt',
      ...env,
    ]);
    expect(config.rootfs.diff_ids).toHaveLength(2);
  });

  it('stands in for distroless Node: the pinned Node at /nodejs/bin/node, the nonroot user, a CA bundle, no shell, no dev dependencies', () => {
    expect(fs.statSync(path.join(rootfs, 'nodejs/bin/node')).size).toBe(fs.statSync(path.join(repoRoot, 'node_modules/node/bin/node')).size);
    expect(fs.readFileSync(path.join(rootfs, 'etc/passwd'), 'utf8')).toContain('nonroot:x:65532:65532:');
    expect(fs.statSync(path.join(rootfs, 'etc/ssl/certs/ca-certificates.crt')).size).toBeGreaterThan(100_000);
    for (const shell of ['bin/sh', 'bin/bash', 'usr/bin/sh', 'usr/bin/bash']) expect(fs.existsSync(path.join(rootfs, shell)), shell).toBe(false);
    for (const dep of ['typescript', 'vitest', 'tsx', 'esbuild']) expect(fs.existsSync(path.join(rootfs, 'app/node_modules', dep)), dep).toBe(false);
    expect(fs.existsSync(path.join(rootfs, 'app/dist/cli/main.js'))).toBe(true);
    expect(fs.existsSync(path.join(rootfs, 'app/crds'))).toBe(true);
  });

  /** Runs the image's entry point (with `args` for CMD) as the image would: its env only, uid 65532, read-only root. */
  const runImage = (args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const mounts = [
      `mount --bind ${rootfs} ${rootfs}`,
      `mount -o remount,bind,ro ${rootfs} ${rootfs}`,
      `mount -t proc proc ${rootfs}/proc`,
      `mount -t tmpfs tmpfs ${rootfs}/tmp`,
    ];
    const [user, group] = config.config.User.split(':');
    const inner = [
      'unshare',
      `--root=${rootfs}`,
      `--wd=${config.config.WorkingDir}`,
      `--setuid=${user}`,
      `--setgid=${group ?? user}`,
      '--',
      ...config.config.Entrypoint,
      ...args,
    ];
    const quoted = inner.map((w) => `'${w.replace(/'/g, "'\\''")}'`).join(' ');
    return run('env', ['-i', ...config.config.Env, 'unshare', '--mount', '--fork', 'sh', '-c', `${mounts.join(' && ')} && exec ${quoted}`]);
  };

  it('runs as uid 65532 on a read-only root in a mount namespace: version, run --help', async () => {
    const version = await runImage(['version']);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout.trim()).toMatch(/^usergroup-operator \d+\.\d+\.\d+/);
    const help = await runImage([...config.config.Cmd, '--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('usage: usergroup-operator run');
  });
});
