// `usergroup-operator run`'s flags and environment variables: one table for parsing, defaults, validation and --help.
import { LOG_LEVELS, type LogLevel } from '../observability/log.js';
import { parseEgressPolicy } from '../service/egress-policy.js';
import { parseGoDuration } from '../platform/go-duration.js';
import { lastValue, scanArgv, type FlagSpec } from '../platform/argv.js';
import { DEFAULT_REQUEST_BUDGETS } from '../controller/request-budget.js';
import type { ControllerSettings } from '../controller/settings.js';

/** `usergroup-operator run`'s configuration, parsed and validated once at start: the controller's settings, and how this process runs it. */
export interface RunConfig extends ControllerSettings {
  readonly kubeconfig: string | undefined;
  readonly leaderElect: boolean;
  /** Replicas share the namespaces (a Lease each, rendezvous hashing) instead of electing one leader. */
  readonly shardByNamespace: boolean;
  readonly leaderElectionNamespace: string | undefined;
  readonly leaderElectionId: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly metricsAddr: string;
  readonly healthAddr: string;
  readonly logLevel: LogLevel;
  readonly shutdownGracePeriodMs: number;
  /** Whether /metrics requires a bearer token allowed to `get` the non-resource URL /metrics (TokenReview + SubjectAccessReview). */
  readonly metricsAuth: boolean;
}

const DEFAULT_CONNECTION_MOVED =
  'the default connection is a ClusterUserGroupService now, with tenant rules: create one and pass its name with --default-service (docs/tenancy.md: upgrading from 0.1)';

/** Flags of earlier versions, and why they are gone. */
const REMOVED_FLAGS: Readonly<Record<string, string>> = {
  'service-url': `was removed: ${DEFAULT_CONNECTION_MOVED}`,
  'api-key-file': `was removed: ${DEFAULT_CONNECTION_MOVED}`,
  'allow-insecure-service': `was removed: ${DEFAULT_CONNECTION_MOVED}`,
  'api-key': 'is not accepted: API keys live in Secrets that a ClusterUserGroupService or UserGroupService names',
};
const REMOVED_ENV = ['USERGROUP_SERVICE_URL', 'USERGROUP_API_KEY', 'USERGROUP_API_KEY_FILE', 'USERGROUP_ALLOW_INSECURE_SERVICE'];

/** A value the flag's parser refused, with why. */
interface Invalid {
  readonly invalid: string;
}

interface Flag<T> {
  readonly flag: string;
  readonly env: string;
  readonly def: string | undefined;
  readonly help: string;
  readonly parse: (raw: string) => T | Invalid;
}

/** A flag whose default is always valid, so reading it always yields a T. */
interface DefaultedFlag<T> extends Flag<T> {
  readonly def: string;
}

const optional = <T>(flag: string, env: string, help: string, parse: (raw: string) => T | Invalid): Flag<T> => ({ flag, env, def: undefined, help, parse });
const defaulted = <T>(flag: string, env: string, def: string, help: string, parse: (raw: string) => T | Invalid): DefaultedFlag<T> => ({
  flag,
  env,
  def,
  help,
  parse,
});

const text = (raw: string): string => raw;
const bool = (raw: string): boolean | Invalid =>
  raw === 'true' || raw === '1' ? true : raw === 'false' || raw === '0' ? false : { invalid: `"${raw}" is not a boolean (true or false)` };
const int =
  (min: number, max = Number.MAX_SAFE_INTEGER) =>
  (raw: string): number | Invalid => {
    if (!/^-?\d+$/.test(raw)) return { invalid: `"${raw}" is not a whole number` };
    const n = Number(raw);
    return n < min ? { invalid: `must be at least ${min}, got ${n}` } : n > max ? { invalid: `must be at most ${max}, got ${raw}` } : n;
  };
const num =
  (min: number, max = Number.MAX_VALUE) =>
  (raw: string): number | Invalid => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) return { invalid: `"${raw}" is not a number` };
    return n < min ? { invalid: `must be at least ${min}, got ${n}` } : n > max ? { invalid: `must be at most ${max}, got ${n}` } : n;
  };
const duration =
  (minMs: number) =>
  (raw: string): number | Invalid => {
    const ms = parseDuration(raw);
    if (ms === undefined) return { invalid: `"${raw}" is not a duration (e.g. 500ms, 30s, 5m, 10h, 1h30m)` };
    return ms < minMs ? { invalid: `must be at least ${minMs} ms, got ${raw}` } : ms;
  };
const objectName = (raw: string): string | Invalid =>
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(raw) && raw.length <= 253
    ? raw
    : { invalid: `"${raw}" is not an object name (a DNS subdomain)` };
const list = (raw: string): string[] =>
  raw
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
const address = (raw: string): string | Invalid => {
  const match = /^(\[[0-9a-fA-F:]+\]|[a-zA-Z0-9.-]*):(\d{1,5})$/.exec(raw);
  return raw === '0' || (match && Number(match[2]) <= 65535)
    ? raw
    : { invalid: `"${raw}" is not an address like :8080 or 127.0.0.1:8080 (port 0-65535; or 0 to disable)` };
};
const level = (raw: string): LogLevel | Invalid => LOG_LEVELS.find((l) => l === raw) ?? { invalid: `"${raw}" is not one of ${LOG_LEVELS.join(', ')}` };

/** One table drives parsing, env fallbacks, validation and --help, so they cannot disagree. */
export const FLAGS = {
  kubeconfig: optional('kubeconfig', 'KUBECONFIG', 'kubeconfig file (or a KUBECONFIG list); default: ~/.kube/config, then in-cluster', text),
  defaultService: optional(
    'default-service',
    'USERGROUP_DEFAULT_SERVICE',
    'ClusterUserGroupService used by UserGroups without spec.serviceRef (its tenant rules apply)',
    objectName,
  ),
  namespaces: defaulted('namespaces', 'USERGROUP_NAMESPACES', '', 'comma-separated namespaces to watch; empty = all (also how to shard)', list),
  concurrency: defaulted('concurrency', 'USERGROUP_CONCURRENCY', '4', 'reconcile workers', int(1)),
  resyncPeriod: defaulted(
    'resync-period',
    'USERGROUP_RESYNC_PERIOD',
    '10h',
    're-PUT every group this often (+ up to 10% jitter) to repair drift made outside the cluster',
    duration(1000),
  ),
  scheduledRotationsPerMinute: defaulted(
    'scheduled-rotations-per-minute',
    'USERGROUP_SCHEDULED_ROTATIONS_PER_MINUTE',
    '60',
    'at most this many scheduled rotations (spec.rotation.maxTokenAge) per minute, evenly spaced, across all UserGroups; requested ones have their per-namespace budget instead (--rotation-request-burst)',
    int(1),
  ),
  minTokenAge: defaulted(
    'min-token-age',
    'USERGROUP_MIN_TOKEN_AGE',
    '1h',
    'floor under spec.rotation.maxTokenAge: a UserGroup asking for more frequent rotations gets this',
    duration(1000),
  ),
  workloadRestartsPerMinute: defaulted(
    'workload-restarts-per-minute',
    'USERGROUP_WORKLOAD_RESTARTS_PER_MINUTE',
    '0',
    'restart spec.rolloutRestartTargets after a token change, at most this many workloads per minute, evenly spaced; 0: never (needs get and patch on apps deployments, statefulsets, daemonsets)',
    int(0),
  ),
  mountedTokenRefreshesPerMinute: defaulted(
    'mounted-token-refreshes-per-minute',
    'USERGROUP_MOUNTED_TOKEN_REFRESHES_PER_MINUTE',
    '0',
    "after a token change, prompt the kubelet of each Pod labelled refresh.usergroup.dev/<UserGroup name> to rewrite the mounted token at once (an annotation; no restart), at most this many Pods per minute, evenly spaced; 0: never (needs list and patch on pods, and the chart's admission policy that allows only that annotation)",
    int(0),
  ),
  deletionRotationTimeout: defaulted(
    'deletion-rotation-timeout',
    'USERGROUP_DELETION_ROTATION_TIMEOUT',
    '5m',
    "the longest a deletion of a UserGroup with spec.deletionPolicy Rotate (a namespace's too) is held for its token rotation, from its deletionTimestamp; then it goes unrotated, with a Warning Event",
    duration(1000),
  ),
  rotateOnDelete: defaulted(
    'rotate-on-delete',
    'USERGROUP_ROTATE_ON_DELETE',
    'true',
    'keep the usergroup.dev/rotate-on-delete finalizer on UserGroups with spec.deletionPolicy Rotate; false: remove it from every object and add none (their deletions then go unrotated), before a rollback to a release older than 0.3.0 or an uninstall',
    bool,
  ),
  // What a tenant's requests may cost, per namespace and kind: each namespace has its own budget (a namespace has one
  // owner, so a budget is not divided among shard replicas). Bounded so the token buckets stay exact numbers.
  syncRequestBurst: defaulted(
    'sync-request-burst',
    'USERGROUP_SYNC_REQUEST_BURST',
    String(DEFAULT_REQUEST_BUDGETS.sync.burst),
    "sync requests (usergroup.dev/sync-requested-at, a PUT each) answered at once per namespace, then --sync-requests-per-minute; a request over the namespace's budget waits for its turn, never dropped",
    int(1, 100_000),
  ),
  syncRequestsPerMinute: defaulted(
    'sync-requests-per-minute',
    'USERGROUP_SYNC_REQUESTS_PER_MINUTE',
    String(DEFAULT_REQUEST_BUDGETS.sync.perMinute),
    'sync requests answered per minute per namespace once its burst is spent (fractions allowed: 0.5 is one every two minutes)',
    num(0.001, 60_000),
  ),
  rotationRequestBurst: defaulted(
    'rotation-request-burst',
    'USERGROUP_ROTATION_REQUEST_BURST',
    String(DEFAULT_REQUEST_BUDGETS.rotation.burst),
    "requested rotations (usergroup.dev/rotate-requested-at, a POST each) done at once per namespace, then --rotation-requests-per-minute; a request over the namespace's budget waits for its turn, never dropped",
    int(1, 100_000),
  ),
  rotationRequestsPerMinute: defaulted(
    'rotation-requests-per-minute',
    'USERGROUP_ROTATION_REQUESTS_PER_MINUTE',
    String(DEFAULT_REQUEST_BUDGETS.rotation.perMinute),
    'requested rotations done per minute per namespace once its burst is spent (fractions allowed)',
    num(0.001, 60_000),
  ),
  // 2.5 a second and 10 at once: at most 160 calls in any minute, inside the real service's documented 180.
  serviceQps: defaulted('service-qps', 'USERGROUP_SERVICE_QPS', '2.5', 'sustained calls per second toward one service account', num(0.001)),
  serviceBurst: defaulted('service-burst', 'USERGROUP_SERVICE_BURST', '10', 'burst of calls toward one service account', int(1)),
  serviceShare: defaulted(
    'service-share',
    'USERGROUP_SERVICE_SHARE',
    '1',
    "this cluster's share of --service-qps and --service-burst, when several clusters use one account (0.5 for one of two)",
    num(0.001, 1),
  ),
  serviceTimeout: defaulted('service-timeout', 'USERGROUP_SERVICE_TIMEOUT', '10s', 'timeout of one service call, body included', duration(1)),
  leaderElect: defaulted(
    'leader-elect',
    'USERGROUP_LEADER_ELECT',
    'false',
    'elect a leader through a coordination.k8s.io Lease; only the leader reconciles',
    bool,
  ),
  shardByNamespace: defaulted(
    'shard-by-namespace',
    'USERGROUP_SHARD_BY_NAMESPACE',
    'false',
    'share the namespaces among all replicas instead of electing a leader: each keeps a Lease (named after --leader-election-id, in --leader-election-namespace) and works on the namespaces rendezvous hashing gives it; shares move when a replica joins or leaves',
    bool,
  ),
  leaderElectionNamespace: optional(
    'leader-election-namespace',
    'USERGROUP_LEADER_ELECTION_NAMESPACE',
    'namespace of the Lease (or the shard Leases); default: the pod namespace',
    text,
  ),
  leaderElectionId: defaulted('leader-election-id', 'USERGROUP_LEADER_ELECTION_ID', 'usergroup-operator', 'name of the Lease', text),
  leaseDuration: defaulted(
    'lease-duration',
    'USERGROUP_LEASE_DURATION',
    '15s',
    'how long a standby waits before taking over an unrenewed Lease',
    duration(1000),
  ),
  renewDeadline: defaulted('renew-deadline', 'USERGROUP_RENEW_DEADLINE', '10s', 'a leader that cannot renew for this long stops reconciling', duration(500)),
  retryPeriod: defaulted('retry-period', 'USERGROUP_RETRY_PERIOD', '2s', 'how often to try to acquire or renew the Lease', duration(100)),
  metricsAddr: defaulted('metrics-addr', 'USERGROUP_METRICS_ADDR', ':8080', 'address of /metrics ("0" disables)', address),
  healthAddr: defaulted('health-addr', 'USERGROUP_HEALTH_ADDR', ':8081', 'address of /healthz and /readyz ("0" disables)', address),
  logLevel: defaulted('log-level', 'USERGROUP_LOG_LEVEL', 'info', `one of ${LOG_LEVELS.join(', ')}`, level),
  shutdownGracePeriod: defaulted(
    'shutdown-grace-period',
    'USERGROUP_SHUTDOWN_GRACE_PERIOD',
    '20s',
    'on SIGTERM, how long in-flight reconciles may finish',
    duration(0),
  ),
  allowedServiceHosts: defaulted(
    'allowed-service-hosts',
    'USERGROUP_ALLOWED_SERVICE_HOSTS',
    '',
    'comma-separated hosts a namespaced UserGroupService may point at: host, *.domain (subdomains only), optionally :port; empty = tenants cannot define their own connections',
    list,
  ),
  allowHttpServices: defaulted(
    'allow-http-services',
    'USERGROUP_ALLOW_HTTP_SERVICES',
    'false',
    'let a namespaced UserGroupService use plain http when its spec.allowInsecure asks for it',
    bool,
  ),
  metricsAuth: defaulted(
    'metrics-auth',
    'USERGROUP_METRICS_AUTH',
    'true',
    'require a bearer token allowed to get the non-resource URL /metrics (TokenReview + SubjectAccessReview, like controller-runtime)',
    bool,
  ),
  watchInactivityTimeout: optional(
    'watch-inactivity-timeout',
    'USERGROUP_WATCH_INACTIVITY_TIMEOUT',
    'drop a watch that is silent this long; default: its server timeout + 60s (bookmarks come about once a minute, so much lower values reconnect quiet watches often)',
    duration(100),
  ),
};

type AnyFlag = Flag<unknown>;

export type ConfigResult =
  { readonly ok: true; readonly config: RunConfig } | { readonly ok: false; readonly errors: readonly string[] } | { readonly ok: 'help' };

export function usage(): string {
  const rows = Object.values(FLAGS).map((f: AnyFlag) => {
    const def = f.def === undefined || f.def === '' ? '' : ` (default ${f.def})`;
    return `  --${f.flag.padEnd(27)} ${f.help}${def}\n  ${' '.repeat(29)} env ${f.env}`;
  });
  return `usage: usergroup-operator run [flags]\n\nRuns the controller. Every flag can also be set by its environment variable;\na flag wins over its variable. Connections to the service are objects, not flags:\nClusterUserGroupServices (shared, with tenant rules) and UserGroupServices.\n\nflags:\n${rows.join('\n')}\n`;
}

/** Parses argv (after the subcommand) and the environment. Pure: no file is read here. */
export function parseRunConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigResult {
  const specs: Record<string, FlagSpec> = { help: { arity: 'switch', short: 'h' } };
  for (const f of Object.values(FLAGS) as AnyFlag[]) specs[f.flag] = { arity: f.parse === bool ? 'switch-or-word' : 'value' };
  // Known, so that their values are consumed (and never echoed back as stray arguments: one may be an API key).
  for (const name of Object.keys(REMOVED_FLAGS)) specs[name] = { arity: 'value' };
  const scanned = scanArgv(argv, specs);
  if (lastValue(scanned, 'help') === 'true') return { ok: 'help' };

  const errors: string[] = [];
  const given = new Map<string, string>();
  for (const f of scanned.flags) {
    const removed = REMOVED_FLAGS[f.name];
    if (removed) errors.push(`--${f.name} ${removed}`);
    else given.set(f.name, f.value);
  }
  for (const e of scanned.errors) {
    const removed = e.kind === 'unknown-flag' ? undefined : REMOVED_FLAGS[e.name];
    if (e.kind === 'unknown-flag') errors.push(`unknown flag ${e.spelling}`);
    else if (removed) errors.push(`--${e.name} ${removed}`);
    else if (e.kind === 'missing-value') errors.push(`--${e.name} needs a value`);
    else given.set(e.name, e.value); // a boolean flag's bad value: its parser below says why, naming the flag
  }
  // Not echoed: a stray argument may be a mistyped secret.
  for (const p of scanned.positionals) errors.push(`unexpected argument at position ${p.position}`);

  /** The flag, else its environment variable; a refused value is recorded as an error naming its source. */
  const source = (f: AnyFlag): { raw: string; from: string } | undefined => {
    const fromFlag = given.get(f.flag);
    if (fromFlag !== undefined) return { raw: fromFlag, from: `--${f.flag}` };
    const fromEnv = env[f.env];
    return fromEnv !== undefined && fromEnv !== '' ? { raw: fromEnv, from: f.env } : undefined;
  };
  function read<T>(f: DefaultedFlag<T>): T;
  function read<T>(f: Flag<T>): T | undefined;
  function read<T>(f: Flag<T>): T | undefined {
    const given = source(f);
    const parsed = given ? f.parse(given.raw) : f.def !== undefined ? f.parse(f.def) : undefined;
    if (isInvalid(parsed)) {
      errors.push(`${given?.from ?? `the default of --${f.flag}`}: ${parsed.invalid}`);
      // The configuration is refused anyway; the default keeps the value well-typed until then.
      const fallback = f.def !== undefined ? f.parse(f.def) : undefined;
      return isInvalid(fallback) ? undefined : fallback;
    }
    return parsed;
  }

  for (const variable of REMOVED_ENV) {
    if (env[variable] !== undefined && env[variable] !== '') errors.push(`${variable} is set, but ${DEFAULT_CONNECTION_MOVED}`);
  }

  const config: RunConfig = {
    kubeconfig: read(FLAGS.kubeconfig),
    defaultService: read(FLAGS.defaultService),
    namespaces: read(FLAGS.namespaces),
    concurrency: read(FLAGS.concurrency),
    resyncPeriodMs: read(FLAGS.resyncPeriod),
    scheduledRotationsPerMinute: read(FLAGS.scheduledRotationsPerMinute),
    minTokenAgeMs: read(FLAGS.minTokenAge),
    workloadRestartsPerMinute: read(FLAGS.workloadRestartsPerMinute),
    podPromptsPerMinute: read(FLAGS.mountedTokenRefreshesPerMinute),
    deletionRotationTimeoutMs: read(FLAGS.deletionRotationTimeout),
    rotateOnDelete: read(FLAGS.rotateOnDelete),
    requestBudgets: {
      sync: { burst: read(FLAGS.syncRequestBurst), perMinute: read(FLAGS.syncRequestsPerMinute) },
      rotation: { burst: read(FLAGS.rotationRequestBurst), perMinute: read(FLAGS.rotationRequestsPerMinute) },
    },
    serviceQps: read(FLAGS.serviceQps),
    serviceBurst: read(FLAGS.serviceBurst),
    serviceShare: read(FLAGS.serviceShare),
    serviceTimeoutMs: read(FLAGS.serviceTimeout),
    leaderElect: read(FLAGS.leaderElect),
    shardByNamespace: read(FLAGS.shardByNamespace),
    leaderElectionNamespace: read(FLAGS.leaderElectionNamespace),
    leaderElectionId: read(FLAGS.leaderElectionId),
    leaseDurationMs: read(FLAGS.leaseDuration),
    renewDeadlineMs: read(FLAGS.renewDeadline),
    retryPeriodMs: read(FLAGS.retryPeriod),
    metricsAddr: read(FLAGS.metricsAddr),
    healthAddr: read(FLAGS.healthAddr),
    logLevel: read(FLAGS.logLevel),
    shutdownGracePeriodMs: read(FLAGS.shutdownGracePeriod),
    watchInactivityTimeoutMs: read(FLAGS.watchInactivityTimeout),
    allowedServiceHosts: read(FLAGS.allowedServiceHosts),
    allowHttpServices: read(FLAGS.allowHttpServices),
    metricsAuth: read(FLAGS.metricsAuth),
  };

  if (errors.length === 0) {
    if (config.leaderElect && config.shardByNamespace)
      errors.push('--leader-elect and --shard-by-namespace exclude each other: with sharding every replica works, each on its own namespaces');
    if (config.renewDeadlineMs >= config.leaseDurationMs) errors.push('--renew-deadline must be shorter than --lease-duration');
    if (config.retryPeriodMs >= config.renewDeadlineMs) errors.push('--retry-period must be shorter than --renew-deadline');
    const egress = parseEgressPolicy(config.allowedServiceHosts, config.allowHttpServices);
    if (!egress.ok) for (const m of egress.messages) errors.push(`--allowed-service-hosts: ${m}`);
    for (const ns of config.namespaces)
      if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns) || ns.length > 63) errors.push(`--namespaces: "${ns}" is not a namespace name`);
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, config };
}

function isInvalid(value: unknown): value is Invalid {
  return typeof value === 'object' && value !== null && 'invalid' in value;
}

/** A duration flag's value: Go syntax (500ms, 30s, 5m, 1h30m), surrounding blanks ignored, whole milliseconds. */
export function parseDuration(raw: string): number | undefined {
  const ms = parseGoDuration(raw.trim());
  return ms === undefined ? undefined : Math.round(ms);
}
