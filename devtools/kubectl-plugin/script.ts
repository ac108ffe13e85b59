/**
 * The plugin for macOS: the esbuild bundle as a script the Node on the user's PATH runs, for where no single
 * executable is made (platforms.ts says why). Its files, beside LICENSE and THIRD-PARTY-NOTICES.
 */

/** The oldest Node it runs on: package.json's engines, the bundle's esbuild target and the Node it is tested with. */
export const NODE_MAJOR = 26;

/**
 * `#!/usr/bin/env node`, a version check, then the bundle. The check comes first in the module body, so an
 * older Node says what is wrong instead of failing somewhere in the plugin (it runs after the imports of
 * Node's built-ins are linked; a Node too old for those, before 20, fails there with its own message).
 */
export function pluginScript(bundleCode: string): string {
  // The entry's own `#!/usr/bin/env node` line, which esbuild keeps on top.
  const shebang = '#!/usr/bin/env node\n';
  if (!bundleCode.startsWith(shebang)) throw new Error(`the bundle does not start with ${JSON.stringify(shebang)}`);
  const check =
    `if (Number(process.versions.node.split('.')[0]) < ${NODE_MAJOR}) {\n` +
    `  process.stderr.write(\`kubectl-usergroup needs Node.js ${NODE_MAJOR} or newer on PATH; this is \${process.version} (\${process.execPath}). See the README beside it.\\n\`);\n` +
    `  process.exit(1);\n` +
    `}\n`;
  return shebang + check + bundleCode.slice(shebang.length);
}

/**
 * Next to the script: a file with no extension is an ES module for Node only by syntax detection, which a
 * package.json further up (`"type": "commonjs"` in a home directory, say) turns off, and which parses the
 * 4 MB twice. Node looks for package.json from the script's real path, krew's store directory (krew links
 * only the script into its bin/), so this one decides.
 */
export const PACKAGE_JSON = `${JSON.stringify({ type: 'module', private: true }, null, 2)}\n`;

export function readme(platform: string): string {
  return `kubectl-usergroup for ${platform}

This is kubectl-usergroup as one JavaScript file, run by the Node.js on your PATH: it needs
Node.js ${NODE_MAJOR} or newer (\`node --version\`), for example from Homebrew:

    brew install node

Why not one self-contained executable, as on Linux: the Linux executable has Node.js built in,
made from the official Node.js build for the platform. For macOS that would need the official
build for each Mac architecture (the one for Apple silicon is not published where the release
takes Node.js from) and an executable that macOS accepts after the plugin is put into it
(it has to be signed again); neither can be made and tested where the release is built.

Installed with krew (\`kubectl krew install usergroup\`) nothing else is needed. By hand: put
kubectl-usergroup and package.json (it tells Node.js the file is an ES module) in one directory,
and that directory, or a symbolic link to kubectl-usergroup, on your PATH. Then:

    kubectl usergroup --help

LICENSE is the plugin's licence, THIRD-PARTY-NOTICES those of the npm packages bundled into it.
`;
}
