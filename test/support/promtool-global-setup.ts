import type { TestProject } from 'vitest/node';
import { buildPromtool } from './promtool.js';

declare module 'vitest' {
  export interface ProvidedContext {
    promtool: string;
  }
}

/** Builds promtool (Prometheus' own rule tester, test/promtool) once per run; a cold build takes a few minutes. */
export default function setup(project: TestProject): void {
  const started = Date.now();
  project.provide('promtool', buildPromtool());
  const seconds = (Date.now() - started) / 1000;
  if (seconds > 5) process.stderr.write(`[promtool] ready in ${seconds.toFixed(1)} s\n`);
}
