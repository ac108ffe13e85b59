import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../support/repo-root.js';
import { buildGoTool } from '../../../devtools/go-tool.js';
import { NODE_ADDRESS } from '../../../devtools/node/layout.js';
import { release } from '../../../devtools/release/release.js';
import { E2E_REGISTRY } from './release.js';

// `tsx test/e2e/support/release-cli.ts DIR`: this tree's release, as `npm run release` makes it, for
// test/e2e/release.test.ts. Made before the run enters the node's namespaces (the image's build stage runs npm ci,
// its bases come from Debian and npm: network the node has not), for the registry the test starts on the node's
// address, and signed with a key pair made for this run (cosign generate-key-pair; its password never leaves here).
const [dir = 'ugo-e2e-release'] = process.argv.slice(2);
const out = path.resolve(dir);
fs.rmSync(out, { recursive: true, force: true });
const keys = fs.mkdtempSync(path.join(path.dirname(out), 'ugo-e2e-release-key-'));
try {
  const password = randomBytes(16).toString('hex');
  const cosign = buildGoTool('cosign', 'devtools/cosign/build.sh');
  execFileSync(cosign, ['generate-key-pair'], { cwd: keys, env: { ...process.env, COSIGN_PASSWORD: password }, stdio: ['ignore', 'ignore', 'inherit'] });
  const version = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
  const started = Date.now();
  await release({
    version,
    outDir: out,
    registry: `${NODE_ADDRESS}:${E2E_REGISTRY.port}`,
    signing: { key: path.join(keys, 'cosign.key'), password },
    progress: (line) => process.stderr.write(`[release] ${line}\n`),
  });
  process.stderr.write(`[release] ${version} in ${out}, ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  process.stdout.write(`${out}\n`);
} finally {
  fs.rmSync(keys, { recursive: true, force: true });
}
