// `npm run manifests`: regenerates deploy/kubernetes/base/{crds,install}.yaml from the chart (a test fails when they are stale).
import fs from 'node:fs';
import path from 'node:path';
import { ensureBinaries } from './controlplane/binaries.js';
import { MANIFESTS_DIR, renderManifests } from './manifests.js';

const rendered = await renderManifests(ensureBinaries().helm);
for (const [file, content] of rendered) {
  fs.writeFileSync(path.join(MANIFESTS_DIR, file), content);
  process.stdout.write(`wrote ${path.relative(process.cwd(), path.join(MANIFESTS_DIR, file))}\n`);
}
