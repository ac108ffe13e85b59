// Upgrading from 0.2.0 (v1alpha1 only) to usergroup.dev/v1: what is stored in etcd is rewritten as v1 by
// deploy/storage-migration/migrate.sh, through the StorageVersionMigration API (Kubernetes ≥ 1.37) or through
// kubectl (older clusters, --rewrite), so that v1alpha1 can later leave the CRDs' status.storedVersions. Each path
// gets a private control plane started with the previous release's CRDs, read from git.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../src/devtools/controlplane/binaries.js';
import { ControlPlane } from '../../src/devtools/controlplane/controlplane.js';
import { run, type CommandResult } from '../support/kube.js';
import { PREVIOUS_RELEASE, previousReleaseCrds } from '../support/previous-release.js';
import { ifAssigned } from '../support/teardown.js';

const SCRIPT = path.join(repoRoot, 'deploy/storage-migration/migrate.sh');
const RESOURCES = ['usergroups', 'usergroupservices', 'clusterusergroupservices'] as const;
const NS = 'tenant-a';

/** The objects a 0.2.0 user had, written as they wrote them (v1alpha1). */
const OLD_OBJECTS = [
  ...['alpha', 'beta', 'gamma'].map((name) => ({
    apiVersion: 'usergroup.dev/v1alpha1',
    kind: 'UserGroup',
    metadata: { name, namespace: NS },
    spec: { userGroupId: `${NS}.${name}`, name: `Group ${name}`, mapping: { sales: 'warehouse' } },
  })),
  {
    apiVersion: 'usergroup.dev/v1alpha1',
    kind: 'UserGroupService',
    metadata: { name: 'own', namespace: NS },
    spec: { url: 'https://analytics.example.com', apiKeySecretRef: { name: 'own-key' } },
  },
  {
    apiVersion: 'usergroup.dev/v1alpha1',
    kind: 'ClusterUserGroupService',
    metadata: { name: 'shared' },
    spec: {
      url: 'https://analytics.example.com',
      apiKeySecretRef: { namespace: 'ops', name: 'key' },
      tenants: [{ namespaces: [NS], userGroupIds: { prefix: '{namespace}.' } }],
    },
  },
];

const etcdKeys = (): string[] => [
  ...['alpha', 'beta', 'gamma'].map((n) => `/registry/usergroup.dev/usergroups/${NS}/${n}`),
  `/registry/usergroup.dev/usergroupservices/${NS}/own`,
  '/registry/usergroup.dev/clusterusergroupservices/shared',
];

describe.each([
  // The migrator waits until kube-controller-manager's garbage collector watches the resource, which it discovers
  // at start or at a periodic resync: here the old CRDs exist before it starts, as on a cluster that ran 0.2.0.
  { path: 'StorageVersionMigration (the default on Kubernetes ≥ 1.37)', args: [] as string[], says: /created; waiting for it to succeed/, helmCreated: false },
  // As Helm installs crds/: created, not server-side applied, so the upgrade's apply meets another field manager.
  { path: 'kubectl rewrite (--rewrite, for older clusters)', args: ['--rewrite'], says: /3 objects rewritten, stored as v1 only/, helmCreated: true },
])(`storage migration from ${PREVIOUS_RELEASE.version}: $path`, { timeout: 300_000 }, ({ args, says, helmCreated }) => {
  let cp: ControlPlane;
  let oldCrds: string;

  beforeAll(async () => {
    oldCrds = previousReleaseCrds();
    cp = await ControlPlane.start(helmCreated ? {} : { crds: [oldCrds] });
    if (helmCreated) {
      await ok(['create', '-f', oldCrds]);
      await ok(['wait', '--for=condition=Established', '--timeout=60s', '-f', oldCrds]);
    }
  });
  afterAll(async () => {
    await ifAssigned(cp)?.stop();
    if (oldCrds) fs.rmSync(oldCrds, { recursive: true, force: true });
  });

  const kubectl = (a: readonly string[], input?: string): Promise<CommandResult> =>
    run(cp.binaries.kubectl, ['--kubeconfig', cp.kubeconfigPath, ...a], input === undefined ? {} : { input });
  const ok = async (a: readonly string[], input?: string): Promise<string> => {
    const r = await kubectl(a, input);
    expect(r.code, `kubectl ${a.join(' ')}: ${r.stderr}`).toBe(0);
    return r.stdout;
  };
  /** The apiVersion each object is stored under, read from etcd itself (what storedVersions is about). */
  const storedApiVersions = async (): Promise<string[]> =>
    Promise.all(
      etcdKeys().map(async (key) => {
        const res = await fetch(`${cp.etcdUrl}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: Buffer.from(key).toString('base64') }) });
        const body = (await res.json()) as { kvs?: { value: string }[] };
        const value = body.kvs?.[0]?.value;
        if (value === undefined) throw new Error(`etcd has no ${key}`);
        return (JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as { apiVersion: string }).apiVersion;
      }),
    );
  const storedVersions = async (resource: string): Promise<string[]> =>
    JSON.parse(await ok(['get', 'crd', `${resource}.usergroup.dev`, '-o', 'jsonpath={.status.storedVersions}'])) as string[];
  const snapshot = async (): Promise<unknown[]> => {
    const items: unknown[] = [];
    for (const resource of RESOURCES) {
      const list = JSON.parse(await ok(['get', `${resource}.usergroup.dev`, '-A', '-o', 'json'])) as {
        items: { metadata: Record<string, unknown>; spec: unknown }[];
      };
      for (const item of list.items) items.push({ name: item.metadata.name, uid: item.metadata.uid, generation: item.metadata.generation, spec: item.spec });
    }
    return items;
  };

  /** The script as a user runs it, with this control plane's kubectl and kubeconfig. */
  const migrate = (a: readonly string[]): Promise<CommandResult> =>
    new Promise((resolve) => {
      execFile(SCRIPT, a, { env: { ...process.env, KUBECTL: cp.binaries.kubectl, KUBECONFIG: cp.kubeconfigPath }, timeout: 240_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
    });

  it('rewrites every object as v1, drops v1alpha1 from storedVersions, and changes nothing users see', async () => {
    await ok(['create', 'namespace', NS]);
    await ok(['apply', '-f', '-'], OLD_OBJECTS.map((o) => JSON.stringify(o)).join('\n'));
    expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1alpha1'));

    // Too early: the CRDs do not store v1 yet.
    const early = await migrate(args);
    expect(early.code).toBe(1);
    expect(early.stderr).toContain('does not store v1 yet: apply the new CRDs first (kubectl apply --server-side --force-conflicts -f crds/)');

    // The upgrade as docs/operations.md says: the new CRDs first.
    if (helmCreated) {
      // Without --force-conflicts the apply is refused: the fields that change belong to Helm's create.
      const plain = await kubectl(['apply', '--server-side', '-f', path.join(repoRoot, 'crds')]);
      expect(plain.code).not.toBe(0);
      expect(plain.stderr).toContain('conflict');
    }
    await ok(['apply', '--server-side', '--force-conflicts', '-f', path.join(repoRoot, 'crds')]);
    for (const resource of RESOURCES) expect(await storedVersions(resource)).toEqual(['v1alpha1', 'v1']);
    expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1alpha1'));
    const before = await snapshot();

    const result = await migrate(args);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(says);

    expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1'));
    for (const resource of RESOURCES) expect(await storedVersions(resource)).toEqual(['v1']);
    expect(await snapshot()).toEqual(before);

    // Manifests written for 0.2.0 keep applying unchanged: served, with kubectl's deprecation warning, no change.
    const again = await kubectl(['apply', '-f', '-'], OLD_OBJECTS.map((o) => JSON.stringify(o)).join('\n'));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('Warning: usergroup.dev/v1alpha1 UserGroup is deprecated; use usergroup.dev/v1');
    expect(again.stdout).toContain('usergroup.usergroup.dev/alpha unchanged');
    expect(await snapshot()).toEqual(before);

    // Again: nothing left to do, still exit 0.
    const rerun = await migrate(args);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1'));
  });
});
