import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { repoRoot } from './repo-root.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfig: string;
    binDir: string;
    kubernetesVersion: string;
  }
}

/** One real control plane for the whole integration run; test files isolate themselves by namespace. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now();
  const cp = await ControlPlane.start({
    crds: [path.join(repoRoot, 'crds')],
    progress: (line) => process.stderr.write(`[controlplane] ${line}\n`),
  });
  process.stderr.write(`[controlplane] started in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  project.provide('kubeconfig', cp.kubeconfigPath);
  project.provide('binDir', cp.binaries.dir);
  project.provide('kubernetesVersion', cp.binaries.versions.kubernetes);
  return async () => {
    await cp.stop();
  };
}
