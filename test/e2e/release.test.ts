import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildGoTool } from '../../src/devtools/go-tool.js';
import { trustPlainHttpRegistry } from '../../src/devtools/node/containerd.js';
import { startRegistry, type Registry } from '../../src/devtools/registry.js';
import { pushRelease } from '../../src/devtools/release/push.js';
import type { ReleaseManifest } from '../../src/devtools/release/release.js';
import { referrersTag } from '../../src/devtools/release/sign.js';
import { startSimulator, type Simulator } from '../../src/devtools/sim/server.js';
import { getJson, helm, kubectl, podReady, pods, waitFor } from './support/cluster.js';
import { E2E_REGISTRY, readRelease, releaseDir } from './support/release.js';

// Issue 33: the release as users get it. `npm run test:e2e` made it (support/release-cli.ts, `npm run release` with a
// key made for the run) for an OCI registry (go-containerregistry's, `crane registry serve`) that this file starts on the node's address. It is pushed
// there as `npm run release:push` pushes (crane, helm), its signatures are verified from the registry by cosign, a
// tampered image is refused, the chart is installed from oci:// and the kubelet pulls the image from the registry (no
// `ctr import`), and the arm64 image starts under qemu.

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
const tools = { crane: '', cosign: '' };

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

const cosignVerify = (ref: string): Promise<{ code: number; out: string }> =>
  tool(tools.cosign, ['verify', '--key', path.join(dir, 'cosign.pub'), '--allow-http-registry', '--insecure-ignore-tlog', ref]);

describe('the release, from a registry', () => {
  beforeAll(async () => {
    dir = releaseDir();
    manifest = readRelease(dir);
    tools.crane = buildGoTool('crane', 'devtools/crane/build.sh');
    tools.cosign = buildGoTool('cosign', 'devtools/cosign/build.sh');
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
    const pushed = await pushRelease({ tools: { crane: tools.crane, helm: path.join(inject('binDir'), 'helm') }, dir, manifest, plainHttp: true });
    expect(pushed.image).toBe(`${host}/usergroup-operator@${manifest.image.digest}`);
    expect(pushed.chart).toBe(`${host}/charts/usergroup-operator@${manifest.chart.digest ?? 'unsigned'}`);
    const index = JSON.parse((await tool(tools.crane, ['manifest', '--insecure', `${host}/usergroup-operator:${manifest.version}`])).out) as {
      mediaType: string;
      manifests: { platform: { os: string; architecture: string } }[];
    };
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`)).toEqual(['linux/amd64', 'linux/arm64']);
  });

  it('cosign verifies the image and the chart from the registry with the release key, and SHA256SUMS with its bundle', async () => {
    const image = await cosignVerify(`${host}/usergroup-operator:${manifest.version}`);
    process.stderr.write(`[release] cosign verify ${host}/usergroup-operator:${manifest.version} → exit ${image.code}\n${image.out}\n`);
    expect(image.code).toBe(0);
    expect(image.out).toContain(`"docker-manifest-digest":"${manifest.image.digest}"`);
    const chart = await cosignVerify(`${host}/charts/usergroup-operator:${manifest.version}`);
    expect(chart.code).toBe(0);
    expect(chart.out).toContain(`"docker-manifest-digest":"${manifest.chart.digest ?? ''}"`);
    const sums = await tool(tools.cosign, [
      'verify-blob',
      '--key',
      path.join(dir, 'cosign.pub'),
      '--bundle',
      path.join(dir, 'SHA256SUMS.sigstore.json'),
      '--insecure-ignore-tlog',
      path.join(dir, 'SHA256SUMS'),
    ]);
    expect(sums).toMatchObject({ code: 0 });
    const check = await exec('sha256sum', ['-c', 'SHA256SUMS'], { cwd: dir });
    expect(
      check.stdout
        .trim()
        .split('\n')
        .every((l) => l.endsWith(': OK')),
    ).toBe(true);
    // The private key signed; only the public one is published.
    const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    expect(files.filter((e) => fs.readFileSync(path.join(e.parentPath, e.name)).includes('PRIVATE KEY')).map((e) => e.name)).toEqual([]);
  });

  it('refuses a tampered image: one changed label, even with the genuine signature copied beside it', async () => {
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

    const unsigned = await cosignVerify(`${host}/usergroup-operator:${manifest.version}-tampered`);
    process.stderr.write(`[release] cosign verify of the tampered image (no signature of its own) → exit ${unsigned.code}\n${unsigned.out}\n`);
    expect(unsigned.code).not.toBe(0);
    expect(unsigned.out).toMatch(/no signatures found|no matching signatures/i);

    // The attacker copies the release's signature to where cosign looks for the tampered digest's.
    const copied = await tool(tools.crane, [
      'copy',
      '--insecure',
      `${host}/usergroup-operator:${referrersTag(manifest.image.digest)}`,
      `${host}/usergroup-operator:${referrersTag(tampered)}`,
    ]);
    expect(copied.code).toBe(0);
    const forged = await cosignVerify(`${host}/usergroup-operator@${tampered}`);
    process.stderr.write(`[release] cosign verify of the tampered image with the genuine signature copied to it → exit ${forged.code}\n${forged.out}\n`);
    expect(forged.code).not.toBe(0);
    expect(forged.out).not.toContain('The signatures were verified against the specified public key');
  });

  it('installs the chart from oci:// and the kubelet pulls the image from the registry', async () => {
    await kubectl(['create', 'namespace', SYSTEM]);
    await kubectl(['label', 'namespace', SYSTEM, 'pod-security.kubernetes.io/enforce=restricted']);
    await kubectl(['create', 'namespace', TENANT]);
    await helm([
      'install',
      RELEASE,
      `oci://${host}/charts/usergroup-operator`,
      '--version',
      manifest.version,
      '--plain-http',
      '--namespace',
      SYSTEM,
      '--set',
      `image.repository=${host}/usergroup-operator,replicaCount=1`,
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
    expect(pulls).toContainEqual(`Pulling: Pulling image "${host}/usergroup-operator:${manifest.version}"`);
    expect(pulls.some((p) => p.startsWith(`Pulled: Successfully pulled image "${host}/usergroup-operator:${manifest.version}"`))).toBe(true);
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
