import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildGoTool } from '../../devtools/go-tool.js';
import { trustPlainHttpRegistry } from '../../devtools/node/containerd.js';
import { startRegistry, type Registry } from '../../devtools/registry.js';
import { pushRelease } from '../../devtools/release/push.js';
import { helmPush } from '../../devtools/release/run.js';
import type { ReleaseManifest } from '../../devtools/release/release.js';
import { checksummedFiles, SUMS_FILE, SUMS_SIGNATURE_FILE } from '../../devtools/release/assets.js';
import { legacySignatureTag, referrersTag } from '../../devtools/release/sign.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import { getJson, helm, kubectl, podReady, pods, waitFor } from './support/cluster.js';
import { workflowUploads } from '../support/release-workflow.js';
import { E2E_REGISTRY, readRelease, releaseDir } from './support/release.js';

// Issue 33: the release as users get it. `npm run test:e2e` made it (support/release-cli.ts, `npm run release` with a
// key made for the run) for an OCI registry (go-containerregistry's, `crane registry serve`) that this file starts on the node's address. It is pushed
// there as `npm run release:push` pushes (crane, helm), its signatures (both formats) are verified from the registry
// by cosign 3 and cosign 2, and SHA256SUMS on a flat download as the workflow uploads it; a tampered image, chart,
// SHA256SUMS or plugin tarball is refused; the chart is installed from oci:// pinned by digest with image.digest, the
// kubelet pulls the image from the registry (no `ctr import`), and the arm64 image starts under qemu.

const RELEASE = 'ugr';
const SYSTEM = 'usergroup-release';
const TENANT = 'release-tenant';
const API_KEY = 'e2e-release-key';
const SELECTOR = `app.kubernetes.io/instance=${RELEASE}`;
const exec = promisify(execFile);

let registry: Registry;
let sim: Simulator;
let dir: string;
let manifest: ReleaseManifest;
let host: string;
const tools = { crane: '', cosign: '', cosign2: '', helm: '' };
/** The GitHub release's files as a user downloads them: the workflow's uploads, copied into one flat directory. */
let download: string;

/** Runs a tool; resolves with its exit code and both outputs, so a refusal can be asserted as well as a success. */
async function tool(cmd: string, args: readonly string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await exec(cmd, args, { maxBuffer: 64 << 20, timeout: 300_000 });
    return { code: 0, out: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, out: (e.stdout ?? '') + (e.stderr ?? '') };
  }
}

type Cosign = 'cosign' | 'cosign2';
/** An empty Sigstore trusted root (`cosign trusted-root create`): with a key, all cosign 2.6.3+ needs offline to read a bundle. */
let emptyTrustedRoot: string;
/** `cosign verify` with the release key, as the README runs it. */
const cosignVerify = (cosign: Cosign, ref: string, extra: readonly string[] = []): Promise<{ code: number; out: string }> =>
  tool(tools[cosign], ['verify', '--key', path.join(dir, 'cosign.pub'), '--allow-http-registry', '--insecure-ignore-tlog', ...extra, ref]);
/**
 * The readers of the signatures: cosign 3 finds the Sigstore bundle (or, told --new-bundle-format=false, reads the
 * legacy .sig tag); cosign 2.6.3 and newer read the bundle too when there is one, and then want a trusted root.
 */
const VERIFIERS: readonly { readonly name: string; readonly cosign: Cosign; readonly extra: () => readonly string[] }[] = [
  { name: 'cosign 3 (Sigstore bundle)', cosign: 'cosign', extra: () => [] },
  { name: 'cosign 3 --new-bundle-format=false (legacy .sig)', cosign: 'cosign', extra: () => ['--new-bundle-format=false'] },
  { name: 'cosign 2 --trusted-root (Sigstore bundle)', cosign: 'cosign2', extra: () => ['--trusted-root', emptyTrustedRoot] },
];
const verifyBlob = (cosign: Cosign, sums: string): Promise<{ code: number; out: string }> =>
  tool(tools[cosign], [
    'verify-blob',
    '--key',
    path.join(dir, 'cosign.pub'),
    '--bundle',
    path.join(download, SUMS_SIGNATURE_FILE),
    '--insecure-ignore-tlog',
    sums,
  ]);

/**
 * A tampered artifact under `tag` (digest `tampered`) is refused by every verifier: first with no signature of its own,
 * then with both of the genuine artifact's signatures copied to where cosign looks for the tampered digest's.
 */
async function expectRefused(what: string, repository: string, tag: string, tampered: string, genuine: string): Promise<void> {
  for (const { name, cosign, extra } of VERIFIERS) {
    const unsigned = await cosignVerify(cosign, `${host}/${repository}:${tag}`, extra());
    process.stderr.write(`[release] ${name}: verify of the tampered ${what} (no signature of its own) → exit ${unsigned.code}: ${lastLine(unsigned.out)}\n`);
    expect(unsigned.code).not.toBe(0);
    expect(unsigned.out).toMatch(/no signatures found|no matching signatures/i);
  }
  for (const tagOf of [referrersTag, legacySignatureTag]) {
    const copied = await tool(tools.crane, ['copy', '--insecure', `${host}/${repository}:${tagOf(genuine)}`, `${host}/${repository}:${tagOf(tampered)}`]);
    expect(copied.code, copied.out).toBe(0);
  }
  for (const { name, cosign, extra } of VERIFIERS) {
    const forged = await cosignVerify(cosign, `${host}/${repository}@${tampered}`, extra());
    process.stderr.write(
      `[release] ${name}: verify of the tampered ${what} with the genuine signatures copied to it → exit ${forged.code}: ${lastLine(forged.out)}\n`,
    );
    expect(forged.code).not.toBe(0);
    expect(forged.out).not.toContain('The signatures were verified against the specified public key');
  }
}

const lastLine = (out: string): string => out.trim().split('\n').at(-1) ?? '';

describe('the release, from a registry', () => {
  beforeAll(async () => {
    dir = releaseDir();
    manifest = readRelease(dir);
    tools.crane = buildGoTool('crane', 'devtools/crane/build.sh');
    tools.cosign = buildGoTool('cosign', 'devtools/cosign/build.sh');
    tools.cosign2 = buildGoTool('cosign2', 'devtools/cosign2/build.sh');
    tools.helm = path.join(inject('binDir'), 'helm');
    const versionOf = async (cosign: string): Promise<string> => /GitVersion:\s*(\S+)/.exec((await tool(cosign, ['version'])).out)?.[1] ?? '?';
    process.stderr.write(`[release] verifiers: cosign ${await versionOf(tools.cosign)} and ${await versionOf(tools.cosign2)}\n`);
    emptyTrustedRoot = path.join(inject('nodeRoot'), 'empty-trusted-root.json');
    expect((await tool(tools.cosign2, ['trusted-root', 'create', '--out', emptyTrustedRoot])).code).toBe(0);
    download = fs.mkdtempSync(path.join(inject('nodeRoot'), 'release-download-'));
    for (const file of workflowUploads(dir)) fs.copyFileSync(path.join(dir, file), path.join(download, file));
    registry = await startRegistry({
      crane: tools.crane,
      dir: path.join(inject('nodeRoot'), 'registry'),
      address: inject('nodeAddress'),
      port: E2E_REGISTRY.port,
    });
    host = registry.host;
    expect(manifest.image.repository).toBe(`${host}/usergroup-operator`);
    trustPlainHttpRegistry({ root: inject('nodeRoot') }, host);
    sim = await startSimulator({ host: inject('nodeAddress'), port: 0, apiKeys: [API_KEY] });
  });

  afterAll(async () => {
    await helm(['uninstall', RELEASE, '--namespace', SYSTEM, '--wait']).catch(() => undefined);
    await sim.stop();
    await registry.stop();
  });

  it('pushes the image index, the chart and their signatures with the digests the release signed', async () => {
    const pushed = await pushRelease({ tools: { crane: tools.crane, helm: tools.helm }, dir, manifest, plainHttp: true });
    expect(pushed.image).toBe(`${host}/usergroup-operator@${manifest.image.digest}`);
    expect(pushed.chart).toBe(`${host}/charts/usergroup-operator@${manifest.chart.digest}`);
    // Both signature formats beside each artifact: the bundle's referrers index and the legacy .sig tag.
    for (const [repository, digest] of [
      ['usergroup-operator', manifest.image.digest],
      ['charts/usergroup-operator', manifest.chart.digest],
    ] as const) {
      const tags = (await tool(tools.crane, ['ls', '--insecure', `${host}/${repository}`])).out.split('\n');
      expect(tags).toEqual(expect.arrayContaining([manifest.version, referrersTag(digest), legacySignatureTag(digest)]));
    }
    const index = JSON.parse((await tool(tools.crane, ['manifest', '--insecure', `${host}/usergroup-operator:${manifest.version}`])).out) as {
      mediaType: string;
      manifests: { platform: { os: string; architecture: string } }[];
    };
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`)).toEqual(['linux/amd64', 'linux/arm64']);
  });

  it.each(VERIFIERS)('$name verifies the image and the chart from the registry by digest and by tag', async ({ name, cosign, extra }) => {
    for (const [repository, digest] of [
      ['usergroup-operator', manifest.image.digest],
      ['charts/usergroup-operator', manifest.chart.digest],
    ] as const) {
      for (const ref of [`${host}/${repository}@${digest}`, `${host}/${repository}:${manifest.version}`]) {
        const verified = await cosignVerify(cosign, ref, extra());
        process.stderr.write(`[release] ${name}: verify ${ref} → exit ${verified.code}\n`);
        expect(verified.code, verified.out).toBe(0);
        expect(verified.out).toContain(`"docker-manifest-digest":"${digest}"`);
      }
    }
  });

  it('cosign 2 verifies the legacy .sig signatures (what cosign up to 2.6.2 and Kyverno read) where they are the only ones', async () => {
    // A copy of each artifact with only its .sig tag beside it, so cosign 2 cannot take the bundle instead.
    for (const [repository, digest] of [
      ['usergroup-operator', manifest.image.digest],
      ['charts/usergroup-operator', manifest.chart.digest],
    ] as const) {
      for (const [from, to] of [
        [`@${digest}`, `:${manifest.version}`],
        [`:${legacySignatureTag(digest)}`, `:${legacySignatureTag(digest)}`],
      ]) {
        const copied = await tool(tools.crane, ['copy', '--insecure', `${host}/${repository}${from}`, `${host}/legacy-only/${repository}${to}`]);
        expect(copied.code, copied.out).toBe(0);
      }
      const verified = await cosignVerify('cosign2', `${host}/legacy-only/${repository}@${digest}`);
      process.stderr.write(`[release] cosign 2: verify of the legacy-only copy of ${repository} → exit ${verified.code}\n`);
      expect(verified.code, verified.out).toBe(0);
      // The legacy payload names the repository the release was made for (--sign-container-identity), not the copy.
      expect(verified.out).toContain(`"docker-reference":"${host}/${repository}"`);
      expect(verified.out).toContain(`"docker-manifest-digest":"${digest}"`);
    }
  });

  it('a flat download of what the workflow uploads: SHA256SUMS verifies with cosign 3 and cosign 2, then `sha256sum -c` passes', async () => {
    // Everything the release wrote outside oci/ is uploaded but the public key (published apart from the release it verifies).
    const written = fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile() && e.name !== 'cosign.pub')
      .map((e) => e.name)
      .sort();
    expect(workflowUploads(dir)).toEqual(written);
    expect(written).toEqual([...checksummedFiles(manifest), SUMS_FILE, SUMS_SIGNATURE_FILE].sort());
    for (const cosign of ['cosign', 'cosign2'] as const) {
      const verified = await verifyBlob(cosign, path.join(download, SUMS_FILE));
      process.stderr.write(`[release] ${cosign} verify-blob SHA256SUMS → exit ${verified.code}: ${verified.out.trim()}\n`);
      expect(verified.code, verified.out).toBe(0);
    }
    const check = await exec('sha256sum', ['-c', SUMS_FILE], { cwd: download });
    process.stderr.write(`[release] sha256sum -c ${SUMS_FILE} in the flat download:\n${check.stdout}`);
    expect(check.stdout.trim().split('\n')).toEqual(checksummedFiles(manifest).map((f) => `${f}: OK`));
    // The private key signed; only the public one is published.
    const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    expect(files.filter((e) => fs.readFileSync(path.join(e.parentPath, e.name)).includes('PRIVATE KEY')).map((e) => e.name)).toEqual([]);
  });

  it('refuses a tampered SHA256SUMS (one byte changed: both verify-blobs) and a tampered plugin tarball (sha256sum -c)', async () => {
    const tamperedDir = fs.mkdtempSync(path.join(inject('nodeRoot'), 'release-tampered-'));
    for (const file of fs.readdirSync(download)) fs.copyFileSync(path.join(download, file), path.join(tamperedDir, file));
    const sums = fs.readFileSync(path.join(tamperedDir, SUMS_FILE));
    sums[10] = sums[10] === 0x30 ? 0x31 : 0x30; // a hex digit of the first checksum
    fs.writeFileSync(path.join(tamperedDir, SUMS_FILE), sums);
    for (const cosign of ['cosign', 'cosign2'] as const) {
      const refused = await verifyBlob(cosign, path.join(tamperedDir, SUMS_FILE));
      process.stderr.write(
        `[release] ${cosign} verify-blob of SHA256SUMS with one byte changed → exit ${refused.code}: ${refused.out.trim().split('\n').at(-1) ?? ''}\n`,
      );
      expect(refused.code).not.toBe(0);
      expect(refused.out).not.toMatch(/Verified OK/);
    }

    fs.copyFileSync(path.join(download, SUMS_FILE), path.join(tamperedDir, SUMS_FILE));
    const plugin = manifest.plugin.platforms.find((p) => p.platform === 'linux/amd64')?.file ?? '';
    const tarball = fs.readFileSync(path.join(tamperedDir, plugin));
    tarball[tarball.length - 1] = tarball[tarball.length - 1]! ^ 0xff;
    fs.writeFileSync(path.join(tamperedDir, plugin), tarball);
    const refused = spawnSync('sha256sum', ['-c', SUMS_FILE], { cwd: tamperedDir, encoding: 'utf8' });
    process.stderr.write(`[release] sha256sum -c with ${plugin} changed → exit ${String(refused.status)}\n`);
    expect(refused.status).toBe(1);
    expect(refused.stdout).toContain(`${plugin}: FAILED\n`);
    expect(refused.stdout.split('\n').filter((l) => l.endsWith(': OK'))).toHaveLength(checksummedFiles(manifest).length - 1);
  });

  it('refuses a tampered image: one changed label, even with both genuine signatures copied beside it', async () => {
    const amd64 = manifest.image.platforms.find((p) => p.platform === 'linux/amd64')?.digest ?? '';
    const mutated = await tool(tools.crane, [
      'mutate',
      '--insecure',
      `${host}/usergroup-operator@${amd64}`,
      '--label',
      'org.example.tampered=true',
      '--tag',
      `${host}/usergroup-operator:${manifest.version}-tampered`,
    ]);
    expect(mutated.code).toBe(0);
    const tampered = /sha256:[a-f0-9]{64}/.exec(mutated.out.trim().split('\n').at(-1) ?? '')?.[0] ?? '';
    expect(tampered).not.toBe('');
    expect(tampered).not.toBe(amd64);
    await expectRefused('image', 'usergroup-operator', `${manifest.version}-tampered`, tampered, manifest.image.digest);
  });

  it('refuses a tampered chart: a different chart pushed under the release tag, even with both genuine signatures copied beside it', async () => {
    const work = fs.mkdtempSync(path.join(inject('nodeRoot'), 'chart-tampered-'));
    await exec('tar', ['-xzf', path.join(dir, manifest.chart.file), '-C', work]);
    const chartYaml = path.join(work, 'usergroup-operator/Chart.yaml');
    fs.writeFileSync(chartYaml, fs.readFileSync(chartYaml, 'utf8').replace(/^description: .*$/m, 'description: not the release'));
    await exec(tools.helm, ['package', path.join(work, 'usergroup-operator'), '--destination', path.join(work, 'out')]);
    const tgz = path.join(work, 'out', manifest.chart.file);
    const tampered = await helmPush(tools.helm, tgz, `${host}/charts/usergroup-operator`, true);
    expect(tampered).not.toBe(manifest.chart.digest);
    expect((await tool(tools.crane, ['digest', '--insecure', `${host}/charts/usergroup-operator:${manifest.version}`])).out.trim()).toBe(tampered);
    try {
      await expectRefused('chart', 'charts/usergroup-operator', manifest.version, tampered, manifest.chart.digest);
    } finally {
      // The release's chart back under its tag, as a user would republish it (the same .tgz, the same digest).
      expect(await helmPush(tools.helm, path.join(dir, manifest.chart.file), `${host}/charts/usergroup-operator`, true)).toBe(manifest.chart.digest);
    }
  });

  it('installs the chart from oci:// pinned by digest, and the kubelet pulls the image by digest from the registry', async () => {
    await kubectl(['create', 'namespace', SYSTEM]);
    await kubectl(['label', 'namespace', SYSTEM, 'pod-security.kubernetes.io/enforce=restricted']);
    await kubectl(['create', 'namespace', TENANT]);
    await helm([
      'install',
      RELEASE,
      // As the README installs a verified release: the chart and the image by the digests cosign verified.
      `oci://${host}/charts/usergroup-operator@${manifest.chart.digest}`,
      '--plain-http',
      '--namespace',
      SYSTEM,
      '--set',
      `image.repository=${host}/usergroup-operator,image.digest=${manifest.image.digest},replicaCount=1`,
      '--set',
      `watchNamespaces={${TENANT}}`,
      '--set',
      `connection.url=${sim.url},connection.allowInsecure=true,connection.apiKey.value=${API_KEY}`,
    ]);
    const [pod] = await waitFor(
      'the chart Pod Running and Ready',
      async () => {
        const list = await pods(SYSTEM, SELECTOR);
        return list.length === 1 && list.every((p) => p.status.phase === 'Running' && podReady(p)) ? list : undefined;
      },
      240_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await kubectl(['-n', SYSTEM, 'get', 'events']).catch(String)}`);
    });
    const name = pod!.metadata.name;
    const events = await getJson<{ items: { reason: string; message: string }[] }>([
      '-n',
      SYSTEM,
      'get',
      'events',
      '--field-selector',
      `involvedObject.name=${name}`,
    ]);
    const pulls = events.items.filter((e) => e.reason === 'Pulling' || e.reason === 'Pulled').map((e) => `${e.reason}: ${e.message}`);
    process.stderr.write(`[release] kubelet events of ${name}:\n  ${pulls.join('\n  ')}\n`);
    const pinned = `${host}/usergroup-operator@${manifest.image.digest}`;
    expect(pulls).toContainEqual(`Pulling: Pulling image "${pinned}"`);
    expect(pulls.some((p) => p.startsWith(`Pulled: Successfully pulled image "${pinned}"`))).toBe(true);
    const status = await getJson<{ status: { containerStatuses: { imageID: string }[] } }>(['-n', SYSTEM, 'get', 'pod', name]);
    expect(status.status.containerStatuses[0]?.imageID).toBe(`${host}/usergroup-operator@${manifest.image.digest}`);

    // The pulled image does the job: a UserGroup synced through it.
    await kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'usergroup.dev/v1',
        kind: 'UserGroup',
        metadata: { name: 'initech', namespace: TENANT },
        spec: { userGroupId: `${TENANT}.initech`, name: 'Initech' },
      }),
    );
    await waitFor(
      'UserGroup initech Ready',
      async () => {
        const ug = await getJson<{ status?: { conditions?: { type: string; status: string }[] } }>(['-n', TENANT, 'get', 'usergroup', 'initech']);
        return ug.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? true : undefined;
      },
      90_000,
    );
    expect(sim.groups(API_KEY).map((g) => g.userGroupId)).toEqual([`${TENANT}.initech`]);
  });

  it('starts the arm64 image under emulation (qemu-user-static): `usergroup-operator version`', async () => {
    const rootfs = path.join(inject('nodeRoot'), 'arm64-rootfs');
    fs.mkdirSync(rootfs, { recursive: true });
    const exported = path.join(inject('nodeRoot'), 'arm64.tar');
    const exportRun = await tool(tools.crane, [
      'export',
      '--insecure',
      '--platform',
      'linux/arm64',
      `${host}/usergroup-operator:${manifest.version}`,
      exported,
    ]);
    expect(exportRun.code).toBe(0);
    await exec('tar', ['-xf', exported, '-C', rootfs]);
    const node = path.join(rootfs, 'nodejs/bin/node');
    // ELF e_machine 0xB7: the binary really is aarch64, so it cannot have run natively here.
    expect(fs.readFileSync(node).readUInt16LE(18)).toBe(0xb7);
    const { stdout } = await exec('qemu-aarch64-static', ['-L', rootfs, node, 'dist/cli/main.js', 'version'], {
      cwd: path.join(rootfs, 'app'),
      timeout: 120_000,
    });
    process.stderr.write(`[release] qemu-aarch64-static … usergroup-operator version → ${stdout.trim()}\n`);
    expect(stdout).toContain(manifest.version);
  });
});
