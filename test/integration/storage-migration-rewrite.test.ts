// Upgrading from 0.2.0 with `kubectl usergroup migrate-storage` through empty patches: asked for (--rewrite, on CRDs
// that Helm created, so the upgrade's apply meets another field manager) and taken because the cluster serves no
// StorageVersionMigration API. The StorageVersionMigration paths are in storage-migration.test.ts; the cases and the
// test they share are in test/support/storage-migration.ts.
import { describeStorageMigration, STORAGE_MIGRATION_CASES as CASES } from '../support/storage-migration.js';

describeStorageMigration([CASES.rewriteFlag, CASES.rewriteNoApi]);
