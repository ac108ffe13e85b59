import { defineConfig } from 'vitest/config';
import { SlowestFirstSequencer } from './test/support/slowest-first-sequencer.js';

const nodeMajor = Number(process.versions.node.split('.')[0]);
if (nodeMajor < 24) {
  throw new Error(
    `tests run on Node >= 24 but this is Node ${process.versions.node}: run them through npm (npm test), ` +
      'which puts the Node 24 of the "node" dev dependency first on PATH; if node_modules/.bin/node is missing, rerun npm ci',
  );
}

export default defineConfig({
  test: {
    // The slowest files first, from measured durations: a fresh clone has no results cache to order by.
    sequence: { sequencer: SlowestFirstSequencer },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // Pure code: its files share a worker's modules instead of loading vitest and the client once per file
          // (a third of the project's CPU: 75 → 23 CPU-s).
          isolate: false,
          // The integration project's: vitest runs non-isolated projects of one group on one pool.
          maxWorkers: 4,
          // Argo CD's own Lua engine for the deploy/argocd tests (devtools/argocd/build.sh, cached).
          globalSetup: ['test/support/argocd-global-setup.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          // As the unit project: files share a worker's modules instead of loading vitest, the client and the test
          // support once per file.
          isolate: false,
          include: ['test/integration/**/*.test.ts'],
          globalSetup: [
            'test/support/global-setup.ts',
            'test/support/argocd-global-setup.ts',
            'test/support/promtool-global-setup.ts',
            // krew, to install the kubectl plugin's release as its users do (devtools/krew/build.sh, cached).
            'test/support/krew-global-setup.ts',
          ],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          // One control plane per run is shared by every file; files isolate by namespace. Four at a time on 2
          // cores: most of a file's time is waiting on the apiserver, a controller's timers or the simulator (the
          // project used 55 % of the CPU at four; five were no faster and made the apiserver's CRD deletions time out).
          fileParallelism: true,
          maxWorkers: 4,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'reliability',
          include: ['test/reliability/**/*.test.ts'],
          // Its own control plane and the report collector, one scenario at a time. Not under npm test: run by
          // `npm run test:reliability` (full) and `npm run test:reliability:reduced` (what CI runs).
          globalSetup: ['test/support/global-setup.ts', 'test/reliability/support/global-setup.ts'],
          testTimeout: 1_800_000,
          hookTimeout: 600_000,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
      // The chart on a one-node cluster (issue 19): only under `npm run test:e2e`, whose launcher
      // (devtools/node/run-in-node.ts, root) makes the node's namespaces and sets UGO_E2E_NODE; a plain
      // `vitest run` (npm test) does not see this project.
      ...(process.env['UGO_E2E_NODE']
        ? [
            {
              test: {
                name: 'e2e',
                include: ['test/e2e/**/*.test.ts'],
                globalSetup: ['test/support/e2e-global-setup.ts'],
                testTimeout: 600_000,
                hookTimeout: 900_000,
                // The steps of a file build on each other and files share their node: one by one on each node
                // (test/e2e/support/run-cli.ts runs chart.test.ts on a node of its own, the rest on another).
                fileParallelism: false,
              },
            },
          ]
        : []),
    ],
  },
});
