import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** One reading of a process from /proc (Linux). */
export interface ProcSample {
  /** Resident set size now, bytes. */
  readonly rssBytes: number;
  /** Peak resident set size so far (VmHWM), bytes. */
  readonly peakRssBytes: number;
  /** utime + stime, seconds. */
  readonly cpuSeconds: number;
}

let clockTicks: number | undefined;

/** Clock ticks per second of /proc/<pid>/stat (getconf CLK_TCK; 100 on every usual Linux). */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** VmRSS / VmHWM lines of /proc/<pid>/status, in bytes. */
export function parseStatusMemory(status: string): { rssBytes: number; peakRssBytes: number } {
  const kb = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
    return m ? Number(m[1]) * 1024 : NaN;
  };
  return { rssBytes: kb('VmRSS'), peakRssBytes: kb('VmHWM') };
}

/** utime + stime (fields 14 and 15) of /proc/<pid>/stat, in ticks; the command name may hold spaces and parentheses. */
export function parseStatTicks(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state), so field n is fields[n - 3].
  return Number(fields[11]) + Number(fields[12]);
}

/** Reads a live process; undefined once it has exited. */
function sampleProcess(pid: number): ProcSample | undefined {
  try {
    const memory = parseStatusMemory(readFileSync(`/proc/${pid}/status`, 'utf8'));
    const ticks = parseStatTicks(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    return { ...memory, cpuSeconds: ticks / ticksPerSecond() };
  } catch {
    return undefined;
  }
}

/**
 * Keeps the last reading of a process, refreshed every `intervalMs`, so its peak RSS and CPU time are known
 * even after it exits (the kernel's VmHWM is gone with the process).
 */
export class ProcWatcher {
  private last: ProcSample | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly pid: number,
    intervalMs = 1000,
  ) {
    this.last = sampleProcess(pid);
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  sample(): ProcSample | undefined {
    const s = sampleProcess(this.pid);
    if (s) this.last = s;
    return this.last;
  }

  get latest(): ProcSample | undefined {
    return this.last;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

export const MiB = 1024 * 1024;
