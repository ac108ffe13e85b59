import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../support/repo-root.js';
import { buildImage } from '../../../devtools/image/build.js';
import { extractPreviousRelease, PREVIOUS_OPERATOR_IMAGE, PREVIOUS_RELEASE } from './previous-release.js';

// `tsx test/e2e/support/previous-release-image-cli.ts OUT.tar`: the previous release's operator image, built like
// this tree's (devtools/image) from that release's own source: its Dockerfile's stages, its package-lock (npm ci
// from the npm cache this tree's build has just filled: the two locks differ only in the version), its tsc build.
// The Node of the build stage and the base is this tree's pinned one, checked to be the pin of that release too.
const [out = 'usergroup-operator-previous.tar'] = process.argv.slice(2);
const started = Date.now();
const say = (line: string): void => void process.stderr.write(`[image ${PREVIOUS_RELEASE.version}] ${line}\n`);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-previous-release-'));
try {
  const context = extractPreviousRelease(path.join(work, 'src'));
  say(`${PREVIOUS_RELEASE.commit} extracted into ${context} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const pinOf = (dir: string): string | undefined =>
    (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> }).devDependencies?.['node'];
  if (pinOf(context) !== pinOf(repoRoot)) {
    throw new Error(
      `release ${PREVIOUS_RELEASE.version} pins Node ${pinOf(context) ?? '?'}, this tree ${pinOf(repoRoot) ?? '?'}: its image needs its own Node`,
    );
  }
  const name = `${PREVIOUS_OPERATOR_IMAGE.repository}:${PREVIOUS_OPERATOR_IMAGE.tag}`;
  const built = await buildImage({ context, name, out: path.resolve(out), node: path.join(repoRoot, 'node_modules/node/bin/node'), progress: say });
  say(`${built.name} → ${built.tarball} (${built.manifestDigest}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  process.stdout.write(`${built.tarball}\n`);
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
