// Upgrading from 0.2.0 (v1alpha1 only) to usergroup.dev/v1: what is stored in etcd is rewritten as v1 by
// `kubectl usergroup migrate-storage`, through a StorageVersionMigration (storagemigration.k8s.io v1, Kubernetes ≥ 1.37;
// v1beta1 on 1.35-1.36) or through empty patches (no such API served, or --rewrite), so that v1alpha1 can later leave
// the CRDs' status.storedVersions. Each path (a case here) gets a private control plane started with the previous
// release's CRDs, read from git, and with the kube-apiserver flags that make it serve that path's API versions. The
// cases run in two files, so that they pack with the others: test/integration/storage-migration.test.ts (the
// StorageVersionMigration paths) and test/integration/storage-migration-rewrite.test.ts (the two rewrite paths).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from './repo-root.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { run, type CommandResult } from './kube.js';
import { PREVIOUS_RELEASE, previousReleaseCrds } from './previous-release.js';
import { ifAssigned } from './teardown.js';

/** `npm run build` output; npm test builds before it runs the tests. */
const PLUGIN = path.join(repoRoot, 'dist/cli/kubectl-usergroup.js');
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

export interface StorageMigrationCase {
  readonly path: string;
  /** kube-apiserver flags: which storagemigration.k8s.io versions it serves. */
  readonly apiserverFlags: readonly string[];
  readonly args: readonly string[];
  /** What the plugin says on stderr of the path it took, and on stdout once it is done. */
  readonly progress: string;
  readonly says: RegExp;
  /** The CRDs created as Helm installs crds/ (not server-side applied), so the upgrade's apply meets another field manager. */
  readonly helmCreated: boolean;
  /** A first run that takes this StorageVersionMigration version and that nothing runs: it must say so and change nothing. */
  readonly unstarted?: string;
}

/** The paths, as the test files pick them. */
export const STORAGE_MIGRATION_CASES = {
  // The migrator waits until kube-controller-manager's garbage collector watches the resource, which it discovers
  // at start or at a periodic resync: here the old CRDs exist before it starts, as on a cluster that ran 0.2.0.
  v1: {
    path: 'StorageVersionMigration v1 (the default on Kubernetes ≥ 1.37)',
    apiserverFlags: [],
    args: [],
    progress: 'using storagemigration.k8s.io/v1: one StorageVersionMigration per resource',
    says: /^usergroups\.usergroup\.dev: stored as v1 only \(storageversionmigration\/usergroups\.usergroup\.dev-v1-\w+ succeeded\)$/m,
    helmCreated: false,
  },
  rewriteFlag: {
    path: 'rewrite (--rewrite)',
    apiserverFlags: [],
    args: ['--rewrite'],
    progress: 'rewriting every object (--rewrite)',
    says: /3 objects rewritten, stored as v1 only/,
    helmCreated: true,
  },
  // Kubernetes 1.30-1.34 without the alpha API, or any cluster that turned it off.
  rewriteNoApi: {
    path: 'rewrite (no StorageVersionMigration API served)',
    apiserverFlags: ['--runtime-config=storagemigration.k8s.io/v1=false'],
    args: [],
    progress: 'rewriting every object (this cluster serves no storagemigration.k8s.io v1 or v1beta1)',
    says: /3 objects rewritten, stored as v1 only/,
    helmCreated: false,
  },
  // v1beta1 served, v1 not (as on 1.35-1.36): the plugin takes v1beta1 and the apiserver accepts its spec. This
  // 1.37 kube-controller-manager's migrator lists StorageVersionMigrations at v1 only (its log: "failed to list
  // *v1.StorageVersionMigration: the server could not find the requested resource"), so nothing runs them: the
  // plugin must say so, change nothing, and --rewrite then does the work.
  v1beta1Unstarted: {
    path: 'StorageVersionMigration v1beta1 only, no migrator running it, then --rewrite',
    apiserverFlags: ['--runtime-config=storagemigration.k8s.io/v1=false,storagemigration.k8s.io/v1beta1=true'],
    args: ['--rewrite'],
    progress: 'rewriting every object (--rewrite)',
    says: /3 objects rewritten, stored as v1 only/,
    helmCreated: false,
    unstarted: 'v1beta1',
  },
} as const satisfies Record<string, StorageMigrationCase>;

/**
 * Registers, in the calling test file, the test of each case, one describe each with its own control plane, and the
 * plugin as a user installs it (built by `npm run build`), found on PATH by kubectl: a directory holding
 * `kubectl-usergroup` (a symlink to the built file) first on PATH, then this test's Node, which the plugin's
 * `#!/usr/bin/env node` picks.
 */
export function describeStorageMigration(cases: readonly StorageMigrationCase[]): void {
  let pluginDir = '';
  beforeAll(() => {
    if (!fs.existsSync(PLUGIN)) throw new Error(`${PLUGIN} is missing: run npm run build first (npm test does)`);
    pluginDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-migrate-storage-'));
    fs.symlinkSync(PLUGIN, path.join(pluginDir, 'kubectl-usergroup'));
  });
  afterAll(() => {
    if (pluginDir) fs.rmSync(pluginDir, { recursive: true, force: true });
  });

  describe.each<StorageMigrationCase>(cases)(
    `storage migration from ${PREVIOUS_RELEASE.version}: $path`,
    { timeout: 300_000 },
    ({ apiserverFlags, args, progress, says, helmCreated, unstarted }) => {
      let cp: ControlPlane;
      let oldCrds: string;

      beforeAll(async () => {
        oldCrds = previousReleaseCrds();
        cp = await ControlPlane.start({ apiserverFlags, ...(helmCreated ? {} : { crds: [oldCrds] }) });
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
            items: { metadata: Record<string, unknown>; spec: unknown; status?: unknown }[];
          };
          for (const item of list.items) {
            items.push({ name: item.metadata.name, uid: item.metadata.uid, generation: item.metadata.generation, spec: item.spec, status: item.status });
          }
        }
        return items;
      };
      /** Every write the plugin could make changes one of these: the objects', the CRDs' resourceVersions, the migrations. */
      const writes = async (): Promise<string> => {
        const rvs = await ok([
          'get',
          RESOURCES.map((r) => `${r}.usergroup.dev`).join(','),
          '-A',
          '-o',
          'jsonpath={range .items[*]}{.metadata.resourceVersion} {end}',
        ]);
        const crds = await ok([
          'get',
          'crd',
          ...RESOURCES.map((r) => `${r}.usergroup.dev`),
          '-o',
          'jsonpath={range .items[*]}{.metadata.resourceVersion} {end}',
        ]);
        const served = await kubectl(['get', 'storageversionmigrations.storagemigration.k8s.io', '-o', 'name']);
        return `${rvs}| ${crds}| ${served.stdout}`;
      };

      /** The plugin as a user runs it: kubectl finds kubectl-usergroup on PATH. */
      const migrate = (a: readonly string[]): Promise<CommandResult & { ms: number }> => {
        const started = Date.now();
        const env = { ...process.env, PATH: [pluginDir, path.dirname(process.execPath), process.env['PATH'] ?? ''].join(path.delimiter) };
        return new Promise((resolve) => {
          execFile(
            cp.binaries.kubectl,
            ['usergroup', 'migrate-storage', '--kubeconfig', cp.kubeconfigPath, ...a],
            { env, timeout: 240_000 },
            (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr, ms: Date.now() - started }),
          );
        });
      };

      it('rewrites every object as v1, drops v1alpha1 from storedVersions, and changes nothing users see', async () => {
        await ok(['create', 'namespace', NS]);
        await ok(['apply', '-f', '-'], OLD_OBJECTS.map((o) => JSON.stringify(o)).join('\n'));
        expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1alpha1'));
        // What the operator wrote under 0.2.0: the migration must keep it.
        await ok([
          'patch',
          'usergroup',
          'alpha',
          '-n',
          NS,
          '--subresource=status',
          '--type=merge',
          '-p',
          '{"status":{"observedGeneration":1,"tokenSecretName":"alpha"}}',
        ]);

        // Too early: the CRDs do not store v1 yet.
        const early = await migrate(args);
        expect(early.code).toBe(1);
        expect(early.stderr).toBe(
          'error: usergroups.usergroup.dev does not store v1 yet: apply the new CRDs first (kubectl apply --server-side --force-conflicts -f crds/, from the release you upgrade to)\n',
        );

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
        expect(before).toContainEqual(expect.objectContaining({ name: 'alpha', status: { observedGeneration: 1, tokenSecretName: 'alpha' } }));

        if (unstarted) {
          const stuck = await migrate(['--timeout=10s']);
          console.log(`migrate-storage with ${unstarted} StorageVersionMigrations nothing runs: exit ${stuck.code} after ${(stuck.ms / 1000).toFixed(1)} s`);
          expect(stuck.code).toBe(1);
          expect(stuck.stderr).toContain(`using storagemigration.k8s.io/${unstarted}: one StorageVersionMigration per resource`);
          expect(stuck.stderr).toMatch(/^error: timed out after 10s waiting for (storageversionmigration\/\S+ not started yet(, )?){3}; /m);
          expect(stuck.stdout).toBe('');
          // The apiserver took each migration as this version defines it: spec.resource a GroupResource.
          const created = JSON.parse(await ok(['get', `storageversionmigrations.${unstarted}.storagemigration.k8s.io`, '-o', 'json'])) as {
            items: { spec: unknown; status?: { conditions?: unknown[] } }[];
          };
          expect(created.items.map((m) => m.spec)).toEqual(
            expect.arrayContaining(RESOURCES.map((resource) => ({ resource: { group: 'usergroup.dev', resource } }))),
          );
          expect(created.items.flatMap((m) => m.status?.conditions ?? [])).toEqual([]);
          expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1alpha1'));
          for (const resource of RESOURCES) expect(await storedVersions(resource)).toEqual(['v1alpha1', 'v1']);
        }

        const result = await migrate(args);
        console.log(`migrate-storage ${args.join(' ')}: exit ${result.code} after ${(result.ms / 1000).toFixed(1)} s`);
        expect(result.code, result.stderr).toBe(0);
        expect(result.stderr).toContain(progress);
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

        // Again: nothing left to do, nothing written, exit 0.
        const written = await writes();
        const rerun = await migrate(args);
        expect(rerun.code, rerun.stderr).toBe(0);
        expect(rerun.stdout).toBe(RESOURCES.map((r) => `${r}.usergroup.dev: already stored as v1 only\n`).join(''));
        expect(await writes()).toBe(written);
        expect(await storedApiVersions()).toEqual(Array(5).fill('usergroup.dev/v1'));
      });
    },
  );
}
