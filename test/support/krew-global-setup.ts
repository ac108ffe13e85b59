import type { TestProject } from 'vitest/node';
import { buildKrew } from './krew.js';

declare module 'vitest' {
  export interface ProvidedContext {
    krew: string;
  }
}

/** Builds krew (the kubectl plugin manager, test/krew) once per run, for the plugin's install test; about a minute cold. */
export default function setup(project: TestProject): void {
  const started = Date.now();
  project.provide('krew', buildKrew());
  const seconds = (Date.now() - started) / 1000;
  if (seconds > 5) process.stderr.write(`[krew] ready in ${seconds.toFixed(1)} s\n`);
}
