import { LOG_LEVELS, type LogLevel } from '../observability/log.js';

/** The controller's configuration, parsed and validated once at start. */
export interface RunConfig {
  readonly kubeconfig: string | undefined;
  readonly serviceUrl: string | undefined;
  readonly apiKeyFile: string | undefined;
  readonly allowInsecureService: boolean;
  readonly namespaces: readonly string[];
  readonly concurrency: number;
  readonly resyncPeriodMs: number;
  readonly serviceQps: number;
  readonly serviceBurst: number;
  readonly serviceTimeoutMs: number;
  readonly leaderElect: boolean;
  readonly leaderElectionNamespace: string | undefined;
  readonly leaderElectionId: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly metricsAddr: string;
  readonly healthAddr: string;
  readonly logLevel: LogLevel;
  readonly shutdownGracePeriodMs: number;
  readonly watchInactivityTimeoutMs: number | undefined;
}

type Kind = 'string' | 'boolean' | 'int' | 'number' | 'duration' | 'list' | 'address' | 'level';

interface FlagSpec {
  readonly flag: string;
  readonly env: string;
  readonly kind: Kind;
  readonly def: string | undefined;
  readonly help: string;
  readonly min?: number;
}

/** One table drives parsing, env fallbacks, validation and --help, so they cannot disagree. */
export const FLAGS = {
  kubeconfig: { flag: 'kubeconfig', env: 'KUBECONFIG', kind: 'string', def: undefined, help: 'kubeconfig file; default: in-cluster config, then ~/.kube/config' },
  serviceUrl: { flag: 'service-url', env: 'USERGROUP_SERVICE_URL', kind: 'string', def: undefined, help: 'base URL of the service for the default connection (https unless loopback)' },
  apiKeyFile: { flag: 'api-key-file', env: 'USERGROUP_API_KEY_FILE', kind: 'string', def: undefined, help: 'file holding the API key of the default connection (or set USERGROUP_API_KEY)' },
  allowInsecureService: { flag: 'allow-insecure-service', env: 'USERGROUP_ALLOW_INSECURE_SERVICE', kind: 'boolean', def: 'false', help: 'allow a plain-http default service URL that is not loopback' },
  namespaces: { flag: 'namespaces', env: 'USERGROUP_NAMESPACES', kind: 'list', def: '', help: 'comma-separated namespaces to watch; empty = all (also how to shard)' },
  concurrency: { flag: 'concurrency', env: 'USERGROUP_CONCURRENCY', kind: 'int', def: '4', help: 'reconcile workers', min: 1 },
  resyncPeriod: { flag: 'resync-period', env: 'USERGROUP_RESYNC_PERIOD', kind: 'duration', def: '10h', help: 're-PUT every group this often (+ up to 10% jitter) to repair drift made outside the cluster', min: 1000 },
  serviceQps: { flag: 'service-qps', env: 'USERGROUP_SERVICE_QPS', kind: 'number', def: '10', help: 'sustained calls per second toward one service account', min: 0.001 },
  serviceBurst: { flag: 'service-burst', env: 'USERGROUP_SERVICE_BURST', kind: 'int', def: '20', help: 'burst of calls toward one service account', min: 1 },
  serviceTimeout: { flag: 'service-timeout', env: 'USERGROUP_SERVICE_TIMEOUT', kind: 'duration', def: '10s', help: 'timeout of one service call, body included', min: 1 },
  leaderElect: { flag: 'leader-elect', env: 'USERGROUP_LEADER_ELECT', kind: 'boolean', def: 'false', help: 'elect a leader through a coordination.k8s.io Lease; only the leader reconciles' },
  leaderElectionNamespace: { flag: 'leader-election-namespace', env: 'USERGROUP_LEADER_ELECTION_NAMESPACE', kind: 'string', def: undefined, help: 'namespace of the Lease; default: the pod namespace' },
  leaderElectionId: { flag: 'leader-election-id', env: 'USERGROUP_LEADER_ELECTION_ID', kind: 'string', def: 'usergroup-operator', help: 'name of the Lease' },
  leaseDuration: { flag: 'lease-duration', env: 'USERGROUP_LEASE_DURATION', kind: 'duration', def: '15s', help: 'how long a standby waits before taking over an unrenewed Lease', min: 1000 },
  renewDeadline: { flag: 'renew-deadline', env: 'USERGROUP_RENEW_DEADLINE', kind: 'duration', def: '10s', help: 'a leader that cannot renew for this long stops reconciling', min: 500 },
  retryPeriod: { flag: 'retry-period', env: 'USERGROUP_RETRY_PERIOD', kind: 'duration', def: '2s', help: 'how often to try to acquire or renew the Lease', min: 100 },
  metricsAddr: { flag: 'metrics-addr', env: 'USERGROUP_METRICS_ADDR', kind: 'address', def: ':8080', help: 'address of /metrics ("0" disables)' },
  healthAddr: { flag: 'health-addr', env: 'USERGROUP_HEALTH_ADDR', kind: 'address', def: ':8081', help: 'address of /healthz and /readyz ("0" disables)' },
  logLevel: { flag: 'log-level', env: 'USERGROUP_LOG_LEVEL', kind: 'level', def: 'info', help: `one of ${LOG_LEVELS.join(', ')}` },
  shutdownGracePeriod: { flag: 'shutdown-grace-period', env: 'USERGROUP_SHUTDOWN_GRACE_PERIOD', kind: 'duration', def: '20s', help: 'on SIGTERM, how long in-flight reconciles may finish', min: 0 },
  watchInactivityTimeout: { flag: 'watch-inactivity-timeout', env: 'USERGROUP_WATCH_INACTIVITY_TIMEOUT', kind: 'duration', def: undefined, help: 'drop a watch that is silent this long; default: its server timeout + 60s (bookmarks come about once a minute, so much lower values reconnect quiet watches often)', min: 100 },
} as const satisfies Record<string, FlagSpec>;

export type ConfigResult = { readonly ok: true; readonly config: RunConfig } | { readonly ok: false; readonly errors: readonly string[] } | { readonly ok: 'help' };

export function usage(): string {
  const rows = Object.values(FLAGS).map((f: FlagSpec) => {
    const def = f.def === undefined || f.def === '' ? '' : ` (default ${f.def})`;
    return `  --${f.flag.padEnd(27)} ${f.help}${def}\n  ${' '.repeat(29)} env ${f.env}`;
  });
  return `usage: usergroup-operator run [flags]\n\nRuns the controller. Every flag can also be set by its environment variable;\na flag wins over its variable. The default connection's API key comes from\n--api-key-file or USERGROUP_API_KEY (never a flag: arguments are visible to every process).\n\nflags:\n${rows.join('\n')}\n`;
}

/** Parses argv (after the subcommand) and the environment. Pure: no file is read here. */
export function parseRunConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigResult {
  const specs = Object.values(FLAGS) as FlagSpec[];
  const byFlag = new Map(specs.map((s) => [s.flag, s]));
  const given = new Map<string, string>();
  const errors: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') return { ok: 'help' };
    if (!arg.startsWith('--')) {
      // Not echoed: a stray argument may be a mistyped secret.
      errors.push(`unexpected argument at position ${i + 1}`);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = byFlag.get(name);
    if (!spec) {
      if (name === 'api-key') {
        errors.push('--api-key is not accepted (process arguments are visible to all): use --api-key-file or USERGROUP_API_KEY');
        // Swallow its value so it is never echoed back as a stray argument.
        if (eq < 0 && argv[i + 1] !== undefined && !(argv[i + 1] ?? '').startsWith('--')) i++;
      } else {
        errors.push(`unknown flag --${name}`);
      }
      continue;
    }
    let value: string | undefined = eq < 0 ? undefined : arg.slice(eq + 1);
    if (value === undefined) {
      const next = argv[i + 1];
      if (spec.kind === 'boolean' && (next === undefined || next.startsWith('--') || !/^(true|false)$/.test(next))) value = 'true';
      else if (next === undefined) {
        errors.push(`--${name} needs a value`);
        continue;
      } else {
        value = next;
        i++;
      }
    }
    given.set(spec.flag, value);
  }

  const read = (spec: FlagSpec): { raw: string | undefined; source: string } => {
    const fromFlag = given.get(spec.flag);
    if (fromFlag !== undefined) return { raw: fromFlag, source: `--${spec.flag}` };
    const fromEnv = env[spec.env];
    if (fromEnv !== undefined && fromEnv !== '') return { raw: fromEnv, source: spec.env };
    return { raw: spec.def, source: `the default of --${spec.flag}` };
  };
  const value = <K extends keyof typeof FLAGS>(key: K): unknown => {
    const spec: FlagSpec = FLAGS[key];
    const { raw, source } = read(spec);
    if (raw === undefined) return undefined;
    const parsed = convert(spec, raw);
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed) {
      errors.push(`${source}: ${parsed.error}`);
      return undefined;
    }
    return parsed;
  };

  const config = {
    kubeconfig: value('kubeconfig') as string | undefined,
    serviceUrl: value('serviceUrl') as string | undefined,
    apiKeyFile: value('apiKeyFile') as string | undefined,
    allowInsecureService: value('allowInsecureService') as boolean,
    namespaces: value('namespaces') as string[],
    concurrency: value('concurrency') as number,
    resyncPeriodMs: value('resyncPeriod') as number,
    serviceQps: value('serviceQps') as number,
    serviceBurst: value('serviceBurst') as number,
    serviceTimeoutMs: value('serviceTimeout') as number,
    leaderElect: value('leaderElect') as boolean,
    leaderElectionNamespace: value('leaderElectionNamespace') as string | undefined,
    leaderElectionId: value('leaderElectionId') as string,
    leaseDurationMs: value('leaseDuration') as number,
    renewDeadlineMs: value('renewDeadline') as number,
    retryPeriodMs: value('retryPeriod') as number,
    metricsAddr: value('metricsAddr') as string,
    healthAddr: value('healthAddr') as string,
    logLevel: value('logLevel') as LogLevel,
    shutdownGracePeriodMs: value('shutdownGracePeriod') as number,
    watchInactivityTimeoutMs: value('watchInactivityTimeout') as number | undefined,
  } satisfies RunConfig;

  if (errors.length === 0) {
    if (config.renewDeadlineMs >= config.leaseDurationMs) errors.push('--renew-deadline must be shorter than --lease-duration');
    if (config.retryPeriodMs >= config.renewDeadlineMs) errors.push('--retry-period must be shorter than --renew-deadline');
    for (const ns of config.namespaces) if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns) || ns.length > 63) errors.push(`--namespaces: "${ns}" is not a namespace name`);
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, config };
}

type Converted = string | number | boolean | string[] | { error: string };

function convert(spec: FlagSpec, raw: string): Converted {
  const min = spec.min;
  switch (spec.kind) {
    case 'string':
      return raw;
    case 'boolean':
      if (raw === 'true' || raw === '1') return true;
      if (raw === 'false' || raw === '0') return false;
      return { error: `"${raw}" is not a boolean (true or false)` };
    case 'int': {
      if (!/^-?\d+$/.test(raw)) return { error: `"${raw}" is not a whole number` };
      const n = Number(raw);
      return min !== undefined && n < min ? { error: `must be at least ${min}, got ${n}` } : n;
    }
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n)) return { error: `"${raw}" is not a number` };
      return min !== undefined && n < min ? { error: `must be at least ${min}, got ${n}` } : n;
    }
    case 'duration': {
      const ms = parseDuration(raw);
      if (ms === undefined) return { error: `"${raw}" is not a duration (e.g. 500ms, 30s, 5m, 10h, 1h30m)` };
      return min !== undefined && ms < min ? { error: `must be at least ${min} ms, got ${raw}` } : ms;
    }
    case 'list':
      return raw.split(',').map((s) => s.trim()).filter(Boolean);
    case 'address': {
      const match = /^(\[[0-9a-fA-F:]+\]|[a-zA-Z0-9.-]*):(\d{1,5})$/.exec(raw);
      return raw === '0' || (match && Number(match[2]) <= 65535) ? raw : { error: `"${raw}" is not an address like :8080 or 127.0.0.1:8080 (port 0-65535; or 0 to disable)` };
    }
    case 'level':
      return (LOG_LEVELS as readonly string[]).includes(raw) ? raw : { error: `"${raw}" is not one of ${LOG_LEVELS.join(', ')}` };
  }
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go-style durations: 500ms, 30s, 5m, 10h, 1h30m. */
export function parseDuration(raw: string): number | undefined {
  const parts = raw.trim().match(/^((\d+(\.\d+)?)(ms|s|m|h))+$/);
  if (!parts) return /^0$/.test(raw.trim()) ? 0 : undefined;
  let total = 0;
  for (const m of raw.trim().matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) total += Number(m[1]) * (UNIT_MS[m[2] ?? ''] ?? 0);
  return Math.round(total);
}
