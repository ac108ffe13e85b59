import path from 'node:path';
import { build } from 'esbuild';

export interface Bundle {
  /** One ES module holding the plugin and every npm package it imports. */
  readonly code: string;
  /** The directories of the npm packages inside it (for their licence texts). */
  readonly packageDirs: readonly string[];
}

/**
 * A single-executable application runs ONE script: esbuild folds the plugin's sources and its npm
 * dependencies into one ES module (ESM so the entry's top-level await stays as it is). client-node,
 * imported lazily for exec and auth-provider users only, is inlined too and still evaluated only then.
 */
export async function bundlePlugin(repoRoot: string): Promise<Bundle> {
  const result = await build({
    entryPoints: [path.join(repoRoot, 'src/cli/kubectl-usergroup.ts')],
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node26',
    // 4 MB instead of 19 (mostly client-node's generated API classes): the script is parsed at every start.
    // keepNames so class and function names in error messages and stack traces stay readable.
    minify: true,
    keepNames: true,
    legalComments: 'none', // the licences ship whole in THIRD-PARTY-NOTICES
    banner: { js: HERMETIC_REQUIRE },
    write: false,
    metafile: true,
    logLevel: 'warning',
  });
  const [output] = result.outputFiles;
  if (!output || result.outputFiles.length !== 1) throw new Error(`esbuild produced ${result.outputFiles.length} files, expected one`);
  return { code: output.text, packageDirs: packageDirs(repoRoot, Object.keys(result.metafile.inputs)) };
}

/**
 * The CommonJS packages inside an ES module bundle still call require() for Node's built-ins, and an
 * ES module has no require. This one serves built-ins only, as the SEA's own require does: the optional
 * packages some of them probe for (bufferutil, supports-color) are then absent, never picked up from a
 * node_modules that happens to sit next to the binary.
 */
const HERMETIC_REQUIRE = `const require = (id) => {
  const builtin = process.getBuiltinModule(id);
  if (builtin !== undefined) return builtin;
  throw Object.assign(new Error(\`Cannot find module '\${id}' (kubectl-usergroup bundles its packages)\`), { code: 'MODULE_NOT_FOUND' });
};`;

/** `node_modules/@scope/name/dist/x.js` → `<root>/node_modules/@scope/name`, the innermost package of each input. */
function packageDirs(repoRoot: string, inputs: readonly string[]): string[] {
  const dirs = new Set<string>();
  for (const input of inputs) {
    const at = input.lastIndexOf('node_modules/');
    if (at < 0) continue;
    const rest = input.slice(at + 'node_modules/'.length).split('/');
    const name = rest[0]?.startsWith('@') ? rest.slice(0, 2).join('/') : rest[0];
    if (name) dirs.add(path.resolve(repoRoot, input.slice(0, at), 'node_modules', name));
  }
  return [...dirs].sort();
}
