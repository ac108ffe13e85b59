import { defineConfig } from 'vitest/config';

const nodeMajor = Number(process.versions.node.split('.')[0]);
if (nodeMajor < 24) {
  throw new Error(
    `tests run on Node >= 24 but this is Node ${process.versions.node}: run them through npm (npm test), ` +
      'which puts the Node 24 of the "node" dev dependency first on PATH; if node_modules/.bin/node is missing, rerun npm ci',
  );
}

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          // One control plane per run is shared by every file; files isolate by namespace.
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
    ],
  },
});
