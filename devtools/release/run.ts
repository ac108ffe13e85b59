import { spawn } from 'node:child_process';

/**
 * Runs a release tool and resolves with its stdout (crane and helm print digests there). Fails with the tool's
 * stderr; the caller's environment is passed on with `env` added (COSIGN_PASSWORD, never on the command line).
 */
export function run(cmd: string, args: readonly string[], options: { readonly env?: Record<string, string>; readonly cwd?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${cmd.split('/').pop() ?? cmd} ${args.join(' ')}: exit ${String(code)}\n${stderr.trim().split('\n').slice(-10).join('\n')}`));
    });
  });
}

/**
 * `helm push <tgz> oci://<repository's parent>`: the chart's manifest digest, as helm prints it (the same .tgz gives
 * the same digest in any registry, which is what lets the release sign it before it is published).
 */
export async function helmPush(helm: string, tgz: string, repository: string, plainHttp: boolean): Promise<string> {
  const out = await run(helm, ['push', tgz, `oci://${repository.slice(0, repository.lastIndexOf('/'))}`, ...(plainHttp ? ['--plain-http'] : [])]);
  const digest = /Digest: (sha256:[a-f0-9]{64})/.exec(out)?.[1];
  if (!digest) throw new Error(`helm push printed no digest: ${out}`);
  return digest;
}
