/*
 * `npm run build`'s last step, after tsc: node dist/devtools/build/bundle-cli.js
 * Bundles the controller's entry point into dist/cli/main.js (see controller-bundle.ts).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleController } from './controller-bundle.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const metafile = await bundleController(repoRoot);
const inputs = Object.keys(metafile.inputs).length;
const bytes = Object.values(metafile.outputs).reduce((sum, o) => sum + (o.entryPoint ? o.bytes : 0), 0);
process.stdout.write(`dist/cli/main.js: ${inputs} modules in one, ${(bytes / 1024).toFixed(0)} KiB\n`);
