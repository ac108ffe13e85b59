import { provideGoTool } from './go-tool.js';
import { buildKrew } from './krew.js';

declare module 'vitest' {
  export interface ProvidedContext {
    krew: string;
  }
}

/** Builds krew (the kubectl plugin manager, devtools/krew) once per run, for the plugin's install test; about a minute cold. */
export default provideGoTool('krew', 'krew', buildKrew);
