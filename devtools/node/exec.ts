import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RunOptions {
  readonly timeoutMs?: number;
  /** Written to the command's stdin. */
  readonly input?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

/** Runs a command to completion; resolves with its stdout, rejects with its stderr in the message. */
export function run(bin: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      args,
      { timeout: options.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024, env: options.env ?? process.env, cwd: options.cwd, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${bin} ${args.join(' ')} failed: ${stderr.trim() || err.message}`, { cause: err }));
        else resolve(stdout);
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** Thrown by a waitFor probe to stop waiting at once (a daemon exited, say). */
export class GiveUp extends Error {}

/** Polls `probe` until it returns a value other than undefined (errors count as not yet, but GiveUp); throws with `describe()` after the timeout. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, describe?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last = err;
    }
    if (Date.now() > deadline) {
      const why = last instanceof Error ? `; last error: ${last.message}` : '';
      throw new Error(`${what}: not after ${timeoutMs} ms${why}${describe ? `\n${describe()}` : ''}`);
    }
    await sleep(250);
  }
}
