// The CRDs as templates of the chart (crds.enabled, crds.keep), with the real helm on a private control plane: CRDs
// are cluster-wide, and these cases create, take over, change and leave them behind, which the shared control
// plane's other files must not see. Each case runs the commands docs/operations.md ("CRDs managed by Helm") gives,
// and pins the message of the command that does not work, so that the docs change when Helm does.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { extractPreviousRelease } from '../e2e/support/previous-release.js';
import { eventually, run, type CommandResult } from '../support/kube.js';
import { CHART_DIR, CRDS_DIR, crdFiles } from '../../devtools/manifests.js';
import { PREVIOUS_RELEASE } from '../support/previous-release.js';
import { ifAssigned } from '../support/teardown.js';

const RELEASE = 'ugo';
const NS = 'ugo-system';
const TEAM = 'team-a';
/** A shared connection: a usergroup.dev/v1 ClusterUserGroupService among the templates, which Helm must map before it applies anything. */
const CONNECTION = ['--set', 'connection.url=https://analytics.example.com', '--set', 'connection.apiKey.value=not-a-real-key'];
const ENABLED = ['--set', 'crds.enabled=true'];
const CRD_NAMES = crdFiles().map((f) => (parseYaml(fs.readFileSync(path.join(CRDS_DIR, f), 'utf8')) as { metadata: { name: string } }).metadata.name);
const USERGROUPS_CRD = 'usergroups.usergroup.dev';
const CHART_LABEL = `usergroup-operator-${(parseYaml(fs.readFileSync(path.join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { version: string }).version}`;
const PROBE_COLUMN = { name: 'Probe', type: 'string', jsonPath: '.spec.name' };

interface Crd {
  metadata: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    managedFields?: { manager: string; operation: string }[];
  };
  spec: { versions: { name: string; additionalPrinterColumns?: { name: string }[] }[] };
}

describe('crds.enabled: the CRDs as templates of the release, upgraded by helm upgrade and kept on uninstall', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  let work: string;
  /** This chart with one more printer column on the UserGroup CRD: a release whose CRDs changed. */
  let changedChart: string;

  beforeAll(async () => {
    const started = Date.now();
    cp = await ControlPlane.start();
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-chart-crds-'));
    changedChart = path.join(work, 'changed');
    fs.cpSync(CHART_DIR, changedChart, { recursive: true });
    const file = path.join(changedChart, 'crds/usergroup.dev_usergroups.yaml');
    const crd = parseYaml(fs.readFileSync(file, 'utf8')) as Crd;
    crd.spec.versions = crd.spec.versions.map((v) => ({ ...v, additionalPrinterColumns: [...(v.additionalPrinterColumns ?? []), PROBE_COLUMN] }));
    fs.writeFileSync(file, JSON.stringify(crd));
    await ok(kubectl(['create', 'namespace', NS]));
    await ok(kubectl(['create', 'namespace', TEAM]));
    process.stderr.write(`[chart-crds] control plane started in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  });
  afterAll(async () => {
    await ifAssigned(cp)?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  const kubectl = (args: readonly string[], input?: string): Promise<CommandResult> =>
    run(cp.binaries.kubectl, ['--kubeconfig', cp.kubeconfigPath, ...args], input === undefined ? {} : { input });
  /**
   * The CRDs deleted and gone. Each is Established first: a CRD deleted before the apiserver accepted its names
   * (Helm's crds/ applied a moment before, on a loaded machine) stayed Terminating for minutes, once holding up
   * every case after it. The wait is generous, and how long it took is printed.
   */
  const deleteCrds = async (...flags: string[]): Promise<void> => {
    const started = Date.now();
    const present = (await ok(kubectl(['get', 'crd', '-o', 'name']))).stdout
      .split('\n')
      .filter((line) => CRD_NAMES.some((name) => line === `customresourcedefinition.apiextensions.k8s.io/${name}`));
    if (present.length > 0) await ok(kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...present]));
    const res = await run(cp.binaries.kubectl, ['--kubeconfig', cp.kubeconfigPath, 'delete', 'crd', ...CRD_NAMES, ...flags, '--wait', '--timeout=170s'], {
      timeoutMs: 180_000,
    });
    process.stderr.write(`[chart-crds] CRDs deleted in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    const left =
      res.code === 0
        ? ''
        : (
            await kubectl([
              'get',
              'crd',
              ...CRD_NAMES,
              '--ignore-not-found',
              '-o',
              'jsonpath={range .items[*]}{.metadata.name}: {.status.conditions}{"\\n"}{end}',
            ])
          ).stdout;
    expect(res.code, `${res.stderr}\nstill there:\n${left}`).toBe(0);
  };
  const helm = (args: readonly string[]): Promise<CommandResult> => run(cp.binaries.helm, ['--kubeconfig', cp.kubeconfigPath, ...args], { timeoutMs: 120_000 });
  const ok = async (pending: Promise<CommandResult>): Promise<CommandResult> => {
    const res = await pending;
    expect(res.code, res.stderr).toBe(0);
    return res;
  };
  /** A UserGroup in TEAM, written in `version`: what the CRDs must keep serving across the cases. */
  const applyUserGroup = (version: string, name: string, title: string): Promise<CommandResult> =>
    ok(
      kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: `usergroup.dev/${version}`,
          kind: 'UserGroup',
          metadata: { name, namespace: TEAM },
          spec: { userGroupId: name, name: title },
        }),
      ),
    );
  const refused = async (pending: Promise<CommandResult>): Promise<string> => {
    const res = await pending;
    expect(res.code, res.stdout).not.toBe(0);
    return res.stderr;
  };
  const install = (chart: string, ...flags: string[]): Promise<CommandResult> => helm(['install', RELEASE, chart, '--namespace', NS, ...CONNECTION, ...flags]);
  const upgrade = (chart: string, ...flags: string[]): Promise<CommandResult> =>
    helm(['upgrade', RELEASE, chart, '--namespace', NS, '--reset-then-reuse-values', ...flags]);
  const getCrd = async (name: string): Promise<Crd> =>
    JSON.parse((await ok(kubectl(['get', 'crd', name, '-o', 'json', '--show-managed-fields']))).stdout) as Crd;
  const columns = async (): Promise<string[][]> =>
    (await getCrd(USERGROUPS_CRD)).spec.versions.map((v) => (v.additionalPrinterColumns ?? []).map((c) => c.name));

  /** Every CRD belongs to the release, with the keep policy (or without it). */
  async function expectOwnedByTheRelease(keep = true): Promise<void> {
    for (const name of CRD_NAMES) {
      const { metadata } = await getCrd(name);
      expect(metadata.annotations, name).toMatchObject({ 'meta.helm.sh/release-name': RELEASE, 'meta.helm.sh/release-namespace': NS });
      expect(metadata.annotations?.['helm.sh/resource-policy'], name).toBe(keep ? 'keep' : undefined);
      expect(metadata.labels, name).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/instance': RELEASE });
    }
  }

  /** The next case starts from a cluster that never had the CRDs. */
  async function removeEverything(): Promise<void> {
    await ok(helm(['uninstall', RELEASE, '--namespace', NS, '--ignore-not-found']));
    await deleteCrds('--ignore-not-found');
    await ok(kubectl(['delete', 'lease', '--namespace', NS, '--all']));
  }

  it("a fresh install: refused with crds.enabled alone (Helm applies crds/ first, which the templates may not take) and with --skip-crds (the v1 connection cannot be mapped); --take-ownership installs them as the release's, kept", async () => {
    expect(await refused(install(CHART_DIR, ...ENABLED))).toContain(
      'Error: INSTALLATION FAILED: unable to continue with install: CustomResourceDefinition "clusterusergroupservices.usergroup.dev" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata',
    );
    await deleteCrds();
    expect(await refused(install(CHART_DIR, ...ENABLED, '--skip-crds'))).toContain(
      'Error: INSTALLATION FAILED: unable to build kubernetes objects from release manifest: resource mapping not found for name: "ugo-usergroup-operator" namespace: "" from "": no matches for kind "ClusterUserGroupService" in version "usergroup.dev/v1"\nensure CRDs are installed first',
    );
    // Neither left a release behind.
    expect(await refused(helm(['status', RELEASE, '--namespace', NS]))).toContain('release: not found');

    await ok(install(CHART_DIR, ...ENABLED, '--take-ownership'));
    await expectOwnedByTheRelease();
    const manifest = (await ok(helm(['get', 'manifest', RELEASE, '--namespace', NS]))).stdout;
    for (const name of CRD_NAMES) expect(manifest).toContain(`name: ${name}`);
    await ok(kubectl(['get', 'clusterusergroupservice', 'ugo-usergroup-operator']));
  });

  it("helm upgrade carries a changed CRD (a printer column more), and helm rollback the previous revision's", async () => {
    expect((await columns()).every((c) => !c.includes(PROBE_COLUMN.name))).toBe(true);
    const revision = (JSON.parse((await ok(helm(['status', RELEASE, '--namespace', NS, '-o', 'json']))).stdout) as { version: number }).version;
    await ok(upgrade(changedChart));
    expect((await columns()).every((c) => c.at(-1) === PROBE_COLUMN.name)).toBe(true);
    await ok(helm(['rollback', RELEASE, String(revision), '--namespace', NS]));
    expect((await columns()).every((c) => !c.includes(PROBE_COLUMN.name))).toBe(true);
    // Helm alone manages them, so no upgrade meets another field manager.
    const managers = (await getCrd(USERGROUPS_CRD)).metadata.managedFields
      ?.filter((f) => f.manager !== 'kube-apiserver')
      .map((f) => `${f.manager} ${f.operation}`);
    expect(managers).toEqual(['helm Apply']);
  });

  it("another release of the chart (a shard) must be installed with --skip-crds: Helm 4 applies crds/ again on install, which strips the owner's keep policy until its next upgrade", async () => {
    const shard = (...flags: string[]): Promise<CommandResult> =>
      helm(['install', 'shard', CHART_DIR, '--namespace', TEAM, `--set`, `watchNamespaces={${TEAM}}`, ...flags]);
    await ok(shard('--skip-crds'));
    await expectOwnedByTheRelease();
    await ok(helm(['uninstall', 'shard', '--namespace', TEAM]));

    await ok(shard());
    const stripped = (await getCrd(USERGROUPS_CRD)).metadata.annotations ?? {};
    expect(stripped['helm.sh/resource-policy']).toBeUndefined();
    expect(stripped['meta.helm.sh/release-name']).toBeUndefined();
    await ok(helm(['uninstall', 'shard', '--namespace', TEAM]));
    await ok(upgrade(CHART_DIR));
    await expectOwnedByTheRelease();
  });

  it('an upgrade without them and helm uninstall keep the CRDs, the UserGroups and their token Secrets (crds.keep); installed again, the release takes them back; with crds.keep=false uninstall deletes them', async () => {
    await applyUserGroup('v1', 'acme', 'Acme');
    const uid = (await ok(kubectl(['get', 'usergroup', 'acme', '--namespace', TEAM, '-o', 'jsonpath={.metadata.uid}']))).stdout;
    // A token Secret as the controller writes it: owned by its UserGroup, so garbage collection follows the UserGroup.
    await ok(
      kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'acme-token', namespace: TEAM, ownerReferences: [{ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid }] },
          stringData: { token: 'not-a-real-token' },
        }),
      ),
    );

    // An upgrade without them (crds.enabled=false) leaves them, still the release's: enabled again, no --take-ownership.
    await ok(upgrade(CHART_DIR, '--set', 'crds.enabled=false'));
    expect((await ok(helm(['get', 'manifest', RELEASE, '--namespace', NS]))).stdout).not.toContain('kind: CustomResourceDefinition');
    for (const name of CRD_NAMES) expect((await getCrd(name)).metadata.deletionTimestamp, name).toBeUndefined();
    await ok(upgrade(CHART_DIR, ...ENABLED));
    await expectOwnedByTheRelease();

    const uninstalled = await ok(helm(['uninstall', RELEASE, '--namespace', NS]));
    expect(uninstalled.stdout).toContain('These resources were kept due to the resource policy:');
    for (const name of CRD_NAMES) {
      expect(uninstalled.stdout).toContain(`[CustomResourceDefinition] ${name}`);
      expect((await getCrd(name)).metadata.deletionTimestamp, name).toBeUndefined();
    }
    await ok(kubectl(['get', 'usergroup', 'acme', '--namespace', TEAM]));
    await ok(kubectl(['get', 'secret', 'acme-token', '--namespace', TEAM]));

    // The same release again: Helm 4 applies crds/ first and strips the kept CRDs' ownership, so --take-ownership again.
    expect(await refused(install(CHART_DIR, ...ENABLED))).toContain('invalid ownership metadata');
    await ok(install(CHART_DIR, ...ENABLED, '--take-ownership'));
    await expectOwnedByTheRelease();
    await ok(kubectl(['get', 'usergroup', 'acme', '--namespace', TEAM]));

    // What keep prevents: without it, uninstalling deletes the CRDs (and with them every UserGroup).
    await ok(upgrade(CHART_DIR, '--set', 'crds.keep=false'));
    await expectOwnedByTheRelease(false);
    const deleting = await ok(helm(['uninstall', RELEASE, '--namespace', NS]));
    expect(deleting.stdout).not.toContain('kept due to the resource policy');
    // Gone already, or going (kubectl prints nothing at all when none is left).
    const left = (await ok(kubectl(['get', 'crd', ...CRD_NAMES, '--ignore-not-found', '-o', 'json']))).stdout;
    const remaining = left.trim() === '' ? [] : (JSON.parse(left) as { items: Crd[] }).items;
    expect(remaining.filter((crd) => crd.metadata.deletionTimestamp === undefined)).toEqual([]);
    await eventually('the UserGroup deleted with its CRD', async () => {
      const got = await kubectl(['get', 'usergroups.usergroup.dev', 'acme', '--namespace', TEAM]);
      return got.code !== 0 && /NotFound|the server doesn't have a resource type/.test(got.stderr) ? true : undefined;
    });
    await removeEverything();
  });

  it.each([
    { origin: "crds/, by helm install (Helm's field manager)", before: [] as string[][], flags: [] as string[] },
    {
      origin: 'kubectl apply --server-side -f crds/, the release installed with --skip-crds',
      before: [['apply', '--server-side', '-f', CRDS_DIR]],
      flags: ['--skip-crds'],
    },
  ])('an existing release whose CRDs came from $origin: --set crds.enabled=true needs --take-ownership', async ({ before, flags }) => {
    for (const args of before) await ok(kubectl(args));
    await ok(install(CHART_DIR, ...flags));
    expect(await refused(upgrade(CHART_DIR, ...ENABLED))).toContain(
      'Error: UPGRADE FAILED: unable to continue with update: CustomResourceDefinition "clusterusergroupservices.usergroup.dev" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata',
    );
    await ok(upgrade(CHART_DIR, ...ENABLED, '--take-ownership'));
    await expectOwnedByTheRelease();
    await removeEverything();
  });

  it(`from ${PREVIOUS_RELEASE.version} (v1alpha1 CRDs from its crds/): helm upgrade alone cannot map the v1 connection and changes nothing; the CRDs applied first, it takes them, and the first CRD change needs --force-conflicts once (kubectl co-owns them)`, async () => {
    const previousChart = path.join(
      extractPreviousRelease(path.join(work, PREVIOUS_RELEASE.version), ['deploy/helm/usergroup-operator']),
      'deploy/helm/usergroup-operator',
    );
    await ok(install(previousChart));
    await applyUserGroup('v1alpha1', 'legacy', 'Legacy');
    expect((await getCrd(USERGROUPS_CRD)).spec.versions.map((v) => v.name)).toEqual(['v1alpha1']);

    expect(await refused(upgrade(CHART_DIR, ...ENABLED, '--take-ownership'))).toContain(
      'Error: UPGRADE FAILED: resource mapping not found for name: "ugo-usergroup-operator" namespace: "" from "": no matches for kind "ClusterUserGroupService" in version "usergroup.dev/v1"\nensure CRDs are installed first',
    );
    // Helm mapped every object before applying any: no revision, the CRDs untouched.
    const history = JSON.parse((await ok(helm(['history', RELEASE, '--namespace', NS, '-o', 'json']))).stdout) as { revision: number }[];
    expect(history.map((h) => h.revision)).toEqual([1]);
    expect((await getCrd(USERGROUPS_CRD)).spec.versions.map((v) => v.name)).toEqual(['v1alpha1']);

    // The release's usergroup-operator-crds.yaml (crds/ concatenated) first; --force-conflicts: 0.2.0's Helm owns .spec.versions.
    await ok(kubectl(['apply', '--server-side', '--force-conflicts', '-f', CRDS_DIR]));
    await ok(upgrade(CHART_DIR, ...ENABLED, '--take-ownership'));
    await expectOwnedByTheRelease();
    await ok(kubectl(['get', 'usergroups.v1.usergroup.dev', 'legacy', '--namespace', TEAM]));
    expect(
      (await ok(kubectl(['get', 'clusterusergroupservices.v1.usergroup.dev', 'ugo-usergroup-operator', '-o', 'jsonpath={.metadata.labels.helm\\.sh/chart}'])))
        .stdout,
    ).toBe(CHART_LABEL);

    // kubectl's apply left it co-owning every field, with the same values: the first upgrade that changes a CRD meets it.
    expect(await refused(upgrade(changedChart))).toContain('Apply failed with 1 conflict: conflict with "kubectl": .spec.versions');
    await ok(upgrade(changedChart, '--force-conflicts'));
    expect((await columns()).every((c) => c.at(-1) === PROBE_COLUMN.name)).toBe(true);
    // From then on Helm alone owns what changes.
    await ok(upgrade(CHART_DIR));
    expect((await columns()).every((c) => !c.includes(PROBE_COLUMN.name))).toBe(true);
  });
});
