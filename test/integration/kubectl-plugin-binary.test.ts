import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { usage } from '../../src/cli/kubectl/usage.js';
import { repoRoot } from '../../src/devtools/controlplane/binaries.js';
import { buildPluginRelease, KREW_TEMPLATE, TARBALL, type PluginRelease } from '../../src/devtools/kubectl-plugin/release.js';
import type { CommandResult } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * The plugin as kubectl users install it: the one file from the release tarball (what krew unpacks),
 * run with a PATH that holds that file and kubectl and nothing else, so no Node can be found, and an
 * environment without NODE_OPTIONS or anything else of this test's.
 */
let release: PluginRelease;
let work = '';
let bin = ''; // the whole PATH
const tarballFiles: string[] = [];

beforeAll(async () => {
  // The same build as `npm run build:plugin`: ~10 s when the sources changed, under a second when not.
  release = await buildPluginRelease();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-plugin-binary-'));
  const unpacked = path.join(work, 'unpacked');
  bin = path.join(work, 'bin');
  fs.mkdirSync(unpacked);
  fs.mkdirSync(bin);
  tarballFiles.push(...execFileSync('tar', ['-tzf', release.tarball], { encoding: 'utf8' }).trim().split('\n'));
  execFileSync('tar', ['-xzf', release.tarball, '-C', unpacked]);
  // krew links the manifest's `bin` into ~/.krew/bin the same way.
  fs.symlinkSync(path.join(unpacked, 'kubectl-usergroup'), path.join(bin, 'kubectl-usergroup'));
  fs.symlinkSync(path.join(inject('binDir'), 'kubectl'), path.join(bin, 'kubectl'));
});

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** Only PATH and HOME: KUBECONFIG points nowhere, so the cluster is reached only through --kubeconfig. */
function bareEnv(): NodeJS.ProcessEnv {
  return { PATH: bin, HOME: work, KUBECONFIG: path.join(work, 'no-such-kubeconfig') };
}

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv = bareEnv()): Promise<CommandResult & { ms: number }> {
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

describe('the release: tarball and krew manifest', () => {
  it('the tarball holds the executable, LICENSE and THIRD-PARTY-NOTICES; its sha256 file agrees', () => {
    expect(tarballFiles).toEqual(['kubectl-usergroup', 'LICENSE', 'THIRD-PARTY-NOTICES']);
    expect(fs.readFileSync(path.join(work, 'unpacked/LICENSE'), 'utf8')).toBe(fs.readFileSync(path.join(repoRoot, 'LICENSE'), 'utf8'));
    const notices = fs.readFileSync(path.join(work, 'unpacked/THIRD-PARTY-NOTICES'), 'utf8');
    for (const name of ['Node.js v26', '@kubernetes/client-node', 'yaml']) expect(notices).toContain(name);
    expect(fs.statSync(path.join(work, 'unpacked/kubectl-usergroup')).mode & 0o777).toBe(0o755);
    expect(fs.readFileSync(`${release.tarball}.sha256`, 'utf8')).toBe(`${release.sha256}  ${TARBALL}\n`);
    expect(sha256(fs.readFileSync(release.tarball))).toBe(release.sha256);
  });

  it('the krew manifest has the fields krew validates, the version of package.json and the sha256 of the built tarball', () => {
    const version = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
    const manifest = parseYaml(fs.readFileSync(release.manifest, 'utf8')) as KrewPlugin;
    expect(manifest.apiVersion).toBe('krew.googlecontainertools.github.com/v1alpha2');
    expect(manifest.kind).toBe('Plugin');
    // krew installs plugin <name> as kubectl-<name>: `kubectl usergroup`.
    expect(manifest.metadata.name).toBe('usergroup');
    expect(manifest.spec.version).toBe(`v${version}`);
    expect(manifest.spec.homepage).toMatch(/^https:\/\//);
    expect(manifest.spec.shortDescription).toMatch(/^[^\r\n]{10,60}$/);
    expect(manifest.spec.description).toContain('kubectl usergroup status');
    expect(manifest.spec.platforms).toHaveLength(1);
    const [platform] = manifest.spec.platforms;
    expect(platform?.selector).toEqual({ matchLabels: { os: 'linux', arch: 'amd64' } });
    expect(platform?.uri).toMatch(new RegExp(`^https://\\S+/v${version.replaceAll('.', '\\.')}/${TARBALL}$`));
    expect(platform?.sha256).toBe(release.sha256);
    expect(platform?.bin).toBe('kubectl-usergroup');
    expect(tarballFiles).toContain(platform?.bin);
    // The template in the repository is the same manifest with the two placeholders.
    const template = fs.readFileSync(path.join(repoRoot, KREW_TEMPLATE), 'utf8');
    expect([...template.matchAll(/\{\{(\w+)\}\}/g)].map((m) => m[1]).sort()).toEqual(['sha256', 'version', 'version']);
  });
});

interface KrewPlugin {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    version: string;
    homepage: string;
    shortDescription: string;
    description: string;
    platforms: { selector: unknown; uri: string; sha256: string; bin: string }[];
  };
}

describe('the single executable, with no Node on PATH', () => {
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
    expect((await lookup('kubectl-usergroup')).stdout).toBe(`${path.join(bin, 'kubectl-usergroup')}\n`);
    expect((await lookup('kubectl')).stdout).toBe(`${path.join(bin, 'kubectl')}\n`);
    // ELF, so no `#!` line: the kernel runs it without any interpreter.
    const head = Buffer.alloc(4);
    const fd = fs.openSync(path.join(bin, 'kubectl-usergroup'), 'r');
    fs.readSync(fd, head, 0, 4, 0);
    fs.closeSync(fd);
    expect(head).toEqual(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  });

  it('--help prints the usage, and NODE_OPTIONS does not reach the embedded Node', async () => {
    const res = await run('kubectl-usergroup', ['--help'], { ...bareEnv(), NODE_OPTIONS: `--require ${path.join(work, 'no-such-module.js')}` });
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

  it('kubectl usergroup status and rotate: kubectl finds the file on PATH and runs it', async () => {
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

    const res = await run('kubectl', ['usergroup', 'status'], { ...bareEnv(), KUBECONFIG: kubeconfig });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.trimEnd().split('\n').slice(1)).toEqual([expect.stringMatching(statusRow)]);
  });
});

interface AdminKubeconfig {
  users: { name: string; user: Record<string, string> }[];
  contexts: { name: string; context: Record<string, unknown> }[];
}
