import { LIMIT_MODES, type LimitMode } from './report.js';

/**
 * The phases `npm run bench` can run; memory and scaling are read from the cold runs (and the restarted controller).
 * peer compares with the Go reference operator when its checkout is there (skipped with a note when not). scale
 * (one replica over --scale-n groups, 100,000 by default: an hour or more) runs only when asked for, last.
 */
const PHASES = ['limit', 'cold', 'restart', 'steady', 'rotation', 'scheduled', 'memory', 'scaling', 'peer', 'scale'] as const;
export type Phase = (typeof PHASES)[number];
/** What runs without --phases: all but scale. */
const DEFAULT_PHASES: readonly Phase[] = PHASES.filter((p) => p !== 'scale');

export interface BenchOptions {
  /** Cold-convergence sizes (the limit runs at each too). */
  readonly sizes: readonly number[];
  /** UserGroups for restart, steady state, rotation and scheduled rotation (the "world"); default: the largest size. */
  readonly worldSize: number;
  readonly phases: readonly Phase[];
  /** Simulator latency per call. */
  readonly latencyMs: number;
  /** Controller --concurrency, and the limit script's service concurrency. */
  readonly concurrency: number;
  /** Controller --service-qps and --service-burst: high, so the token bucket does not dominate. */
  readonly serviceQps: number;
  /** Parallel server-side applies when creating UserGroups. */
  readonly applyParallelism: number;
  readonly steadyMinutes: number;
  readonly rotations: number;
  /** Every controller's --scheduled-rotations-per-minute (the cap the scheduled phase runs against). */
  readonly scheduledCap: number;
  /** Seconds from the scheduled phase's maxTokenAge patches to the common due time; 0: chosen from N and the cap. */
  readonly scheduledLeadS: number;
  /** Give up on one phase after this long (reported as failed). */
  readonly phaseTimeoutS: number;
  readonly controllerLogLevel: string;
  /** NODE_OPTIONS for the controller child (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"). */
  readonly controllerNodeOptions: string | undefined;
  /** Node flags before the entry point; undefined: the image's, from the Dockerfile's ENTRYPOINT. */
  readonly controllerNodeFlags: readonly string[] | undefined;
  /** Directory for latest.json / latest.md. */
  readonly outDir: string;
  readonly quick: boolean;
  /** Limit variants to run at each size (controller-pattern is a diagnostic). */
  readonly limitModes: readonly LimitMode[];
  /** Write a controller heap snapshot after each cold run and at the end (into the log directory). */
  readonly heapSnapshots: boolean;
  /** The Go reference operator's checkout (relative to the repository root unless absolute). */
  readonly peerDir: string;
  /** How long the peer phase watches each restarted operator. */
  readonly peerRestartS: number;
  /** The Go peer's Kubernetes client QPS and burst: high, so its client rate limiter does not dominate. */
  readonly peerQps: number;
  readonly peerBurst: number;
  /** UserGroups the scale phase runs one replica over. */
  readonly scaleN: number;
  /** The scale phase's steady window. */
  readonly scaleSteadyMinutes: number;
  /**
   * Controller replicas the scale phase runs (--shard-by-namespace when more than one, each with its own Lease).
   * 1: one replica, the case the single-replica scale targets are stated for (scale-report.ts).
   */
  readonly scaleShards: number;
  /** Namespaces the scale phase spreads its UserGroups over; undefined: 1 with one replica, 100 with several (scaleNamespaceCount). */
  readonly scaleNamespaces: number | undefined;
  /** etcd's --quota-backend-bytes in GiB; undefined: SCALE_ETCD_QUOTA_GIB with the scale phase, etcd's default (2) without. */
  readonly etcdQuotaGiB: number | undefined;
}

export const DEFAULTS: BenchOptions = {
  sizes: [1000, 3000, 10000],
  worldSize: 10000,
  phases: DEFAULT_PHASES,
  latencyMs: 20,
  concurrency: 16,
  serviceQps: 10000,
  applyParallelism: 16,
  steadyMinutes: 10,
  rotations: 100,
  // 10,000 due at once then take 100 s under the cap: long enough to see the pacing, short enough to run often.
  scheduledCap: 6000,
  scheduledLeadS: 0,
  phaseTimeoutS: 1800,
  controllerLogLevel: 'info',
  controllerNodeOptions: undefined,
  controllerNodeFlags: undefined,
  outDir: 'bench/results',
  quick: false,
  limitModes: ['minimal'],
  heapSnapshots: false,
  peerDir: '../shared/peer',
  peerRestartS: 60,
  // As the peer's README runs it at 10,000 (its own defaults are 200/400).
  peerQps: 2000,
  peerBurst: 4000,
  scaleN: 100_000,
  scaleSteadyMinutes: 3,
  scaleShards: 1,
  scaleNamespaces: undefined,
  etcdQuotaGiB: undefined,
};

/**
 * etcd's quota with the scale phase: 100,000 UserGroups, Secrets and UserGroupClaims, their Events and the history
 * kept between the apiserver's compactions (5 min) outgrow etcd's 2 GiB default. A limit, not an allocation.
 */
export const SCALE_ETCD_QUOTA_GIB = 8;
const GiB = 1024 ** 3;

/** etcd's --quota-backend-bytes for this run; undefined: etcd's own default. */
export function etcdQuotaBytes(o: Pick<BenchOptions, 'etcdQuotaGiB' | 'phases'>): number | undefined {
  const gib = o.etcdQuotaGiB ?? (o.phases.includes('scale') ? SCALE_ETCD_QUOTA_GIB : undefined);
  return gib === undefined ? undefined : Math.round(gib * GiB);
}

/** Namespaces with several replicas unless given: enough that rendezvous hashing shares them out evenly. */
export const SCALE_SHARDED_NAMESPACES = 100;

/** The scale phase's namespaces: --scale-namespaces, else 1 with one replica and SCALE_SHARDED_NAMESPACES with several. */
export function scaleNamespaceCount(o: Pick<BenchOptions, 'scaleShards' | 'scaleNamespaces'>): number {
  return o.scaleNamespaces ?? (o.scaleShards > 1 ? SCALE_SHARDED_NAMESPACES : 1);
}

/** Per group, what the scale phase allows each of its steps: several times the ~7 ms/group cold convergence of 10,000. */
const SCALE_TIMEOUT_MS_PER_GROUP = 60;

/** The scale phase's timeout per step: --phase-timeout-s, or longer for large N (100,000: 6,000 s). */
export function scaleTimeoutMs(o: Pick<BenchOptions, 'phaseTimeoutS' | 'scaleN'>): number {
  return Math.max(o.phaseTimeoutS * 1000, o.scaleN * SCALE_TIMEOUT_MS_PER_GROUP);
}

/** --quick: the whole bench in a couple of minutes, at small sizes. */
export const QUICK: Partial<BenchOptions> = { sizes: [200, 600], worldSize: 600, steadyMinutes: 0.5, phaseTimeoutS: 300, peerRestartS: 15 };

export const USAGE = `usage: npm run bench -- [options]

  --quick                 small sizes (200, 600), steady 0.5 min: a couple of minutes
  --n 1000,3000,10000     cold-convergence sizes; the limit runs at each
  --world-n N             UserGroups for restart, steady, rotation and scheduled (default: the largest --n)
  --phases a,b            of ${PHASES.join(', ')} (default all but scale)
  --latency-ms 20         simulator latency per call
  --concurrency 16        controller --concurrency = the limit script's service concurrency
  --service-qps 10000     controller --service-qps and --service-burst
  --apply-parallelism 16  parallel server-side applies creating UserGroups
  --steady-minutes 10     length of the idle steady-state window
  --rotations 100         rotations requested at once
  --scheduled-cap 6000    controller --scheduled-rotations-per-minute; the scheduled phase makes all N due at once
  --scheduled-lead-s 0    seconds from the scheduled phase's maxTokenAge patches to the due time (0: from N and the cap)
  --phase-timeout-s 1800  a phase still running after this is reported as failed (each step of the scale
                          phase gets at least 60 ms × --scale-n: 6,000 s at 100,000)
  --controller-log-level info
  --controller-node-options "--cpu-prof --cpu-prof-dir=/tmp/prof"   NODE_OPTIONS of the controller child
  --controller-node-flags "--max-semi-space-size=1"   node flags before the entry point (V8 flags NODE_OPTIONS
                          refuses); default: those of the image's ENTRYPOINT in the Dockerfile
  --limit-modes minimal   diagnostics besides minimal (the ratio's): controller-pattern = the loop plus the
                          controller's Secret GET and Event POST per group; concurrent-creation = the loop
                          while the UserGroups are applied as in the cold phase (e.g. minimal,concurrent-creation)
  --heap-snapshots        controller heap snapshots after each cold run and at the end, and in the scale phase after
                          the steady window (in the log directory)
  --peer-dir ../shared/peer   the Go reference operator (peer phase, at the largest --n; skipped when absent)
  --peer-restart-s 60     how long the peer phase watches each restarted operator
  --peer-qps 2000 --peer-burst 4000   the Go peer's Kubernetes client QPS and burst
  --scale-n 100000        scale phase: UserGroups on one replica (cold convergence, restart, steady window,
                          rotations; writes scale.md and scale.json, and not latest.* when it runs alone)
  --scale-steady-minutes 3   the scale phase's steady window
  --scale-shards 1        scale phase: controller replicas; more than 1 runs them with --shard-by-namespace (a Lease
                          each, namespaces shared out) and reports each shard's figures against the targets
  --scale-namespaces M    namespaces the --scale-n UserGroups are spread over evenly (default 1 with one replica,
                          ${SCALE_SHARDED_NAMESPACES} with several); at most --scale-n
  --etcd-quota-gib N      etcd's --quota-backend-bytes (default ${SCALE_ETCD_QUOTA_GIB} with the scale phase, etcd's 2 without)
  --out bench/results     where latest.json and latest.md go (and scale.md, scale.json)
`;

export type ParsedOptions = { readonly ok: true; readonly options: BenchOptions } | { readonly ok: false; readonly error: string } | { readonly ok: 'help' };

/** Parses the bench's argv (after `--`). Pure. */
export function parseBenchOptions(argv: readonly string[]): ParsedOptions {
  const given = new Map<string, string>();
  let quick = false;
  let heapSnapshots = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') return { ok: 'help' };
    if (arg === '--quick') {
      quick = true;
      continue;
    }
    if (arg === '--heap-snapshots') {
      heapSnapshots = true;
      continue;
    }
    if (!arg.startsWith('--')) return { ok: false, error: `unexpected argument "${arg}"` };
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const value = eq < 0 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined) return { ok: false, error: `--${name} needs a value` };
    given.set(name, value);
  }
  const base: BenchOptions = { ...DEFAULTS, ...(quick ? QUICK : {}), quick };
  const errors: string[] = [];
  const positiveInt = (name: string, fallback: number): number => {
    const raw = given.get(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) errors.push(`--${name}: "${raw}" is not a whole number ≥ 1`);
    return n;
  };
  const nonNegative = (name: string, fallback: number): number => {
    const raw = given.get(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n < 0) errors.push(`--${name}: "${raw}" is not a number ≥ 0`);
    return n;
  };
  const positive = (name: string): number => {
    const raw = given.get(name) ?? '';
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) errors.push(`--${name}: "${raw}" is not a number > 0`);
    return n;
  };
  let sizes = base.sizes;
  const rawSizes = given.get('n');
  if (rawSizes !== undefined) {
    sizes = rawSizes.split(',').map((s) => Number(s.trim()));
    if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < 1)) errors.push(`--n: "${rawSizes}" is not a list of whole numbers ≥ 1`);
    sizes = [...new Set(sizes)].sort((a, b) => a - b);
  }
  let phases: readonly Phase[] = base.phases;
  const rawPhases = given.get('phases');
  if (rawPhases !== undefined) {
    const names = rawPhases
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = names.filter((n) => !(PHASES as readonly string[]).includes(n));
    if (unknown.length > 0 || names.length === 0) errors.push(`--phases: unknown ${unknown.join(', ') || '(empty)'}; choose from ${PHASES.join(', ')}`);
    phases = PHASES.filter((p) => names.includes(p));
  }
  let limitModes = base.limitModes;
  const rawModes = given.get('limit-modes');
  if (rawModes !== undefined) {
    const modes = rawModes.split(',').map((m) => m.trim());
    if (modes.some((m) => !(LIMIT_MODES as readonly string[]).includes(m)))
      errors.push(`--limit-modes: "${rawModes}" is not a list of ${LIMIT_MODES.join(', ')}`);
    limitModes = LIMIT_MODES.filter((m) => modes.includes(m));
  }
  const known = new Set([
    'limit-modes',
    'n',
    'world-n',
    'phases',
    'latency-ms',
    'concurrency',
    'service-qps',
    'apply-parallelism',
    'steady-minutes',
    'rotations',
    'scheduled-cap',
    'scheduled-lead-s',
    'phase-timeout-s',
    'controller-log-level',
    'controller-node-options',
    'controller-node-flags',
    'out',
    'peer-dir',
    'peer-restart-s',
    'peer-qps',
    'peer-burst',
    'scale-n',
    'scale-steady-minutes',
    'scale-shards',
    'scale-namespaces',
    'etcd-quota-gib',
  ]);
  for (const name of given.keys()) if (!known.has(name)) errors.push(`unknown option --${name}`);
  const options: BenchOptions = {
    ...base,
    sizes,
    worldSize: positiveInt('world-n', rawSizes !== undefined ? Math.max(...sizes) : base.worldSize),
    phases,
    latencyMs: nonNegative('latency-ms', base.latencyMs),
    concurrency: positiveInt('concurrency', base.concurrency),
    serviceQps: positiveInt('service-qps', base.serviceQps),
    applyParallelism: positiveInt('apply-parallelism', base.applyParallelism),
    steadyMinutes: nonNegative('steady-minutes', base.steadyMinutes),
    rotations: positiveInt('rotations', base.rotations),
    scheduledCap: positiveInt('scheduled-cap', base.scheduledCap),
    scheduledLeadS: nonNegative('scheduled-lead-s', base.scheduledLeadS),
    phaseTimeoutS: positiveInt('phase-timeout-s', base.phaseTimeoutS),
    controllerLogLevel: given.get('controller-log-level') ?? base.controllerLogLevel,
    controllerNodeOptions: given.get('controller-node-options') ?? base.controllerNodeOptions,
    controllerNodeFlags: given.get('controller-node-flags')?.split(/\s+/).filter(Boolean) ?? base.controllerNodeFlags,
    outDir: given.get('out') ?? base.outDir,
    limitModes,
    heapSnapshots,
    peerDir: given.get('peer-dir') ?? base.peerDir,
    peerRestartS: nonNegative('peer-restart-s', base.peerRestartS),
    peerQps: positiveInt('peer-qps', base.peerQps),
    peerBurst: positiveInt('peer-burst', base.peerBurst),
    scaleN: positiveInt('scale-n', base.scaleN),
    scaleSteadyMinutes: nonNegative('scale-steady-minutes', base.scaleSteadyMinutes),
    scaleShards: positiveInt('scale-shards', base.scaleShards),
    scaleNamespaces: given.has('scale-namespaces') ? positiveInt('scale-namespaces', 1) : base.scaleNamespaces,
    etcdQuotaGiB: given.has('etcd-quota-gib') ? positive('etcd-quota-gib') : base.etcdQuotaGiB,
  };
  // Each namespace gets at least one UserGroup, so that every one has a share to converge.
  if (errors.length === 0 && scaleNamespaceCount(options) > options.scaleN)
    errors.push(
      `--scale-namespaces: ${scaleNamespaceCount(options)} namespaces for ${options.scaleN} UserGroups (--scale-n); give at most as many namespaces as groups`,
    );
  if (errors.length > 0) return { ok: false, error: errors.join('\n') };
  return { ok: true, options };
}
