import { describe, expect, it } from 'vitest';
import { FLAGS, parseDuration, parseRunConfig, usage, type RunConfig } from '../../src/cli/config.js';

function ok(argv: string[], env: Record<string, string | undefined> = {}): RunConfig {
  const r = parseRunConfig(argv, env);
  if (r.ok !== true) throw new Error(`expected a config, got ${JSON.stringify(r)}`);
  return r.config;
}

function errors(argv: string[], env: Record<string, string | undefined> = {}): string[] {
  const r = parseRunConfig(argv, env);
  if (r.ok !== false) throw new Error(`expected errors, got ${JSON.stringify(r)}`);
  return [...r.errors];
}

describe('parseRunConfig defaults', () => {
  it('uses the documented defaults with no flags and no environment', () => {
    expect(ok([])).toEqual({
      kubeconfig: undefined,
      defaultService: undefined,
      namespaces: [],
      concurrency: 4,
      resyncPeriodMs: 10 * 3_600_000,
      scheduledRotationsPerMinute: 60,
      minTokenAgeMs: 3_600_000,
      workloadRestartsPerMinute: 0,
      podPromptsPerMinute: 0,
      deletionRotationTimeoutMs: 300_000,
      rotateOnDelete: true,
      requestBudgets: { sync: { burst: 10, perMinute: 10 }, rotation: { burst: 10, perMinute: 10 } },
      serviceQps: 2.5,
      serviceBurst: 10,
      serviceShare: 1,
      serviceTimeoutMs: 10_000,
      leaderElect: false,
      shardByNamespace: false,
      leaderElectionNamespace: undefined,
      leaderElectionId: 'usergroup-operator',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      metricsAddr: ':8080',
      healthAddr: ':8081',
      logLevel: 'info',
      shutdownGracePeriodMs: 20_000,
      watchInactivityTimeoutMs: undefined,
      allowedServiceHosts: [],
      allowHttpServices: false,
      metricsAuth: true,
    });
  });

  it('ignores empty environment variables', () => {
    expect(ok([], { USERGROUP_CONCURRENCY: '', USERGROUP_LOG_LEVEL: '' }).concurrency).toBe(4);
  });
});

describe('parseRunConfig sources', () => {
  it('takes a value from the environment when no flag is given', () => {
    const c = ok([], {
      KUBECONFIG: '/k',
      USERGROUP_DEFAULT_SERVICE: 'shared',
      USERGROUP_CONCURRENCY: '8',
      USERGROUP_RESYNC_PERIOD: '1h',
      USERGROUP_SERVICE_QPS: '2.5',
      USERGROUP_LEADER_ELECT: 'true',
      USERGROUP_NAMESPACES: 'a, b,,c',
      USERGROUP_METRICS_ADDR: '127.0.0.1:9090',
      USERGROUP_HEALTH_ADDR: '0',
      USERGROUP_LOG_LEVEL: 'debug',
    });
    expect(c).toMatchObject({
      kubeconfig: '/k',
      defaultService: 'shared',
      concurrency: 8,
      resyncPeriodMs: 3_600_000,
      serviceQps: 2.5,
      leaderElect: true,
      namespaces: ['a', 'b', 'c'],
      metricsAddr: '127.0.0.1:9090',
      healthAddr: '0',
      logLevel: 'debug',
    });
  });

  it('lets a flag beat its environment variable', () => {
    const c = ok(['--concurrency', '2', '--log-level=warn', '--leader-elect=false'], {
      USERGROUP_CONCURRENCY: '8',
      USERGROUP_LOG_LEVEL: 'debug',
      USERGROUP_LEADER_ELECT: 'true',
    });
    expect(c.concurrency).toBe(2);
    expect(c.logLevel).toBe('warn');
    expect(c.leaderElect).toBe(false);
  });

  it('accepts --flag=value and --flag value', () => {
    expect(ok(['--service-burst=7']).serviceBurst).toBe(7);
    expect(ok(['--service-burst', '7']).serviceBurst).toBe(7);
    expect(ok(['--metrics-addr=[::1]:9000']).metricsAddr).toBe('[::1]:9000');
    expect(ok(['--default-service=shared.example']).defaultService).toBe('shared.example');
  });

  it('takes a boolean flag without a value as true', () => {
    expect(ok(['--leader-elect']).leaderElect).toBe(true);
    const c = ok(['--leader-elect', '--concurrency', '3']);
    expect(c.leaderElect).toBe(true);
    expect(c.concurrency).toBe(3);
    expect(ok(['--leader-elect', 'false']).leaderElect).toBe(false);
    expect(ok(['--leader-elect', 'true', '--concurrency=1']).leaderElect).toBe(true);
    expect(ok(['--shard-by-namespace']).shardByNamespace).toBe(true);
    expect(ok([], { USERGROUP_SHARD_BY_NAMESPACE: 'true' }).shardByNamespace).toBe(true);
  });

  it('sets the request budgets per kind, by flag or environment variable (a fractional rate allowed)', () => {
    expect(ok(['--sync-request-burst=3', '--sync-requests-per-minute', '0.5'], { USERGROUP_ROTATION_REQUEST_BURST: '2' }).requestBudgets).toEqual({
      sync: { burst: 3, perMinute: 0.5 },
      rotation: { burst: 2, perMinute: 10 },
    });
    expect(ok([], { USERGROUP_ROTATION_REQUESTS_PER_MINUTE: '30' }).requestBudgets.rotation).toEqual({ burst: 10, perMinute: 30 });
  });

  it('returns help for --help and -h, wherever they are', () => {
    expect(parseRunConfig(['--help'], {})).toEqual({ ok: 'help' });
    expect(parseRunConfig(['-h'], {})).toEqual({ ok: 'help' });
    expect(parseRunConfig(['--concurrency', '2', '--help'], {})).toEqual({ ok: 'help' });
  });
});

describe('parseRunConfig errors', () => {
  it.each<[string, string[], Record<string, string>, RegExp]>([
    ['non-numeric concurrency (flag)', ['--concurrency', 'many'], {}, /^--concurrency: "many" is not a whole number/],
    ['non-numeric concurrency (env)', [], { USERGROUP_CONCURRENCY: 'many' }, /^USERGROUP_CONCURRENCY: "many" is not a whole number/],
    ['fractional concurrency', ['--concurrency=1.5'], {}, /^--concurrency: /],
    ['zero concurrency', ['--concurrency=0'], {}, /^--concurrency: must be at least 1/],
    ['negative burst', ['--service-burst=-3'], {}, /^--service-burst: must be at least 1/],
    ['non-numeric qps', ['--service-qps=fast'], {}, /^--service-qps: "fast" is not a number/],
    ['zero qps', [], { USERGROUP_SERVICE_QPS: '0' }, /^USERGROUP_SERVICE_QPS: must be at least/],
    ['bad duration (flag)', ['--resync-period', '10'], {}, /^--resync-period: "10" is not a duration/],
    ['zero sync-request burst', ['--sync-request-burst=0'], {}, /^--sync-request-burst: must be at least 1/],
    ['fractional rotation-request burst', [], { USERGROUP_ROTATION_REQUEST_BURST: '2.5' }, /^USERGROUP_ROTATION_REQUEST_BURST: "2.5" is not a whole number/],
    ['a burst too large to count exactly', ['--rotation-request-burst=100000000000000000000'], {}, /^--rotation-request-burst: must be at most 100000/],
    ['zero requests a minute', ['--rotation-requests-per-minute=0'], {}, /^--rotation-requests-per-minute: must be at least 0.001/],
    ['non-numeric requests a minute', [], { USERGROUP_SYNC_REQUESTS_PER_MINUTE: 'lots' }, /^USERGROUP_SYNC_REQUESTS_PER_MINUTE: "lots" is not a number/],
    ['leader election and sharding together', ['--leader-elect', '--shard-by-namespace'], {}, /^--leader-elect and --shard-by-namespace exclude each other/],
    ['bad duration (env)', [], { USERGROUP_LEASE_DURATION: 'soon' }, /^USERGROUP_LEASE_DURATION: "soon" is not a duration/],
    ['too short resync period', ['--resync-period=10ms'], {}, /^--resync-period: must be at least/],
    ['bad address (no port)', ['--metrics-addr', 'localhost'], {}, /^--metrics-addr: "localhost" is not an address/],
    ['bad address (text port)', [], { USERGROUP_HEALTH_ADDR: ':http' }, /^USERGROUP_HEALTH_ADDR: ":http" is not an address/],
    ['bad address (port above 65535)', ['--metrics-addr=:70000'], {}, /^--metrics-addr: /],
    ['bad address (port 65536)', ['--health-addr=127.0.0.1:65536'], {}, /^--health-addr: /],
    ['bad log level', ['--log-level=verbose'], {}, /^--log-level: "verbose" is not one of trace, debug, info/],
    ['bad boolean (flag)', ['--leader-elect=yes'], {}, /^--leader-elect: "yes" is not a boolean/],
    ['bad boolean (env)', [], { USERGROUP_LEADER_ELECT: 'yes' }, /^USERGROUP_LEADER_ELECT: "yes" is not a boolean/],
    ['renew deadline equal to lease duration', ['--renew-deadline=15s'], {}, /--renew-deadline must be shorter than --lease-duration/],
    ['renew deadline above lease duration', ['--lease-duration=5s'], {}, /--renew-deadline must be shorter than --lease-duration/],
    ['retry period equal to renew deadline', ['--retry-period=10s'], {}, /--retry-period must be shorter than --renew-deadline/],
    ['bad namespace name', ['--namespaces=team-a,Team_B'], {}, /^--namespaces: "Team_B" is not a namespace name/],
    ['too long namespace name', ['--namespaces', 'a'.repeat(64)], {}, /^--namespaces: "a{64}" is not a namespace name/],
    ['unknown flag', ['--concurency=4'], {}, /^unknown flag --concurency$/],
    ['positional argument (not echoed: it may be a mistyped secret)', ['extra'], {}, /^unexpected argument at position 1$/],
    ['flag without value', ['--concurrency'], {}, /^--concurrency needs a value$/],
  ])('rejects %s', (_what, argv, env, message) => {
    const errs = errors(argv, env);
    expect(
      errs.some((e) => message.test(e)),
      `errors were ${JSON.stringify(errs)}`,
    ).toBe(true);
  });

  it.each([[['--api-key=sekrit']], [['--api-key', 'sekrit']]])('rejects %j, says API keys live in Secrets, and does not echo the key', (argv) => {
    const text = errors(argv).join('\n');
    expect(text).toMatch(/--api-key is not accepted: API keys live in Secrets/);
    expect(text).not.toContain('sekrit');
  });

  it.each([[['--service-url', 'https://svc']], [['--api-key-file=/key']], [['--allow-insecure-service']]])(
    'refuses the removed default-connection flag %j and says what replaced it',
    (argv) => {
      const text = errors(argv).join('\n');
      expect(text).toMatch(
        /was removed: the default connection is a ClusterUserGroupService now, with tenant rules: create one and pass its name with --default-service/,
      );
      expect(text).not.toContain('https://svc');
    },
  );

  it.each(['USERGROUP_SERVICE_URL', 'USERGROUP_API_KEY', 'USERGROUP_API_KEY_FILE', 'USERGROUP_ALLOW_INSECURE_SERVICE'])(
    'refuses to start with %s set (an install of 0.1 would silently lose its default connection) and never echoes it',
    (variable) => {
      const text = errors([], { [variable]: 'sekrit-value' }).join('\n');
      expect(text).toContain(`${variable} is set, but the default connection is a ClusterUserGroupService now`);
      expect(text).not.toContain('sekrit-value');
    },
  );

  it('refuses a --default-service that is not an object name', () => {
    expect(errors(['--default-service', 'Not A Name']).join('\n')).toMatch(/is not an object name/);
  });

  it('reports every bad value at once', () => {
    const errs = errors(['--concurrency=x', '--log-level=loud'], { USERGROUP_METRICS_ADDR: 'nope' });
    expect(errs).toHaveLength(3);
  });
});

describe('usage', () => {
  const text = usage();

  it('lists every flag with its environment variable', () => {
    for (const f of Object.values(FLAGS)) {
      expect(text).toContain(`--${f.flag}`);
      expect(text).toContain(`env ${f.env}`);
    }
  });

  it('shows every default', () => {
    for (const f of Object.values(FLAGS)) {
      if (f.def !== undefined && f.def !== '')
        expect(text, f.flag).toMatch(new RegExp(`--${f.flag} .*\\(default ${f.def.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`));
    }
    for (const d of [
      '(default 4)',
      '(default 10h)',
      '(default 10)',
      '(default 2.5)',
      '(default :8080)',
      '(default :8081)',
      '(default 15s)',
      '(default 10s)',
      '(default 2s)',
      '(default info)',
    ]) {
      expect(text).toContain(d);
    }
  });

  it('pairs each flag with its own environment variable on the next line', () => {
    const lines = text.slice(text.indexOf('\nflags:\n')).split('\n');
    for (const f of Object.values(FLAGS)) {
      const i = lines.findIndex((l) => l.trimStart().startsWith(`--${f.flag} `));
      expect(i, f.flag).toBeGreaterThanOrEqual(0);
      expect(lines[i + 1]?.trim()).toBe(`env ${f.env}`);
    }
  });

  it('explains that connections are objects', () => {
    expect(text).toContain('Connections to the service are objects, not flags');
    expect(text).toContain('--default-service');
  });
});

describe('parseDuration', () => {
  it.each<[string, number]>([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['10h', 36_000_000],
    ['1h30m', 5_400_000],
    ['1.5s', 1_500],
    ['2m30s500ms', 150_500],
    ['0', 0],
    [' 30s ', 30_000],
    // Go's time.ParseDuration takes a trailing dot, so the flags do too (one parser for flags and kubectl).
    ['1.s', 1_000],
  ])('%j → %d ms', (raw, ms) => {
    expect(parseDuration(raw)).toBe(ms);
  });

  it.each(['10', 'abc', '-1s', '', 's', '1d', '1 s', '5mm'])('rejects %j', (raw) => {
    expect(parseDuration(raw)).toBeUndefined();
  });
});
