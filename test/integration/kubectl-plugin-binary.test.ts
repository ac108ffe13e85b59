import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { usage } from '../../src/cli/kubectl/usage.js';
import { repoRoot } from '../support/repo-root.js';
import { platformNode } from '../../devtools/platform-node.js';
import { PLUGIN_PLATFORMS, platformKey, tarballName } from '../../devtools/kubectl-plugin/platforms.js';
import { buildPluginRelease, KREW_TEMPLATE, type PlatformTarball, type PluginRelease } from '../../devtools/kubectl-plugin/release.js';
import type { CommandResult } from '../support/kube.js';
import { emptyKrewIndex } from '../support/krew.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * The plugin as kubectl users install it: the real krew (devtools/krew, built from its Go module) installs the
 * release tarball with the filled krew manifest, `kubectl krew install --manifest --archive`, the way a release
 * is tried before it is published; krew reads both exactly as it would the published ones, only the download
 * is replaced by the local file. The plugin then runs from krew's bin directory with a PATH that holds that
 * directory and kubectl (and krew) and nothing else, so no Node can be found, in an environment without
 * NODE_OPTIONS or anything else of this test's.
 *
 * The other three platforms' tarballs are installed by the same krew told it runs there (KREW_OS, KREW_ARCH,
 * krew's own override for trying manifests), each into a krew root of its own, and run here as far as Linux
 * allows: the linux/arm64 executable under qemu-user (qemu-aarch64-static, with Debian's arm64 cross libc as
 * its root: libc6-arm64-cross, libstdc++6-arm64-cross, libatomic1-arm64-cross), the darwin script (the same
 * for both Mac architectures) with the pinned Node 26 on PATH. Not tested here: anything on macOS itself.
 */
let release: PluginRelease;
let linuxAmd64: PlatformTarball;
let work = '';
let bin = ''; // kubectl and kubectl-krew (kubectl runs `kubectl krew` as the executable kubectl-krew on PATH)
let krewRoot = ''; // KREW_ROOT: krew's index, store, receipts, and bin/, which holds the plugins it installs
let install: RunResult;
const tarballFiles: string[] = [];

beforeAll(async () => {
  // The same build as `npm run build:plugin` (all four platforms): ~20 s when the sources changed, a few when not.
  release = await buildPluginRelease();
  linuxAmd64 = tarballOf('linux', 'amd64');
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-plugin-binary-'));
  bin = path.join(work, 'bin');
  krewRoot = path.join(work, 'krew');
  fs.mkdirSync(bin);
  fs.symlinkSync(path.join(inject('binDir'), 'kubectl'), path.join(bin, 'kubectl'));
  fs.symlinkSync(inject('krew'), path.join(bin, 'kubectl-krew'));
  tarballFiles.push(...execFileSync('tar', ['-tzf', linuxAmd64.tarball], { encoding: 'utf8' }).trim().split('\n'));

  // A krew set up as its docs say has cloned its default index (with git) by `kubectl krew update`; without one
  // `kubectl krew list` refuses to run. git is on PATH for that command only.
  const gitDir = path.join(work, 'git');
  fs.mkdirSync(gitDir);
  fs.symlinkSync(execFileSync('/bin/sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim(), path.join(gitDir, 'git'));
  const index = emptyKrewIndex(path.join(work, 'krew-index'));
  const update = await run('kubectl', ['krew', 'update'], {
    ...userEnv(),
    PATH: `${bin}:${gitDir}:${path.join(krewRoot, 'bin')}`,
    KREW_DEFAULT_INDEX_URI: index,
  });
  if (update.code !== 0) throw new Error(`kubectl krew update exited ${update.code}: ${update.stderr}`);

  install = await run('kubectl', ['krew', 'install', `--manifest=${release.manifest}`, `--archive=${linuxAmd64.tarball}`]);
  if (install.code !== 0) throw new Error(`kubectl krew install exited ${install.code}: ${install.stderr}`);
});

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/**
 * Only PATH, HOME, KUBECONFIG and krew's two variables: KUBECONFIG points nowhere, so the cluster is reached
 * only through --kubeconfig. KREW_NO_UPGRADE_CHECK: a krew with a release tag asks api.github.com for a newer
 * one on some runs, and a test does not call out.
 */
function userEnv(root: string = krewRoot): NodeJS.ProcessEnv {
  return {
    PATH: `${bin}:${path.join(root, 'bin')}`,
    HOME: work,
    KUBECONFIG: path.join(work, 'no-such-kubeconfig'),
    KREW_ROOT: root,
    KREW_NO_UPGRADE_CHECK: '1',
  };
}

type RunResult = CommandResult & { ms: number };

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv = userEnv()): Promise<RunResult> {
  const began = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr, ms: Date.now() - began }));
  });
}

const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

function tarballOf(os: string, arch: string): PlatformTarball {
  const found = release.platforms.find((p) => p.platform.os === os && p.platform.arch === arch);
  if (!found) throw new Error(`the release has no ${os}/${arch} tarball`);
  return found;
}

describe('krew installs the release: tarball and krew manifest', () => {
  it('krew verified the sha256, unpacked the tarball into its store and linked the executable into its bin', () => {
    expect(install.stderr).toContain('Installed plugin: usergroup\n');
    // Before this, krew validated the manifest (apiVersion, kind, a safe name, a semver version, a one-line
    // shortDescription, per platform a uri, a sha256, a bin and an os/arch selector), picked the platform whose
    // selector matches linux/amd64 and compared the tarball's sha256 with it; two refusals are tested below.
    const store = path.join(krewRoot, 'store/usergroup', `v${release.version}`);
    expect(fs.readlinkSync(path.join(krewRoot, 'bin/kubectl-usergroup'))).toBe(path.join(store, 'kubectl-usergroup'));
    expect(fs.statSync(path.join(store, 'kubectl-usergroup')).mode & 0o777).toBe(0o755);
    expect(fs.readFileSync(path.join(store, 'LICENSE'), 'utf8')).toBe(fs.readFileSync(path.join(repoRoot, 'LICENSE'), 'utf8'));
    const notices = fs.readFileSync(path.join(store, 'THIRD-PARTY-NOTICES'), 'utf8');
    for (const name of ['Node.js v26', '@kubernetes/client-node', 'yaml']) expect(notices).toContain(name);
    // What krew does not look at: the tarball's order and the .sha256 file published beside it.
    expect(tarballFiles).toEqual(['kubectl-usergroup', 'LICENSE', 'THIRD-PARTY-NOTICES']);
    for (const { platform, tarball, sha256: digest } of release.platforms) {
      expect(tarball).toBe(path.join(path.dirname(release.manifest), tarballName(platform)));
      expect(fs.readFileSync(`${tarball}.sha256`, 'utf8')).toBe(`${digest}  ${tarballName(platform)}\n`);
      expect(sha256(fs.readFileSync(tarball))).toBe(digest);
    }
  });

  it('kubectl krew list shows it (krew names the source of a --manifest install "detached")', async () => {
    const list = await run('kubectl', ['krew', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toBe('detached/usergroup\n');
  });

  // The filled manifest with one thing wrong, each installed into a krew root of its own.
  const refused = [
    {
      what: "a sha256 that is not the tarball's",
      edit: (manifest: string): string => manifest.replace(linuxAmd64.sha256, sha256('not the tarball')),
      message: (): string => `checksum does not match, want: ${sha256('not the tarball')}, got ${linuxAmd64.sha256}`,
    },
    {
      what: 'no platform for linux/amd64',
      edit: (manifest: string): string => manifest.replace('os: linux\n          arch: amd64', 'os: linux\n          arch: s390x'),
      message: (): string => 'plugin "usergroup" does not offer installation for this platform',
    },
  ];
  it.each(refused)('krew refuses a manifest with $what and installs nothing', async ({ edit, message }) => {
    const root = fs.mkdtempSync(path.join(work, 'refused-'));
    const manifest = path.join(root, 'usergroup.yaml');
    const edited = edit(fs.readFileSync(release.manifest, 'utf8'));
    expect(edited).not.toBe(fs.readFileSync(release.manifest, 'utf8'));
    fs.writeFileSync(manifest, edited);
    const res = await run('kubectl', ['krew', 'install', `--manifest=${manifest}`, `--archive=${linuxAmd64.tarball}`], userEnv(root));
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message());
    expect(fs.readdirSync(path.join(root, 'bin'))).toEqual([]);
    expect(fs.readdirSync(path.join(root, 'receipts'))).toEqual([]);
  });

  it("what krew does not check: the version is package.json's, the uris are that release's tarballs, the template has its placeholders", () => {
    const version = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
    const manifest = parseYaml(fs.readFileSync(release.manifest, 'utf8')) as KrewPlugin;
    expect(manifest.spec.version).toBe(`v${version}`);
    expect(manifest.spec.homepage).toMatch(/^https:\/\//);
    expect(manifest.spec.description).toContain('kubectl usergroup status');
    // krew takes any uri when --archive replaces the download; users' krew downloads this one.
    expect(manifest.spec.platforms.map((p) => [p.uri, p.sha256])).toEqual(
      release.platforms.map((p): unknown[] => [
        expect.stringMatching(new RegExp(`^https://\\S+/v${version.replaceAll('.', '\\.')}/${tarballName(p.platform)}$`)),
        p.sha256,
      ]),
    );
    const template = fs.readFileSync(path.join(repoRoot, KREW_TEMPLATE), 'utf8');
    expect(new Set([...template.matchAll(/\{\{([\w.]+)\}\}/g)].map((m) => m[1]))).toEqual(
      new Set(['version', ...PLUGIN_PLATFORMS.map((p) => `sha256.${platformKey(p)}`)]),
    );
  });
});

interface KrewPlugin {
  spec: { version: string; homepage: string; description: string; platforms: { uri: string; sha256: string }[] };
}

/** Debian's arm64 libc, libstdc++ and libatomic (the *-arm64-cross packages): the root qemu-user loads the dynamic loader from. */
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';
// The pinned Node 26 (the `node` dev dependency), the only file in its directory: PATH for the darwin script.
const node26Dir = path.join(repoRoot, 'node_modules/node/bin');

/** The other platforms, each installed by krew told it runs there, into a krew root of its own. */
const otherRoots = new Map<string, { root: string; install: RunResult }>();
const rootOf = (os: string, arch: string): string => {
  const installed = otherRoots.get(`${os}_${arch}`);
  if (!installed) throw new Error(`no krew root for ${os}/${arch}`);
  return installed.root;
};
let qemu = '';

/** Runs linux/arm64's kubectl-usergroup from krew's bin (its link) on the emulated CPU. */
const underQemu = (root: string, args: readonly string[], env: NodeJS.ProcessEnv = userEnv(root)): Promise<RunResult> =>
  run(qemu, ['-L', ARM64_SYSROOT, path.join(root, 'bin/kubectl-usergroup'), ...args], env);

describe('krew installs the other platforms from the same manifest (KREW_OS, KREW_ARCH)', () => {
  beforeAll(async () => {
    qemu = execFileSync('/bin/sh', ['-c', 'command -v qemu-aarch64-static'], { encoding: 'utf8' }).trim();
    if (!fs.existsSync(path.join(ARM64_SYSROOT, 'lib/ld-linux-aarch64.so.1')))
      throw new Error(`${ARM64_SYSROOT} has no arm64 dynamic loader: apt-get install libc6-arm64-cross libstdc++6-arm64-cross libatomic1-arm64-cross`);
    for (const { platform, tarball } of release.platforms) {
      if (platform.os === 'linux' && platform.arch === 'amd64') continue;
      const root = fs.mkdtempSync(path.join(work, `krew-${platformKey(platform)}-`));
      const installEnv = { ...userEnv(root), KREW_OS: platform.os, KREW_ARCH: platform.arch };
      const result = await run('kubectl', ['krew', 'install', `--manifest=${release.manifest}`, `--archive=${tarball}`], installEnv);
      if (result.code !== 0) throw new Error(`KREW_OS=${platform.os} KREW_ARCH=${platform.arch} kubectl krew install exited ${result.code}: ${result.stderr}`);
      otherRoots.set(platformKey(platform), { root, install: result });
    }
  });

  it("krew picked each platform's entry (a wrong one fails its sha256 check), installed its files and printed the macOS caveat", () => {
    expect([...otherRoots.keys()]).toEqual(['linux_arm64', 'darwin_amd64', 'darwin_arm64']);
    for (const [key, { root, install: installed }] of otherRoots) {
      expect(installed.stderr).toContain('Installed plugin: usergroup\n');
      expect(installed.stderr).toContain('it needs Node.js 26 or newer');
      const store = path.join(root, 'store/usergroup', `v${release.version}`);
      expect(fs.readlinkSync(path.join(root, 'bin/kubectl-usergroup'))).toBe(path.join(store, 'kubectl-usergroup'));
      const files = key.startsWith('darwin')
        ? ['LICENSE', 'README', 'THIRD-PARTY-NOTICES', 'kubectl-usergroup', 'package.json']
        : ['LICENSE', 'THIRD-PARTY-NOTICES', 'kubectl-usergroup'];
      expect(fs.readdirSync(store).sort()).toEqual(files);
      expect(fs.statSync(path.join(store, 'kubectl-usergroup')).mode & 0o777).toBe(0o755);
      // Node itself ships (and its licence with it) only inside the Linux executables.
      const notices = fs.readFileSync(path.join(store, 'THIRD-PARTY-NOTICES'), 'utf8');
      expect(notices).toContain('@kubernetes/client-node');
      expect(notices.includes('Node.js v26')).toBe(key.startsWith('linux'));
    }
  });

  it('linux/arm64: an aarch64 ELF executable, which prints the usage on an emulated arm64 CPU with NODE_OPTIONS ignored', async () => {
    const root = rootOf('linux', 'arm64');
    const head = Buffer.alloc(20);
    const fd = fs.openSync(path.join(root, 'bin/kubectl-usergroup'), 'r');
    fs.readSync(fd, head, 0, 20, 0);
    fs.closeSync(fd);
    expect(head.subarray(0, 4)).toEqual(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
    expect(head.readUInt16LE(18)).toBe(0xb7); // e_machine EM_AARCH64
    const res = await underQemu(root, ['--help'], { ...userEnv(root), NODE_OPTIONS: `--require ${path.join(work, 'no-such-module.js')}` });
    expect(res).toMatchObject({ code: 0, stdout: usage, stderr: '' });
  });

  it("darwin: the script (the same file for both) prints the usage through krew's link with Node 26 on PATH, also under a package.json that says commonjs", async () => {
    const script = fs.readFileSync(path.join(rootOf('darwin', 'amd64'), 'bin/kubectl-usergroup'));
    expect(script.subarray(0, 20).toString()).toBe('#!/usr/bin/env node\n');
    expect(fs.readFileSync(path.join(rootOf('darwin', 'arm64'), 'bin/kubectl-usergroup'))).toEqual(script);
    for (const key of ['darwin_amd64', 'darwin_arm64']) {
      const root = otherRoots.get(key)?.root ?? '';
      const env = { ...userEnv(root), PATH: `${userEnv(root).PATH ?? ''}:${node26Dir}` };
      expect(await run('kubectl', ['usergroup', '--help'], env)).toMatchObject({ code: 0, stdout: usage, stderr: '' });
      // A package.json above krew's store (a home directory's, say) does not turn the ES module into CommonJS:
      // the one beside the script is nearer.
      fs.writeFileSync(path.join(root, 'package.json'), '{ "type": "commonjs" }\n');
      expect(await run('kubectl-usergroup', ['--help'], env)).toMatchObject({ code: 0, stdout: usage, stderr: '' });
    }
  });

  it('darwin: a Node older than 26 on PATH is named in one line, exit 1', async () => {
    const node24 = platformNode({ os: 'linux', arch: 'amd64' }, '24.9.0');
    const older = path.join(work, 'node24');
    fs.mkdirSync(older);
    fs.symlinkSync(node24.binary, path.join(older, 'node'));
    const root = rootOf('darwin', 'arm64');
    const res = await run('kubectl-usergroup', ['--help'], { ...userEnv(root), PATH: `${userEnv(root).PATH ?? ''}:${older}` });
    expect(res).toMatchObject({ code: 1, stdout: '' });
    expect(res.stderr).toBe(
      `kubectl-usergroup needs Node.js 26 or newer on PATH; this is v24.9.0 (${fs.realpathSync(node24.binary)}). See the README beside it.\n`,
    );
  });
});

describe('the single executable krew installed, with no Node on PATH', () => {
  let env: TestEnv;

  beforeAll(async () => {
    env = await TestEnv.create('kbinary');
    await env.startOperator();
    await env.createUserGroup('solo', { userGroupId: 'solo-1', name: 'Solo', tokenSecret: { name: 'solo-token' } });
    await env.waitForReady('solo');
  });

  afterAll(async () => {
    await ifAssigned(env)?.close();
  });

  it('PATH finds kubectl and kubectl-usergroup but no node, and the plugin is a native executable, not a script', async () => {
    const lookup = (name: string): Promise<CommandResult> => run('/bin/sh', ['-c', `command -v ${name}`]);
    const node = await lookup('node');
    expect(node.stdout).toBe('');
    expect(node.code).not.toBe(0); // 127 from dash, 1 from bash
    expect((await lookup('kubectl-usergroup')).stdout).toBe(`${path.join(krewRoot, 'bin/kubectl-usergroup')}\n`);
    expect((await lookup('kubectl')).stdout).toBe(`${path.join(bin, 'kubectl')}\n`);
    // ELF, so no `#!` line: the kernel runs it without any interpreter.
    const head = Buffer.alloc(4);
    const fd = fs.openSync(path.join(krewRoot, 'bin/kubectl-usergroup'), 'r');
    fs.readSync(fd, head, 0, 4, 0);
    fs.closeSync(fd);
    expect(head).toEqual(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  });

  it('--help prints the usage, and NODE_OPTIONS does not reach the embedded Node', async () => {
    const res = await run('kubectl-usergroup', ['--help'], { ...userEnv(), NODE_OPTIONS: `--require ${path.join(work, 'no-such-module.js')}` });
    expect(res).toMatchObject({ code: 0, stdout: usage, stderr: '' });
  });

  const statusRow = /^solo\s+solo-1\s+True\s+Synced\s+solo-token\s+/;

  it('kubectl-usergroup status, run directly: the table with the real group', async () => {
    const res = await run('kubectl-usergroup', ['status', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]);
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+USERGROUPID\s+READY\s+REASON\s+SECRET\s+LAST ROTATION\s+TOKEN AGE\s+NEXT ROTATION\s+AGE$/);
    expect(lines.slice(1)).toEqual([expect.stringMatching(statusRow)]);
  });

  it('kubectl usergroup status, rotate and sync: kubectl finds the file on PATH and runs it', async () => {
    const status = await run('kubectl', ['usergroup', 'status', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout.trimEnd().split('\n').slice(1)).toEqual([expect.stringMatching(statusRow)]);

    // rotate: a PATCH, then a watch until the controller reports the new token.
    const before = await env.secretToken('solo-token');
    const rotate = await run('kubectl', ['usergroup', 'rotate', 'solo', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]);
    expect(rotate.code, rotate.stderr).toBe(0);
    expect(rotate.stdout).toMatch(/^usergroup\/solo token rotated at \S+\n$/);
    const after = await env.secretToken('solo-token');
    expect(after).toBeTruthy();
    expect(after).not.toBe(before);

    // sync: the same PATCH-then-watch, answered by one PUT that keeps the token.
    const sync = await run('kubectl', ['usergroup', 'sync', 'solo', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]);
    expect(sync.code, sync.stderr).toBe(0);
    expect(sync.stdout).toMatch(/^usergroup\/solo synced at \S+: Ready=True Synced\n$/);
    expect(await env.secretToken('solo-token')).toBe(after);
  });

  it('the other platforms against the same cluster: status from linux/arm64 under qemu, and from the darwin script on Node 26', async () => {
    const args = ['status', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath];
    const arm64 = await underQemu(rootOf('linux', 'arm64'), args);
    expect(arm64.code, arm64.stderr).toBe(0);
    expect(arm64.stdout.trimEnd().split('\n').slice(1)).toEqual([expect.stringMatching(statusRow)]);
    const root = rootOf('darwin', 'arm64');
    const darwin = await run('kubectl', ['usergroup', ...args], { ...userEnv(root), PATH: `${userEnv(root).PATH ?? ''}:${node26Dir}` });
    expect(darwin.code, darwin.stderr).toBe(0);
    expect(darwin.stdout.trimEnd().split('\n').slice(1)).toEqual([expect.stringMatching(statusRow)]);
  });

  it('an exec credential plugin (client-node, bundled in the file) authenticates it', async () => {
    // The admin's client certificate, handed out by an exec plugin: the path kubeconfigs of EKS, GKE
    // and AKS take, where the plugin loads client-node; a shell script, as no Node is on PATH.
    const admin = parseYaml(fs.readFileSync(env.kubeconfigPath, 'utf8')) as AdminKubeconfig;
    const user = admin.users[0]?.user ?? {};
    const pem = (field: string): string => Buffer.from(user[field] ?? '', 'base64').toString('utf8');
    const credential = path.join(work, 'credential.json');
    fs.writeFileSync(
      credential,
      JSON.stringify({
        apiVersion: 'client.authentication.k8s.io/v1',
        kind: 'ExecCredential',
        status: { clientCertificateData: pem('client-certificate-data'), clientKeyData: pem('client-key-data') },
      }),
      { mode: 0o600 },
    );
    const script = path.join(work, 'credential.sh');
    fs.writeFileSync(script, `#!/bin/sh\nexec /bin/cat '${credential}'\n`, { mode: 0o700 });
    const config = {
      ...admin,
      users: [{ name: 'exec', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: script, interactiveMode: 'Never' } } }],
      contexts: admin.contexts.map((c) => ({ ...c, context: { ...c.context, user: 'exec', namespace: env.namespace } })),
    };
    const kubeconfig = path.join(work, 'exec.kubeconfig');
    fs.writeFileSync(kubeconfig, stringifyYaml(config), { mode: 0o600 });

    const res = await run('kubectl', ['usergroup', 'status'], { ...userEnv(), KUBECONFIG: kubeconfig });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.trimEnd().split('\n').slice(1)).toEqual([expect.stringMatching(statusRow)]);
  });
});

interface AdminKubeconfig {
  users: { name: string; user: Record<string, string> }[];
  contexts: { name: string; context: Record<string, unknown> }[];
}
