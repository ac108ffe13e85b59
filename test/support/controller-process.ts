import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './repo-root.js';
import { eventually } from './kube.js';

/** `usergroup-operator run` as built by `npm run build` (npm test builds dist first). */
export const MAIN = path.join(repoRoot, 'dist/cli/main.js');

/** One stdout line of a controller process. */
export interface LogEntry {
  /** When the test process received the line (Date.now()). */
  readonly at: number;
  readonly text: string;
  /** The line parsed as JSON (pino), or undefined when it is not JSON. */
  readonly json: Record<string, unknown> | undefined;
}

export interface ControllerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** When the test process saw the exit (Date.now()). */
  readonly at: number;
}

/** A controller child process whose logs, exit code and signal stay visible to the test. */
export interface ControllerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** stdout lines (pino JSON), with their arrival time. */
  readonly logs: LogEntry[];
  readonly stderr: string[];
  /** Every stdout and stderr line as text, in the order they arrived. */
  readonly output: string[];
  readonly exit: Promise<ControllerExit>;
  exited(): boolean;
  /** The identity it campaigns with (from "waiting to become leader"), when leader election is on. */
  identity(): string | undefined;
}

export interface SpawnControllerOptions {
  readonly kubeconfigPath: string;
  /** Passed as --namespaces (one namespace, or a comma-separated list). */
  readonly namespace: string;
  /** --default-service: the ClusterUserGroupService for UserGroups without spec.serviceRef. */
  readonly defaultService?: string;
  /** Extra `run` flags, after the defaults (so they override them). */
  readonly args?: readonly string[];
  /** Node flags before the entry point (e.g. the image's, and a heap limit). */
  readonly nodeFlags?: readonly string[];
  /** Extra environment (e.g. the image's). */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * The tests' UserGroupServices point at simulators on loopback over http: the egress policy must allow
 * that explicitly (the product's default allows no host). A test about the policy passes its own flags
 * after these; the last one wins.
 */
export const TEST_EGRESS_ARGS = ['--allowed-service-hosts', '127.0.0.1,localhost', '--allow-http-services'] as const;

/**
 * The per-namespace request budgets out of the way: the reliability scenarios request many rotations in one namespace
 * on purpose (to crash, fail over and fault them mid-rotation), which the default budget (10 at once, then 10 a
 * minute) would spread over minutes. What the budgets do is test/integration/request-budgets*.test.ts's to show.
 */
export const UNBUDGETED_ARGS = [
  '--rotation-request-burst',
  '100000',
  '--rotation-requests-per-minute',
  '60000',
  '--sync-request-burst',
  '100000',
  '--sync-requests-per-minute',
  '60000',
] as const;

/** Every controller process spawned by this test file, for killAllControllers. */
const spawned: ControllerProcess[] = [];

/**
 * `node dist/cli/main.js run --kubeconfig … --namespaces <ns> [--default-service <name>] --metrics-addr 0 --health-addr 0
 * --log-level debug …args`. It does not wait for anything: use waitLog for the line the test needs.
 */
export function spawnController(options: SpawnControllerOptions): ControllerProcess {
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeFlags ?? []),
      MAIN,
      'run',
      '--kubeconfig',
      options.kubeconfigPath,
      '--namespaces',
      options.namespace,
      ...(options.defaultService ? ['--default-service', options.defaultService] : []),
      '--metrics-addr',
      '0',
      '--health-addr',
      '0',
      '--log-level',
      'debug',
      ...TEST_EGRESS_ARGS,
      ...(options.args ?? []),
    ],
    {
      env: { ...process.env, ...(options.env ?? {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  if (child.pid === undefined) throw new Error('could not spawn the controller');
  const logs: LogEntry[] = [];
  const stderr: string[] = [];
  const output: string[] = [];
  const lineReader = (sink: (line: string) => void) => {
    let buffered = '';
    return (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (!line) continue;
        output.push(line);
        sink(line);
      }
    };
  };
  child.stdout.on(
    'data',
    lineReader((text) => {
      let json: Record<string, unknown> | undefined;
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        json = undefined;
      }
      logs.push({ at: Date.now(), text, json });
    }),
  );
  child.stderr.on(
    'data',
    lineReader((line) => stderr.push(line)),
  );
  const exit = new Promise<ControllerExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
  const controller: ControllerProcess = {
    child,
    pid: child.pid,
    logs,
    stderr,
    output,
    exit,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    identity: () => logs.find((l) => l.json?.['msg'] === 'waiting to become leader')?.json?.['identity'] as string | undefined,
  };
  spawned.push(controller);
  return controller;
}

/** Waits for a stdout line that matches (from index `from` on); fails early with the logs if the process exits. */
export async function waitLog(c: ControllerProcess, what: string, match: (entry: LogEntry) => boolean, timeoutMs = 30_000, from = 0): Promise<LogEntry> {
  return eventually(
    `log line "${what}" (pid ${c.pid})`,
    async () => {
      const found = c.logs.slice(from).find(match);
      if (found) return found;
      if (c.exited())
        throw new Error(
          `controller ${c.pid} exited: ${c.stderr.join('\n')}\n${c.logs
            .slice(-20)
            .map((l) => l.text)
            .join('\n')}`,
        );
      return undefined;
    },
    timeoutMs,
    50,
  );
}

export const msgIs =
  (msg: string) =>
  (e: LogEntry): boolean =>
    e.json?.['msg'] === msg;
export const msgMatches =
  (re: RegExp) =>
  (e: LogEntry): boolean =>
    typeof e.json?.['msg'] === 'string' && re.test(e.json['msg']);

/**
 * Sends `signal` and waits for the exit; nothing when it has exited already. A SIGSTOPped process is
 * sent SIGCONT first, so that it can act on the signal.
 */
export async function signalAndWait(c: ControllerProcess, signal: NodeJS.Signals): Promise<void> {
  if (c.exited()) return;
  try {
    process.kill(c.pid, 'SIGCONT');
  } catch {
    // already gone
  }
  c.child.kill(signal);
  await c.exit;
}

/** SIGCONT, then SIGKILL, every controller process of this file still running (for afterAll). */
export async function killAllControllers(): Promise<void> {
  for (const c of spawned) await signalAndWait(c, 'SIGKILL');
}
