// Upgrading from 0.2.0 with `kubectl usergroup migrate-storage` through a StorageVersionMigration: v1 (Kubernetes
// ≥ 1.37), run by kube-controller-manager's migrator, and v1beta1 (1.35-1.36), which this migrator does not run, so
// the plugin must say so, change nothing, and --rewrite then does the work. The rewrite paths are in
// storage-migration-rewrite.test.ts; the cases and the test they share are in test/support/storage-migration.ts.
import { describeStorageMigration, STORAGE_MIGRATION_CASES as CASES } from '../support/storage-migration.js';

describeStorageMigration([CASES.v1, CASES.v1beta1Unstarted]);
