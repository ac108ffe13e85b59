import path from 'node:path';
import { build, type Metafile } from 'esbuild';

/** Imports the bundle leaves to Node at run time, as written in the sources. */
export const BUNDLE_EXTERNALS = [
  // Loaded only for kubeconfigs with exec or auth-provider plugins (src/kube/kubeconfig.ts): 19 MB of
  // generated API classes that a bundle would carry in memory for every user.
  '@kubernetes/client-node',
  // The developer commands (sim, dev), imported on demand by src/cli/commands.ts: they stay tsc's modules
  // beside the bundle in dist/devtools.
  '../devtools/*',
];

/**
 * The controller's entry point as ONE ES module, written over tsc's dist/cli/main.js: the same sources, its
 * npm packages folded in. Measured with the image's flags (/proc/self/smaps_rollup, got loaded): 72-74 MiB
 * of RSS against 86 MiB for the ~150 modules tsc and node_modules leave (Node keeps every module's record,
 * source and resolution state). Not minified: stack traces keep the sources' names and a line to look at;
 * minifying saved 2 MiB more. Everything else in dist (the developer tools, the kubectl plugin's modules)
 * stays as tsc wrote it, and the bundle sits where main.js was, so its relative paths (package.json, the
 * developer commands) resolve as before.
 */
export async function bundleController(repoRoot: string): Promise<Metafile> {
  const result = await build({
    entryPoints: [path.join(repoRoot, 'src/cli/main.ts')],
    outfile: path.join(repoRoot, 'dist/cli/main.js'),
    allowOverwrite: true,
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node26',
    external: BUNDLE_EXTERNALS,
    // The CommonJS packages inside (pino, prom-client) call require() for Node's built-ins.
    banner: { js: "import { createRequire as __bundleRequire } from 'node:module';\nconst require = __bundleRequire(import.meta.url);" },
    // For `node --enable-source-maps`: frames point at src/*.ts; the sources themselves are not copied in.
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
    logLevel: 'warning',
  });
  return result.metafile;
}
