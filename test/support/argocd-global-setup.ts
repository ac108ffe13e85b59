import { provideGoTool } from './go-tool.js';
import { buildArgoCdLua } from './argocd.js';

declare module 'vitest' {
  export interface ProvidedContext {
    argocdLua: string;
  }
}

/** Builds argocd-lua (Argo CD's own Lua VM and diff, devtools/argocd) once per run; a cold build takes about 11 minutes on 2 cores. */
export default provideGoTool('argocdLua', 'argocd-lua', buildArgoCdLua);
