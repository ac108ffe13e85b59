import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../controlplane/binaries.js';
import { run } from './exec.js';

/** The operator image's name in the node's containerd; the chart's image.repository and image.tag. */
export const OPERATOR_IMAGE = { repository: 'usergroup-operator.dev/e2e/usergroup-operator', tag: 'dev' } as const;

const scripts = path.join(repoRoot, 'devtools/node');

/**
 * Debian's static busybox as two OCI image layouts (devtools/node/busybox-image.sh): busybox:1 and the CRI
 * sandbox image pause:1. Returns the two tarballs.
 */
export async function buildBaseImages(dir: string): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  await run('bash', [path.join(scripts, 'busybox-image.sh'), dir], { timeoutMs: 120_000 });
  return [path.join(dir, 'busybox.tar'), path.join(dir, 'pause.tar')];
}

/**
 * The operator packed without Docker (devtools/node/operator-image.sh: npm run build, the pinned Node binary
 * with its shared libraries, /app with the production packages; ENTRYPOINT, CMD and ENV from the Dockerfile,
 * user 65532). A stand-in for the distroless image until the Dockerfile's stages can be built here.
 */
export async function buildOperatorImage(out: string, tag: string = OPERATOR_IMAGE.tag): Promise<string> {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const env = { ...process.env, PATH: `${path.join(repoRoot, 'node_modules/node/bin')}:${process.env['PATH'] ?? ''}` };
  await run('bash', [path.join(scripts, 'operator-image.sh'), out, `${OPERATOR_IMAGE.repository}:${tag}`], { timeoutMs: 600_000, env, cwd: repoRoot });
  return out;
}
