import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A long-running server binary whose output goes to a log file. Each runs in its
 * own process group so a Ctrl-C aimed at the test runner does not kill it before
 * the harness can stop it in order.
 */
export class ManagedProcess {
  private child: ChildProcess | undefined;
  private exit: Promise<number | null> | undefined;

  constructor(
    readonly name: string,
    private readonly bin: string,
    private readonly args: readonly string[],
    readonly logFile: string,
    private readonly watchdog: Watchdog,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child?.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.running) throw new Error(`${this.name} is already running`);
    const log = fs.openSync(this.logFile, 'a');
    const child = spawn(this.bin, this.args, { stdio: ['ignore', log, log], detached: true });
    fs.closeSync(log);
    this.child = child;
    this.exit = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    child.once('error', () => undefined);
    if (child.pid !== undefined) this.watchdog.track(child.pid);
    // The harness must never keep the test runner alive on its own.
    child.unref();
  }

  /** SIGTERM, then SIGKILL after the grace period. */
  async stop(graceMs = 10_000): Promise<void> {
    const child = this.child;
    if (!child || !this.running || child.pid === undefined) return;
    const exited = this.exit ?? Promise.resolve(null);
    signalGroup(child.pid, 'SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      signalGroup(child.pid, 'SIGKILL');
      await exited;
    }
  }

  kill(): void {
    if (this.child?.pid !== undefined && this.running) signalGroup(this.child.pid, 'SIGKILL');
  }

  /** Resolves when the process exits; used to fail fast while waiting for readiness. */
  exited(): Promise<number | null> {
    return this.exit ?? Promise.resolve(null);
  }

  logTail(lines = 40): string {
    try {
      return fs.readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * A detached shell that holds the read end of a pipe from this process. When this
 * process dies by any means (a failed test run, Ctrl-C, SIGKILL), the pipe closes
 * and the watchdog kills every tracked process group and removes the work dir, so
 * no etcd or apiserver outlives the run. A clean stop disarms it first.
 */
export class Watchdog {
  private readonly child: ChildProcess;

  constructor(workDir: string) {
    const script = [
      'pids=()',
      'while read -r pid; do pids+=("$pid"); done',
      'for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done',
      'sleep 3',
      'for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done',
      'rm -rf -- "$1"',
    ].join('\n');
    this.child = spawn('bash', ['-c', script, 'watchdog', workDir], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    this.child.unref();
    const stdin = this.child.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null;
    stdin?.unref?.();
  }

  track(pid: number): void {
    this.child.stdin?.write(`${pid}\n`);
  }

  disarm(): void {
    try {
      if (this.child.pid !== undefined) process.kill(this.child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}
