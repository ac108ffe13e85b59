// `kubectl usergroup migrate-storage`: after upgrading from 0.2.0, rewrites what etcd holds as usergroup.dev/v1.
import { VERSION } from '../../api/constants.js';
import { formatGoDuration } from '../../platform/go-duration.js';
import { sleep } from '../../platform/sleep.js';
import type { Io } from './io.js';
import type { StorageAccess } from './storage-api.js';
import {
  chooseMigrationPath,
  crdName,
  crdReadiness,
  finishing,
  judgeMigration,
  MIGRATED_RESOURCES,
  MIGRATION_GROUP,
  NOT_STARTED_AFTER_MS,
  type CrdState,
  type MigratedResource,
  type MigrationVersion,
} from './storage-migration-plan.js';

export interface MigrateStorageRequest {
  /** --rewrite: the empty-patch path even where a StorageVersionMigration API is served. */
  readonly rewrite: boolean;
  /** How long to wait for the StorageVersionMigrations. */
  readonly timeoutMs: number;
}

export interface MigrateStorageDeps {
  readonly api: StorageAccess;
  readonly io: Io;
  readonly now: () => number;
}

const APPLY_CRDS = 'apply the new CRDs first (kubectl apply --server-side --force-conflicts -f crds/, from the release you upgrade to)';
const RETRY = 'run kubectl usergroup migrate-storage again';
/** Empty patches in flight at once: the objects are small, the apiserver's fairness limits do the rest. */
const REWRITE_CONCURRENCY = 8;
const POLL_MS = 2_000;
/** Another writer of the CRD between our read and our status patch: read again, a few times at most. */
const MAX_FINISH_ATTEMPTS = 5;

/**
 * Checks that the three CRDs store v1, then, for each whose status.storedVersions is not [v1] yet, has every object
 * written again in v1 and leaves storedVersions [v1]: through one StorageVersionMigration per resource where the
 * cluster serves storagemigration.k8s.io v1 or v1beta1, else (or with --rewrite) with one empty merge patch per
 * object. Resolves with the exit code: 0 done (or nothing to do), 1 refused, failed or timed out.
 */
export async function migrateStorageCommand(request: MigrateStorageRequest, deps: MigrateStorageDeps): Promise<number> {
  const { api, io } = deps;
  const todo = new Map<MigratedResource, CrdState>();
  const done: MigratedResource[] = [];
  for (const resource of MIGRATED_RESOURCES) {
    const crd = await api.getCrd(resource);
    switch (crdReadiness(crd)) {
      case 'missing':
        io.err(`error: customresourcedefinition ${crdName(resource)} not found: ${APPLY_CRDS}\n`);
        return 1;
      case 'not-storing-v1':
        io.err(`error: ${crdName(resource)} does not store ${VERSION} yet: ${APPLY_CRDS}\n`);
        return 1;
      case 'done':
        done.push(resource);
        break;
      case 'to-migrate':
        if (crd) todo.set(resource, crd);
    }
  }
  for (const resource of done) io.out(`${crdName(resource)}: already stored as ${VERSION} only\n`);
  if (todo.size === 0) return 0;

  const path = chooseMigrationPath(request.rewrite ? [] : await api.servedMigrationVersions(), request.rewrite);
  if (path.kind === 'rewrite') {
    io.err(`rewriting every object (${path.because === 'asked' ? '--rewrite' : `this cluster serves no ${MIGRATION_GROUP} v1 or v1beta1`})\n`);
    return rewriteAll(todo, deps);
  }
  io.err(`using ${MIGRATION_GROUP}/${path.version}: one StorageVersionMigration per resource, run by kube-controller-manager\n`);
  return migrateAll(path.version, todo, request.timeoutMs, deps);
}

/** The rewrite path: an empty merge patch of every object (it cannot conflict with anyone's write), then storedVersions. */
async function rewriteAll(todo: ReadonlyMap<MigratedResource, CrdState>, deps: MigrateStorageDeps): Promise<number> {
  const { api, io } = deps;
  for (const [resource, before] of todo) {
    const refs = await api.listObjects(resource);
    let written = 0;
    await inParallel(refs, REWRITE_CONCURRENCY, async (ref) => {
      if ((await api.rewrite(resource, ref)) === 'written') written++;
    });
    if (!(await finish(resource, before, deps))) return 1;
    io.out(`${crdName(resource)}: ${written} objects rewritten, stored as ${VERSION} only\n`);
  }
  return 0;
}

interface Started {
  readonly resource: MigratedResource;
  readonly name: string;
  readonly createdAt: number;
  running: boolean;
}

/** The migrator path: one StorageVersionMigration per resource, all at once (each waits for kube-controller-manager to know the resource). */
async function migrateAll(
  version: MigrationVersion,
  todo: ReadonlyMap<MigratedResource, CrdState>,
  timeoutMs: number,
  deps: MigrateStorageDeps,
): Promise<number> {
  const { api, io } = deps;
  const waiting: Started[] = [];
  for (const resource of todo.keys()) {
    const name = await api.createMigration(version, resource);
    waiting.push({ resource, name, createdAt: deps.now(), running: false });
    io.err(`${crdName(resource)}: storageversionmigration/${name} created; waiting for it to succeed\n`);
  }
  const deadline = deps.now() + timeoutMs;
  while (waiting.length > 0) {
    for (const migration of [...waiting]) {
      const ref = `storageversionmigration/${migration.name}`;
      const conditions = await api.migrationConditions(version, migration.name);
      if (!conditions) {
        io.err(`error: ${ref} was deleted before it finished; ${RETRY}\n`);
        return 1;
      }
      const progress = judgeMigration(conditions, deps.now() - migration.createdAt);
      switch (progress.kind) {
        case 'failed':
          io.err(`error: ${ref} (${crdName(migration.resource)}) failed: ${progress.message}; ${RETRY}, or with --rewrite\n`);
          return 1;
        case 'not-started':
          io.err(
            `error: nothing has started ${ref} after ${formatGoDuration(NOT_STARTED_AFTER_MS)}: no storage version migrator runs for ${MIGRATION_GROUP}/${version} on this cluster; run kubectl usergroup migrate-storage --rewrite\n`,
          );
          return 1;
        case 'succeeded': {
          const before = todo.get(migration.resource);
          if (before && !(await finish(migration.resource, before, deps))) return 1;
          io.out(`${crdName(migration.resource)}: stored as ${VERSION} only (${ref} succeeded)\n`);
          waiting.splice(waiting.indexOf(migration), 1);
          break;
        }
        case 'running':
          migration.running = true;
          break;
        case 'pending':
          break;
      }
    }
    if (waiting.length === 0) break;
    const left = deadline - deps.now();
    if (left <= 0) {
      const states = waiting.map((m) => `storageversionmigration/${m.name} ${m.running ? 'running' : 'not started yet'}`).join(', ');
      io.err(`error: timed out after ${formatGoDuration(timeoutMs)} waiting for ${states}; ${RETRY} (with a longer --timeout), or with --rewrite\n`);
      return 1;
    }
    await sleep(Math.min(POLL_MS, left));
  }
  return 0;
}

/**
 * Leaves storedVersions [v1] once every object was written again: the migrator on Kubernetes 1.37 does so itself;
 * where it has not (an older migrator, the rewrite path), this does, if the CRD has not changed meanwhile.
 */
async function finish(resource: MigratedResource, before: CrdState, deps: MigrateStorageDeps): Promise<boolean> {
  const { api, io } = deps;
  for (let attempt = 1; attempt <= MAX_FINISH_ATTEMPTS; attempt++) {
    const now = await api.getCrd(resource);
    const verdict = now ? finishing(before, now) : 'changed';
    if (verdict === 'done') return true;
    if (!now || verdict === 'changed') {
      io.err(`error: ${crdName(resource)} changed during the migration (an object may be stored in another version); ${RETRY}\n`);
      return false;
    }
    if ((await api.setStoredVersions(resource, now.resourceVersion)) === 'set') return true;
  }
  io.err(`error: ${crdName(resource)} kept changing while its status.storedVersions was set (${MAX_FINISH_ATTEMPTS} attempts); ${RETRY}\n`);
  return false;
}

/** Runs `task` on every item, at most `limit` at a time; rejects with the first failure. */
async function inParallel<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await task(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
