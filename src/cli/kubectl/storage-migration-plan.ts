// The storage migration's decisions, without I/O: which path a cluster takes, what a StorageVersionMigration says.
import { CLUSTERUSERGROUPSERVICE_PLURAL, GROUP, USERGROUP_PLURAL, USERGROUPSERVICE_PLURAL, VERSION } from '../../api/constants.js';

/** The kinds 0.2.0 stored as v1alpha1. */
export const MIGRATED_RESOURCES = [USERGROUP_PLURAL, USERGROUPSERVICE_PLURAL, CLUSTERUSERGROUPSERVICE_PLURAL] as const;
export type MigratedResource = (typeof MIGRATED_RESOURCES)[number];

export const MIGRATION_GROUP = 'storagemigration.k8s.io';
export const MIGRATION_PLURAL = 'storageversionmigrations';
/**
 * The StorageVersionMigration versions used, most preferred first: v1 (Kubernetes 1.37, on by default) and v1beta1
 * (1.35 and 1.36, behind the StorageVersionMigrator feature gate). v1alpha1 (1.30-1.34) is not used: its spec also
 * names a version, and its migrator never updates a CRD's storedVersions.
 */
export const MIGRATION_VERSIONS = ['v1', 'v1beta1'] as const;
export type MigrationVersion = (typeof MIGRATION_VERSIONS)[number];

export const crdName = (resource: MigratedResource): string => `${resource}.${GROUP}`;

export type MigrationPath =
  | { readonly kind: 'migrator'; readonly version: MigrationVersion }
  /** asked: --rewrite; unserved: the cluster serves no StorageVersionMigration version this plugin uses. */
  | { readonly kind: 'rewrite'; readonly because: 'asked' | 'unserved' };

/** `served`: the storagemigration.k8s.io versions whose discovery lists storageversionmigrations. */
export function chooseMigrationPath(served: readonly string[], rewrite: boolean): MigrationPath {
  if (rewrite) return { kind: 'rewrite', because: 'asked' };
  const version = MIGRATION_VERSIONS.find((v) => served.includes(v));
  return version ? { kind: 'migrator', version } : { kind: 'rewrite', because: 'unserved' };
}

/**
 * One StorageVersionMigration of `resource`. v1 and v1beta1 have the same spec, a GroupResource (k8s.io/api
 * storagemigration/{v1,v1beta1}/types.go: spec.resource {group, resource}); the generated name says what it migrates.
 */
export function migrationManifest(version: MigrationVersion, resource: MigratedResource): Record<string, unknown> {
  return {
    apiVersion: `${MIGRATION_GROUP}/${version}`,
    kind: 'StorageVersionMigration',
    metadata: { generateName: `${crdName(resource)}-${VERSION}-` },
    spec: { resource: { group: GROUP, resource } },
  };
}

/** What the migration needs to know of a CRD. */
export interface CrdState {
  readonly resourceVersion: string;
  readonly generation: number;
  /** spec.versions[storage=true].name; undefined if none is marked. */
  readonly storageVersion: string | undefined;
  readonly storedVersions: readonly string[];
}

export type CrdReadiness = 'missing' | 'not-storing-v1' | 'done' | 'to-migrate';

/** Where a CRD stands: storing v1 is the precondition, storedVersions [v1] the goal. */
export function crdReadiness(crd: CrdState | undefined): CrdReadiness {
  if (!crd) return 'missing';
  if (crd.storageVersion !== VERSION) return 'not-storing-v1';
  return isDone(crd) ? 'done' : 'to-migrate';
}

const isDone = (crd: CrdState): boolean => crd.storedVersions.length === 1 && crd.storedVersions[0] === VERSION;

/**
 * After every object was written again (by the migrator or by the rewrite): storedVersions may become [v1] only if
 * the CRD still stores v1 with the spec it had when the migration began (same generation), else an object could
 * have been written in another version meanwhile.
 */
export function finishing(before: CrdState, now: CrdState): 'done' | 'set-stored-versions' | 'changed' {
  if (isDone(now)) return 'done';
  if (now.storageVersion !== VERSION || now.generation !== before.generation) return 'changed';
  return 'set-stored-versions';
}

export interface MigrationCondition {
  readonly type: string;
  readonly status: string;
  readonly message: string;
}

/**
 * A migration that no controller has started after this long will not be started: the migrator is not running.
 * Generous: kube-controller-manager starts one only once its discovery knows the resource (up to a minute after the
 * CRD changed), and on the e2e suite's loaded node a whole migration took 84 s.
 */
export const NOT_STARTED_AFTER_MS = 300_000;

export type MigrationProgress =
  | { readonly kind: 'succeeded' }
  | { readonly kind: 'failed'; readonly message: string }
  | { readonly kind: 'running' }
  /** No condition yet (kube-controller-manager promotes one migration per resource at a time). */
  | { readonly kind: 'pending' }
  | { readonly kind: 'not-started' };

/** Reads a StorageVersionMigration's conditions (metav1.Condition: Running, Succeeded, Failed) `waitedMs` after its creation. */
export function judgeMigration(conditions: readonly MigrationCondition[], waitedMs: number): MigrationProgress {
  const holds = (type: string): MigrationCondition | undefined => conditions.find((c) => c.type === type && c.status === 'True');
  const failed = holds('Failed');
  if (failed) return { kind: 'failed', message: failed.message };
  if (holds('Succeeded')) return { kind: 'succeeded' };
  if (conditions.length > 0) return { kind: 'running' };
  return waitedMs >= NOT_STARTED_AFTER_MS ? { kind: 'not-started' } : { kind: 'pending' };
}
