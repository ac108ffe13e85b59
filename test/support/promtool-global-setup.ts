import { provideGoTool } from './go-tool.js';
import { buildPromtool } from './promtool.js';

declare module 'vitest' {
  export interface ProvidedContext {
    promtool: string;
  }
}

/** Builds promtool (Prometheus' own rule tester, devtools/promtool) once per run; a cold build takes a few minutes. */
export default provideGoTool('promtool', 'promtool', buildPromtool);
