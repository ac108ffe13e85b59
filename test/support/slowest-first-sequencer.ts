// Starts the slowest test files first, from durations measured here, so that a fresh clone (no vitest results
// cache, where vitest falls back to "larger files first") packs its workers as well as a warm checkout does.
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds per file, from a fresh-clone run of `npm test` with 3 integration files at a time (2026-11-28). Only the
 * order matters: a file missing here counts as 0 and keeps vitest's own order among such files. Refresh it when
 * a file's time changes a lot: the run's summary lists each file's duration.
 */
const MEASURED_SECONDS: Readonly<Record<string, number>> = {
  'test/integration/storage-migration.test.ts': 86,
  'test/integration/storage-migration-rewrite.test.ts': 86,
  'test/integration/request-budgets.test.ts': 85,
  'test/integration/request-budgets-failover.test.ts': 70,
  'test/integration/chart-crds.test.ts': 134,
  'test/integration/kubectl-plugin-binary.test.ts': 111,
  'test/integration/connections.test.ts': 100,
  'test/integration/resilience.test.ts': 98,
  'test/integration/kubectl.test.ts': 89,
  'test/integration/rbac.test.ts': 77,
  'test/integration/image-build.test.ts': 71,
  'test/integration/argocd.test.ts': 65,
  'test/integration/admission.test.ts': 58,
  'test/integration/scheduled-rotation.test.ts': 50,
  'test/integration/install.test.ts': 46,
  'test/integration/rotation.test.ts': 45,
  'test/integration/deletion-policy.test.ts': 45,
  'test/integration/tenancy.test.ts': 40,
  'test/integration/status-race.test.ts': 36,
  'test/integration/leader-election.test.ts': 36,
  'test/integration/bounded-memory.test.ts': 27,
  'test/integration/sharding.test.ts': 26,
  'test/integration/image.test.ts': 26,
  'test/integration/service-errors.test.ts': 24,
  'test/integration/leadership.test.ts': 22,
  'test/integration/sync.test.ts': 20,
  'test/integration/metrics-auth.test.ts': 20,
};

export class SlowestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    // vitest's order of the projects kept; within each project, a stable sort on the measured seconds.
    const byProject = new Map<string, TestSpecification[]>();
    for (const spec of await super.sort(files)) byProject.set(spec.project.name, [...(byProject.get(spec.project.name) ?? []), spec]);
    const seconds = (spec: TestSpecification): number => MEASURED_SECONDS[path.relative(spec.project.config.root, spec.moduleId)] ?? 0;
    return [...byProject.values()].flatMap((specs) =>
      specs
        .map((spec, i) => ({ spec, i }))
        .sort((a, b) => seconds(b.spec) - seconds(a.spec) || a.i - b.i)
        .map(({ spec }) => spec),
    );
  }
}
