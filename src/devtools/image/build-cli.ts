import path from 'node:path';
import { repoRoot } from '../controlplane/binaries.js';
import { buildImage } from './build.js';

/** `npm run image -- OUT.tar [NAME]`: the image as an OCI layout tarball, built without a daemon (build.ts). */
const [out = 'usergroup-operator-image.tar', name = 'usergroup-operator.dev/local/usergroup-operator:dev'] = process.argv.slice(2);
const started = Date.now();
const built = await buildImage({ context: repoRoot, name, out: path.resolve(out), progress: (line) => process.stderr.write(`[image] ${line}\n`) });
process.stderr.write(`[image] ${built.name} → ${built.tarball} (${built.manifestDigest}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
process.stdout.write(`${built.tarball}\n`);
