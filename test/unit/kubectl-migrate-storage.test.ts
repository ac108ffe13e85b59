import { describe, expect, it } from 'vitest';
import { DEFAULT_MIGRATION_TIMEOUT_MS, parsePluginArgs } from '../../src/cli/kubectl/args.js';
import { migrateStorageCommand } from '../../src/cli/kubectl/migrate-storage.js';
import type { ObjectRef, StorageAccess } from '../../src/cli/kubectl/storage-api.js';
import {
  chooseMigrationPath,
  crdReadiness,
  finishing,
  judgeMigration,
  migrationManifest,
  NOT_STARTED_AFTER_MS,
  type CrdState,
  type MigratedResource,
  type MigrationCondition,
} from '../../src/cli/kubectl/storage-migration-plan.js';

const crd = (over: Partial<CrdState> = {}): CrdState => ({
  resourceVersion: '10',
  generation: 2,
  storageVersion: 'v1',
  storedVersions: ['v1alpha1', 'v1'],
  ...over,
});
const cond = (type: string, status: string, message = ''): MigrationCondition => ({ type, status, message });

describe('kubectl usergroup migrate-storage: arguments', () => {
  it('no arguments; --rewrite, --timeout, --kubeconfig, --context; 30 minutes by default', () => {
    expect(parsePluginArgs(['migrate-storage'])).toEqual({
      ok: true,
      command: {
        kind: 'migrate-storage',
        cluster: { kubeconfig: undefined, context: undefined, namespace: undefined },
        timeoutMs: DEFAULT_MIGRATION_TIMEOUT_MS,
        rewrite: false,
      },
    });
    expect(DEFAULT_MIGRATION_TIMEOUT_MS).toBe(1_800_000);
    expect(parsePluginArgs(['migrate-storage', '--rewrite', '--timeout=5m', '--kubeconfig', '/k', '--context', 'prod'])).toEqual({
      ok: true,
      command: { kind: 'migrate-storage', cluster: { kubeconfig: '/k', context: 'prod', namespace: undefined }, timeoutMs: 300_000, rewrite: true },
    });
  });

  it('refuses what it would ignore: a name, a namespace (the CRDs are cluster-wide), a bad duration', () => {
    expect(parsePluginArgs(['migrate-storage', 'usergroups'])).toMatchObject({ ok: false, error: 'migrate-storage takes no arguments, got usergroups' });
    expect(parsePluginArgs(['migrate-storage', '-n', 'a'])).toMatchObject({ ok: false, error: 'migrate-storage does not take --namespace' });
    expect(parsePluginArgs(['migrate-storage', '--no-wait'])).toMatchObject({ ok: false, error: 'migrate-storage does not take --no-wait' });
    expect(parsePluginArgs(['migrate-storage', '--timeout', '10'])).toMatchObject({
      ok: false,
      error: expect.stringContaining('invalid --timeout "10"') as unknown,
    });
    expect(parsePluginArgs(['rotate', 'acme', '--rewrite'])).toMatchObject({ ok: false, error: 'rotate does not take --rewrite' });
  });
});

describe('migrate-storage: the path a cluster takes', () => {
  it.each<[string[], boolean, ReturnType<typeof chooseMigrationPath>]>([
    [['v1', 'v1beta1'], false, { kind: 'migrator', version: 'v1' }],
    [['v1'], false, { kind: 'migrator', version: 'v1' }],
    [['v1beta1'], false, { kind: 'migrator', version: 'v1beta1' }],
    // v1alpha1 (Kubernetes 1.30-1.34) has another spec and never updates storedVersions: not used.
    [['v1alpha1'], false, { kind: 'rewrite', because: 'unserved' }],
    [[], false, { kind: 'rewrite', because: 'unserved' }],
    [['v1', 'v1beta1'], true, { kind: 'rewrite', because: 'asked' }],
  ])('served %j, --rewrite %s', (served, rewrite, expected) => {
    expect(chooseMigrationPath(served, rewrite)).toEqual(expected);
  });

  it('v1 and v1beta1 StorageVersionMigrations name a GroupResource, no version', () => {
    for (const version of ['v1', 'v1beta1'] as const) {
      expect(migrationManifest(version, 'usergroups')).toEqual({
        apiVersion: `storagemigration.k8s.io/${version}`,
        kind: 'StorageVersionMigration',
        metadata: { generateName: 'usergroups.usergroup.dev-v1-' },
        spec: { resource: { group: 'usergroup.dev', resource: 'usergroups' } },
      });
    }
  });
});

describe('migrate-storage: reading a CRD and a StorageVersionMigration', () => {
  it('a CRD must exist and store v1; storedVersions [v1] is done', () => {
    expect(crdReadiness(undefined)).toBe('missing');
    expect(crdReadiness(crd({ storageVersion: 'v1alpha1', storedVersions: ['v1alpha1'] }))).toBe('not-storing-v1');
    expect(crdReadiness(crd())).toBe('to-migrate');
    expect(crdReadiness(crd({ storedVersions: ['v1alpha1'] }))).toBe('to-migrate');
    expect(crdReadiness(crd({ storedVersions: ['v1'] }))).toBe('done');
  });

  it('storedVersions may become [v1] only if the CRD kept its spec (generation) and still stores v1', () => {
    expect(finishing(crd(), crd({ resourceVersion: '11' }))).toBe('set-stored-versions');
    expect(finishing(crd(), crd({ storedVersions: ['v1'] }))).toBe('done');
    expect(finishing(crd(), crd({ generation: 3 }))).toBe('changed');
    expect(finishing(crd(), crd({ storageVersion: 'v2' }))).toBe('changed');
  });

  it('Failed wins, then Succeeded; any condition is running; none for two minutes: nothing runs the migrator', () => {
    expect(judgeMigration([cond('Running', 'True'), cond('Failed', 'True', 'resource does not exist in GC')], 5_000)).toEqual({
      kind: 'failed',
      message: 'resource does not exist in GC',
    });
    expect(judgeMigration([cond('Running', 'False'), cond('Succeeded', 'True')], 5_000)).toEqual({ kind: 'succeeded' });
    expect(judgeMigration([cond('Running', 'True')], NOT_STARTED_AFTER_MS * 10)).toEqual({ kind: 'running' });
    expect(judgeMigration([cond('Succeeded', 'False')], 0)).toEqual({ kind: 'running' });
    expect(judgeMigration([], NOT_STARTED_AFTER_MS - 1)).toEqual({ kind: 'pending' });
    expect(judgeMigration([], NOT_STARTED_AFTER_MS)).toEqual({ kind: 'not-started' });
  });
});

/** An apiserver's state for the three kinds, in memory, counting writes: the command's logic without a cluster. */
class FakeStorage implements StorageAccess {
  writes = 0;
  crds = new Map<MigratedResource, CrdState | undefined>();
  objects = new Map<MigratedResource, ObjectRef[]>([
    ['usergroups', [{ namespace: 'a', name: 'x' }]],
    ['usergroupservices', []],
    ['clusterusergroupservices', [{ namespace: undefined, name: 'shared' }]],
  ]);
  served: string[] = [];
  conditions: MigrationCondition[] = [];
  constructor(state: Partial<CrdState> = {}) {
    for (const r of ['usergroups', 'usergroupservices', 'clusterusergroupservices'] as const) this.crds.set(r, crd(state));
  }
  servedMigrationVersions(): Promise<string[]> {
    return Promise.resolve(this.served);
  }
  getCrd(resource: MigratedResource): Promise<CrdState | undefined> {
    return Promise.resolve(this.crds.get(resource));
  }
  setStoredVersions(resource: MigratedResource, resourceVersion: string): Promise<'set' | 'conflict'> {
    const current = this.crds.get(resource);
    if (current?.resourceVersion !== resourceVersion) return Promise.resolve('conflict');
    this.writes++;
    this.crds.set(resource, { ...current, storedVersions: ['v1'], resourceVersion: `${Number(resourceVersion) + 1}` });
    return Promise.resolve('set');
  }
  listObjects(resource: MigratedResource): Promise<ObjectRef[]> {
    return Promise.resolve(this.objects.get(resource) ?? []);
  }
  rewrite(): Promise<'written' | 'gone'> {
    this.writes++;
    return Promise.resolve('written');
  }
  createMigration(_version: string, resource: MigratedResource): Promise<string> {
    this.writes++;
    return Promise.resolve(`${resource}.usergroup.dev-v1-abcde`);
  }
  migrationConditions(): Promise<MigrationCondition[] | undefined> {
    return Promise.resolve(this.conditions);
  }
}

async function run(api: StorageAccess, rewrite = false, timeoutMs = 60_000, now = () => 0): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = { out: (t: string) => (out += t), err: (t: string) => (err += t) };
  const code = await migrateStorageCommand({ rewrite, timeoutMs }, { api, io, now });
  return { code, out, err };
}

describe('migrate-storage: the command over an in-memory apiserver', () => {
  it('CRDs not storing v1 yet: says to apply the new CRDs first, writes nothing, exit 1', async () => {
    const api = new FakeStorage({ storageVersion: 'v1alpha1', storedVersions: ['v1alpha1'] });
    const r = await run(api);
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toBe(
      'error: usergroups.usergroup.dev does not store v1 yet: apply the new CRDs first (kubectl apply --server-side --force-conflicts -f crds/, from the release you upgrade to)\n',
    );
    expect(api.writes).toBe(0);
  });

  it('the rewrite path: one write per object and one per CRD; then again: "already stored as v1 only", 0 writes', async () => {
    const api = new FakeStorage();
    api.served = ['v1'];
    const first = await run(api, true);
    expect(first).toEqual({
      code: 0,
      out: [
        'usergroups.usergroup.dev: 1 objects rewritten, stored as v1 only',
        'usergroupservices.usergroup.dev: 0 objects rewritten, stored as v1 only',
        'clusterusergroupservices.usergroup.dev: 1 objects rewritten, stored as v1 only',
        '',
      ].join('\n'),
      err: 'rewriting every object (--rewrite)\n',
    });
    expect(api.writes).toBe(2 + 3);
    const again = await run(api);
    expect(again.code).toBe(0);
    expect(again.out).toBe(
      ['usergroups', 'usergroupservices', 'clusterusergroupservices'].map((r) => `${r}.usergroup.dev: already stored as v1 only\n`).join(''),
    );
    expect(api.writes).toBe(5);
  });

  it('a CRD whose spec changed during the rewrite keeps its storedVersions: run again', async () => {
    const api = new FakeStorage();
    const list = api.listObjects.bind(api);
    api.listObjects = (resource) => {
      api.crds.set(resource, crd({ generation: 3, resourceVersion: '12' }));
      return list(resource);
    };
    const r = await run(api);
    expect(r.code).toBe(1);
    expect(r.err).toContain('error: usergroups.usergroup.dev changed during the migration');
    expect(api.crds.get('usergroups')?.storedVersions).toEqual(['v1alpha1', 'v1']);
  });

  it('a Failed migration: its message and how to retry', async () => {
    const api = new FakeStorage();
    api.served = ['v1beta1'];
    api.conditions = [cond('Failed', 'True', 'resource does not exist in discovery')];
    const r = await run(api);
    expect(r.code).toBe(1);
    expect(r.err).toContain('using storagemigration.k8s.io/v1beta1');
    expect(r.err).toContain(
      'error: storageversionmigration/usergroups.usergroup.dev-v1-abcde (usergroups.usergroup.dev) failed: resource does not exist in discovery; run kubectl usergroup migrate-storage again, or with --rewrite\n',
    );
  });

  it('Succeeded: storedVersions set where the migrator left it', async () => {
    const api = new FakeStorage();
    api.served = ['v1'];
    api.conditions = [cond('Succeeded', 'True')];
    const r = await run(api);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('usergroups.usergroup.dev: stored as v1 only (storageversionmigration/usergroups.usergroup.dev-v1-abcde succeeded)\n');
    for (const c of api.crds.values()) expect(c?.storedVersions).toEqual(['v1']);
  });

  it('a migration nothing starts: after two minutes, says no migrator runs and to use --rewrite', async () => {
    const api = new FakeStorage();
    api.served = ['v1beta1'];
    let clock = 0;
    const r = await run(api, false, 60 * 60_000, () => (clock += NOT_STARTED_AFTER_MS / 2));
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      'no storage version migrator runs for storagemigration.k8s.io/v1beta1 on this cluster; run kubectl usergroup migrate-storage --rewrite',
    );
  });
});
