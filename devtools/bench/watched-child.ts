import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { ProcWatcher } from './proc.js';

/** An operator the bench spawned (ours or the Go peer), watched through /proc: its exit, its log, a graceful stop. */
export class WatchedChild {
  private exitedFlag = false;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly proc: ProcWatcher;

  protected constructor(
    readonly child: ChildProcess,
    pid: number,
    readonly logFile: string,
  ) {
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exitedFlag = true;
        resolve({ code, signal });
      }),
    );
    this.proc = new ProcWatcher(pid, 1000);
  }

  exited(): boolean {
    return this.exitedFlag;
  }

  /** The last lines of its log, for error messages. */
  logTail(lines = 15): string {
    try {
      return fs.readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** SIGTERM and wait for the exit (SIGKILL after `graceMs`); the last /proc reading stays in `proc.latest`. */
  async stop(graceMs = 30_000): Promise<void> {
    this.proc.sample();
    this.proc.stop();
    if (this.exited()) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exit;
    clearTimeout(timer);
  }
}
