import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';
import { freePorts } from '../controlplane/controlplane.js';
import { httpGet } from '../http-get.js';
import type { ProcSample } from './proc.js';
import { WatchedChild } from './watched-child.js';
import { pollUntil } from './stats.js';

const MAIN = path.join(repoRoot, 'dist/cli/main.js');

export interface BenchControllerOptions {
  readonly kubeconfigPath: string;
  /** --namespaces; undefined: a cluster-wide watch (the sharded scale phase, where the replicas share namespaces out). */
  readonly namespace: string | undefined;
  /** The ClusterUserGroupService the controller uses by default (BenchCluster.connectTo). */
  readonly defaultService: string;
  readonly concurrency: number;
  readonly serviceQps: number;
  readonly logLevel: string;
  /** --scheduled-rotations-per-minute: the global cap the scheduled phase measures against. */
  readonly scheduledRotationsPerMinute: number;
  /** stdout and stderr of the controller go here (not through a pipe into the bench). */
  readonly logFile: string;
  readonly nodeOptions: string | undefined;
  readonly nodeFlags: readonly string[];
  /** Environment the image sets (Dockerfile ENV), given to the controller as the image would. */
  readonly imageEnv: Readonly<Record<string, string>>;
  /** One replica of several sharing the namespaces out (--shard-by-namespace); undefined: leader election off. */
  readonly shard?: ShardFlags | undefined;
  /** POD_NAME for the replica's Lease identity (it adds a random suffix): which shard a Lease is, at a glance. */
  readonly podName?: string | undefined;
}

/** What makes a bench controller one shard of several: its Lease's namespace and group. */
export interface ShardFlags {
  /** --leader-election-namespace: where each replica keeps its Lease (required outside a pod). */
  readonly leaseNamespace: string;
  /** --leader-election-id: the shard group, the label value of the replicas' Leases. */
  readonly group: string;
}

/**
 * The `run` flags the bench gives every controller (reported with the results). --min-token-age 1s lets the
 * scheduled phase use maxTokenAges of minutes (the default floor is 1h); it changes nothing for groups without
 * spec.rotation, which is every group outside that phase, so every controller gets it and none is restarted for it.
 */
export function controllerFlags(
  o: Pick<BenchControllerOptions, 'concurrency' | 'serviceQps' | 'logLevel' | 'scheduledRotationsPerMinute' | 'shard'>,
): string[] {
  return [
    '--concurrency',
    String(o.concurrency),
    '--service-qps',
    String(o.serviceQps),
    '--service-burst',
    String(o.serviceQps),
    // Sharding keeps a Lease per replica and cannot be combined with --leader-elect (not even =false: left out).
    ...(o.shard
      ? ['--shard-by-namespace', '--leader-election-namespace', o.shard.leaseNamespace, '--leader-election-id', o.shard.group]
      : ['--leader-elect=false']),
    '--log-level',
    o.logLevel,
    '--min-token-age',
    '1s',
    '--scheduled-rotations-per-minute',
    String(o.scheduledRotationsPerMinute),
  ];
}

/** Every controller this bench started, so an interrupted run can end them. */
export const spawnedControllers: BenchController[] = [];

/**
 * `node dist/cli/main.js run` as its own process, so its RSS and CPU are its own: metrics and health on free
 * loopback ports, leader election off, its default connection (a ClusterUserGroupService) pointing at the simulator.
 */
export class BenchController extends WatchedChild {
  /** Date.now() at the spawn. */
  readonly spawnedAt = Date.now();

  private constructor(
    child: ChildProcess,
    readonly pid: number,
    readonly metricsPort: number,
    readonly healthPort: number,
    logFile: string,
  ) {
    super(child, pid, logFile);
  }

  static async spawn(o: BenchControllerOptions): Promise<BenchController> {
    const [metricsPort = 0, healthPort = 0] = await freePorts(2);
    fs.mkdirSync(path.dirname(o.logFile), { recursive: true });
    const out = fs.openSync(o.logFile, 'a');
    const env: NodeJS.ProcessEnv = { ...process.env, ...o.imageEnv };
    if (o.nodeOptions) env['NODE_OPTIONS'] = o.nodeOptions;
    else delete env['NODE_OPTIONS'];
    if (o.podName) env['POD_NAME'] = o.podName;
    const child = spawn(
      process.execPath,
      [
        ...o.nodeFlags,
        MAIN,
        'run',
        '--kubeconfig',
        o.kubeconfigPath,
        ...(o.namespace !== undefined ? ['--namespaces', o.namespace] : []),
        '--default-service',
        o.defaultService,
        // The bench reads /metrics on loopback and counts the controller's apiserver requests: a TokenReview and a
        // SubjectAccessReview per scrape would be requests of its own making.
        '--metrics-addr',
        `127.0.0.1:${metricsPort}`,
        '--health-addr',
        `127.0.0.1:${healthPort}`,
        '--metrics-auth=false',
        ...controllerFlags(o),
      ],
      { env, stdio: ['ignore', out, out] },
    );
    fs.closeSync(out);
    if (child.pid === undefined) throw new Error('could not spawn the controller');
    const controller = new BenchController(child, child.pid, metricsPort, healthPort, o.logFile);
    spawnedControllers.push(controller);
    return controller;
  }

  sample(): ProcSample | undefined {
    return this.proc.sample();
  }

  /** When the controller logged `msg` first (pino's time field, Date.now() scale), if it did. */
  loggedAt(msg: string): number | undefined {
    let text: string;
    try {
      text = fs.readFileSync(this.logFile, 'utf8');
    } catch {
      return undefined;
    }
    const needle = `"msg":${JSON.stringify(msg)}`;
    const line = text.split('\n').find((l) => l.includes(needle));
    const time = line ? /"time":"([^"]+)"/.exec(line)?.[1] : undefined;
    const ms = time ? Date.parse(time) : NaN;
    return Number.isFinite(ms) ? ms : undefined;
  }

  /** Resolves when /readyz answers 200 (its caches are synced); fails if it exits first. */
  async waitReady(timeoutMs: number): Promise<void> {
    await pollUntil(
      'the controller to sync its caches (/readyz)',
      async () => {
        if (this.exited()) throw new Error(`the controller exited before it was ready:\n${this.logTail()}`);
        return (await httpGet(this.healthPort, '/readyz').catch(() => undefined))?.status === 200 ? true : undefined;
      },
      timeoutMs,
      50,
    );
  }

  async metrics(): Promise<PromSamples> {
    const res = await httpGet(this.metricsPort, '/metrics');
    if (res.status !== 200) throw new Error(`/metrics: HTTP ${res.status}`);
    return parsePrometheus(res.body);
  }

  /**
   * Asks for a heap snapshot (the controller must run with --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=dir)
   * and resolves with its file once written.
   */
  async heapSnapshot(dir: string, timeoutMs = 300_000): Promise<string> {
    const before = new Set(fs.readdirSync(dir));
    this.child.kill('SIGUSR2');
    let last = -1;
    return pollUntil(
      'the heap snapshot',
      () => {
        const file = fs.readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
        if (!file) return undefined;
        const size = fs.statSync(path.join(dir, file)).size;
        // Done when it ends like a snapshot (the strings array closes the JSON) and stopped growing.
        const done = size > 0 && size === last && tail(path.join(dir, file), size).trimEnd().endsWith(']}');
        last = size;
        return done ? path.join(dir, file) : undefined;
      },
      timeoutMs,
      1000,
    );
  }
}

/** The last bytes of a file. */
function tail(file: string, size: number, bytes = 64): string {
  const fd = fs.openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(Math.min(bytes, size));
    fs.readSync(fd, buffer, 0, buffer.length, size - buffer.length);
    return buffer.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** One sample line of the Prometheus text format. */
export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export class PromSamples {
  constructor(readonly samples: readonly PromSample[]) {}

  /** Sum of a metric's samples whose labels include `where`. */
  sum(name: string, where: Readonly<Record<string, string>> = {}): number {
    let total = 0;
    for (const s of this.samples) if (s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v)) total += s.value;
    return total;
  }

  /** Sums of a metric grouped by one label. */
  by(name: string, label: string): Record<string, number> {
    const out: Record<string, number> = {};
    for (const s of this.samples) if (s.name === name) out[s.labels[label] ?? ''] = (out[s.labels[label] ?? ''] ?? 0) + s.value;
    return out;
  }
}

/** Parses the Prometheus text exposition format (what prom-client writes). */
export function parsePrometheus(text: string): PromSamples {
  const samples: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1] ?? '', labels, value: Number(m[4]) });
  }
  return new PromSamples(samples);
}

/** Differences of a label-grouped counter between two scrapes (labels absent before count from 0). */
export function deltaBy(before: Readonly<Record<string, number>>, after: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}
