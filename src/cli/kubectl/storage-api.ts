// What `migrate-storage` reads and writes at the apiserver: discovery, the three CRDs, their objects, StorageVersionMigrations.
import { GROUP, VERSION } from '../../api/constants.js';
import { isConflict, isNotFound } from '../../kube/api-error.js';
import { call, type KubeClient } from '../../kube/http.js';
import { isRecord } from '../../platform/json-value.js';
import {
  crdName,
  MIGRATION_GROUP,
  MIGRATION_PLURAL,
  MIGRATION_VERSIONS,
  migrationManifest,
  type CrdState,
  type MigratedResource,
  type MigrationCondition,
  type MigrationVersion,
} from './storage-migration-plan.js';

export interface ObjectRef {
  /** undefined: cluster-scoped. */
  readonly namespace: string | undefined;
  readonly name: string;
}

export interface StorageAccess {
  /** The storagemigration.k8s.io versions (of those the plugin uses) whose discovery lists storageversionmigrations. */
  servedMigrationVersions(): Promise<string[]>;
  getCrd(resource: MigratedResource): Promise<CrdState | undefined>;
  /** Sets status.storedVersions to [v1] if the CRD is still at `resourceVersion`. */
  setStoredVersions(resource: MigratedResource, resourceVersion: string): Promise<'set' | 'conflict'>;
  listObjects(resource: MigratedResource): Promise<ObjectRef[]>;
  /** An empty merge patch: the apiserver writes the object again, in the storage version. 'gone': deleted meanwhile. */
  rewrite(resource: MigratedResource, ref: ObjectRef): Promise<'written' | 'gone'>;
  /** Creates a StorageVersionMigration; resolves with its name. */
  createMigration(version: MigrationVersion, resource: MigratedResource): Promise<string>;
  /** undefined: deleted. */
  migrationConditions(version: MigrationVersion, name: string): Promise<MigrationCondition[] | undefined>;
}

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const LIST_PAGE = '500';
const MERGE_PATCH = 'application/merge-patch+json';

const objectsPath = (resource: MigratedResource): string => `/apis/${GROUP}/${VERSION}/${resource}`;
const migrationsPath = (version: MigrationVersion): string => `/apis/${MIGRATION_GROUP}/${version}/${MIGRATION_PLURAL}`;

/** StorageAccess over the plugin's KubeClient; every answer is parsed here, at the edge. */
export class KubeStorageAccess implements StorageAccess {
  constructor(private readonly client: KubeClient) {}

  async servedMigrationVersions(): Promise<string[]> {
    const group = await call(this.client, 'GET', `/apis/${MIGRATION_GROUP}`);
    if (!group.ok) {
      if (isNotFound(group.error)) return [];
      throw group.error;
    }
    const listed = new Set(arrayOf(group.body, 'versions').map((v) => (isRecord(v) ? v['version'] : undefined)));
    const served: string[] = [];
    // A group version can be on with its resource off (the StorageVersionMigrator feature gate): ask each.
    for (const version of MIGRATION_VERSIONS.filter((v) => listed.has(v))) {
      const resources = await call(this.client, 'GET', `/apis/${MIGRATION_GROUP}/${version}`);
      if (!resources.ok) {
        if (isNotFound(resources.error)) continue;
        throw resources.error;
      }
      if (arrayOf(resources.body, 'resources').some((r) => isRecord(r) && r['name'] === MIGRATION_PLURAL)) served.push(version);
    }
    return served;
  }

  async getCrd(resource: MigratedResource): Promise<CrdState | undefined> {
    const res = await call(this.client, 'GET', `${CRDS}/${crdName(resource)}`);
    if (!res.ok) {
      if (isNotFound(res.error)) return undefined;
      throw res.error;
    }
    return parseCrd(res.body, resource);
  }

  async setStoredVersions(resource: MigratedResource, resourceVersion: string): Promise<'set' | 'conflict'> {
    // resourceVersion in a merge patch is a precondition: the CRD read (its generation, its storage version) still holds.
    const body = { metadata: { resourceVersion }, status: { storedVersions: [VERSION] } };
    const res = await call(this.client, 'PATCH', `${CRDS}/${crdName(resource)}/status`, { body, contentType: MERGE_PATCH });
    if (res.ok) return 'set';
    if (isConflict(res.error)) return 'conflict';
    throw res.error;
  }

  async listObjects(resource: MigratedResource): Promise<ObjectRef[]> {
    const refs: ObjectRef[] = [];
    let continueToken = '';
    do {
      const query: Record<string, string> = { limit: LIST_PAGE, ...(continueToken ? { continue: continueToken } : {}) };
      const res = await call(this.client, 'GET', objectsPath(resource), { query });
      if (!res.ok) throw res.error;
      for (const item of arrayOf(res.body, 'items')) {
        const meta = isRecord(item) ? item['metadata'] : undefined;
        const name = isRecord(meta) ? meta['name'] : undefined;
        if (typeof name !== 'string') throw new Error(`the apiserver listed a ${resource} object without a name`);
        const namespace = isRecord(meta) && typeof meta['namespace'] === 'string' ? meta['namespace'] : undefined;
        refs.push({ namespace, name });
      }
      const listMeta = isRecord(res.body) ? res.body['metadata'] : undefined;
      continueToken = isRecord(listMeta) && typeof listMeta['continue'] === 'string' ? listMeta['continue'] : '';
    } while (continueToken);
    return refs;
  }

  async rewrite(resource: MigratedResource, ref: ObjectRef): Promise<'written' | 'gone'> {
    const scope = ref.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(ref.namespace)}`;
    const path = `/apis/${GROUP}/${VERSION}${scope}/${resource}/${encodeURIComponent(ref.name)}`;
    const res = await call(this.client, 'PATCH', path, { body: {}, contentType: MERGE_PATCH });
    if (res.ok) return 'written';
    if (isNotFound(res.error)) return 'gone';
    throw res.error;
  }

  async createMigration(version: MigrationVersion, resource: MigratedResource): Promise<string> {
    const res = await call(this.client, 'POST', migrationsPath(version), { body: migrationManifest(version, resource) });
    if (!res.ok) throw res.error;
    const meta = isRecord(res.body) ? res.body['metadata'] : undefined;
    const name = isRecord(meta) ? meta['name'] : undefined;
    if (typeof name !== 'string') throw new Error('the apiserver created a StorageVersionMigration without a name');
    return name;
  }

  async migrationConditions(version: MigrationVersion, name: string): Promise<MigrationCondition[] | undefined> {
    const res = await call(this.client, 'GET', `${migrationsPath(version)}/${encodeURIComponent(name)}`);
    if (!res.ok) {
      if (isNotFound(res.error)) return undefined;
      throw res.error;
    }
    const status = isRecord(res.body) ? res.body['status'] : undefined;
    return arrayOf(status, 'conditions').flatMap((c) =>
      isRecord(c) && typeof c['type'] === 'string' && typeof c['status'] === 'string'
        ? [{ type: c['type'], status: c['status'], message: typeof c['message'] === 'string' ? c['message'] : '' }]
        : [],
    );
  }
}

function arrayOf(value: unknown, key: string): unknown[] {
  const member = isRecord(value) ? value[key] : undefined;
  return Array.isArray(member) ? (member as unknown[]) : [];
}

function parseCrd(body: unknown, resource: MigratedResource): CrdState {
  const meta = isRecord(body) ? body['metadata'] : undefined;
  const resourceVersion = isRecord(meta) ? meta['resourceVersion'] : undefined;
  const generation = isRecord(meta) ? meta['generation'] : undefined;
  if (typeof resourceVersion !== 'string' || typeof generation !== 'number') {
    throw new Error(`the apiserver sent customresourcedefinition ${crdName(resource)} without resourceVersion or generation`);
  }
  const spec = isRecord(body) ? body['spec'] : undefined;
  const storage = arrayOf(spec, 'versions').find((v) => isRecord(v) && v['storage'] === true);
  const storageName = isRecord(storage) ? storage['name'] : undefined;
  const status = isRecord(body) ? body['status'] : undefined;
  return {
    resourceVersion,
    generation,
    storageVersion: typeof storageName === 'string' ? storageName : undefined,
    storedVersions: arrayOf(status, 'storedVersions').filter((v): v is string => typeof v === 'string'),
  };
}
