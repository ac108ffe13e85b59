import type { TestProject } from 'vitest/node';
import { buildArgoCdLua } from './argocd.js';

declare module 'vitest' {
  export interface ProvidedContext {
    argocdLua: string;
  }
}

/** Builds argocd-lua (Argo CD's own Lua VM, test/argocd) once per run; a cold build takes a few minutes. */
export default function setup(project: TestProject): void {
  const started = Date.now();
  project.provide('argocdLua', buildArgoCdLua());
  const seconds = (Date.now() - started) / 1000;
  if (seconds > 5) process.stderr.write(`[argocd-lua] ready in ${seconds.toFixed(1)} s\n`);
}
