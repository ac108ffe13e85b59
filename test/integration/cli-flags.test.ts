import { spawn } from 'node:child_process';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { FLAGS } from '../../src/cli/config.js';
import { MAIN } from '../support/controller-process.js';

/*
 * `usergroup-operator run` flags and environment variables: bad values and unknown flags are refused with a
 * clear message and a non-zero exit, and --help lists every flag with its env var and default.
 */

describe('configuration errors and --help', () => {
  const cli = (args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [MAIN, ...args], {
        env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString('utf8');
      });
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString('utf8');
      });
      child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });

  it('rejects bad values and unknown flags with a clear message and a non-zero exit', async () => {
    const cases: { args: string[]; env?: Record<string, string>; message: RegExp }[] = [
      { args: ['run', '--concurrency', '0'], message: /--concurrency: must be at least 1, got 0/ },
      { args: ['run', '--lease-duration', '15 seconds'], message: /--lease-duration: "15 seconds" is not a duration/ },
      { args: ['run', '--resync-period', '10x'], message: /--resync-period: "10x" is not a duration/ },
      { args: ['run', '--no-such-flag'], message: /unknown flag --no-such-flag/ },
      { args: ['run'], env: { USERGROUP_CONCURRENCY: 'many' }, message: /USERGROUP_CONCURRENCY: "many" is not a whole number/ },
      { args: ['run', '--lease-duration', '5s', '--renew-deadline', '10s'], message: /--renew-deadline must be shorter than --lease-duration/ },
      { args: ['run', '--log-level', 'loud'], message: /--log-level: "loud" is not one of/ },
      { args: ['run', '--metrics-addr', 'localhost'], message: /--metrics-addr: "localhost" is not an address/ },
      { args: ['run', '--api-key', 'x'], message: /--api-key is not accepted/ },
    ];
    for (const c of cases) {
      const res = await cli(c.args, c.env);
      expect(res.code, `${c.args.join(' ')}: ${res.stderr}`).not.toBe(0);
      expect(res.stderr, c.args.join(' ')).toMatch(/invalid configuration/);
      expect(res.stderr, c.args.join(' ')).toMatch(c.message);
      expect(res.stdout, c.args.join(' ')).toBe('');
    }
    // Several problems are reported together.
    const both = await cli(['run', '--concurrency', '0', '--retry-period', 'soon']);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/--concurrency/);
    expect(both.stderr).toMatch(/--retry-period/);
  });

  it('run --help lists every flag with its env var and default, and exits 0', async () => {
    const res = await cli(['run', '--help']);
    expect(res.code).toBe(0);
    expect(res.stderr).toBe('');
    const text = res.stdout;
    for (const spec of Object.values(FLAGS)) {
      const start = text.indexOf(`\n  --${spec.flag} `, text.indexOf('\nflags:\n'));
      expect(start, `--${spec.flag} listed`).toBeGreaterThanOrEqual(0);
      // The entry runs to the next flag; it names the env var and the default.
      const next = text.indexOf('\n  --', start + 1);
      const entry = text.slice(start, next < 0 ? undefined : next);
      expect(entry, `--${spec.flag}`).toContain(`env ${spec.env}`);
      if (spec.def !== undefined && spec.def !== '') expect(entry, `--${spec.flag}`).toContain(`(default ${spec.def})`);
    }
    // Spot checks that do not come from the flag table.
    for (const [flag, env, def] of [
      ['concurrency', 'USERGROUP_CONCURRENCY', '4'],
      ['lease-duration', 'USERGROUP_LEASE_DURATION', '15s'],
      ['renew-deadline', 'USERGROUP_RENEW_DEADLINE', '10s'],
      ['retry-period', 'USERGROUP_RETRY_PERIOD', '2s'],
      ['metrics-addr', 'USERGROUP_METRICS_ADDR', ':8080'],
      ['health-addr', 'USERGROUP_HEALTH_ADDR', ':8081'],
      ['log-level', 'USERGROUP_LOG_LEVEL', 'info'],
      ['resync-period', 'USERGROUP_RESYNC_PERIOD', '10h'],
    ] as const) {
      expect(text).toMatch(new RegExp(`--${flag} [^\\n]*\\(default ${def.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)\\n\\s+env ${env}`));
    }
    for (const flag of [
      '--leader-elect',
      '--leader-election-namespace',
      '--leader-election-id',
      '--namespaces',
      '--default-service',
      '--watch-inactivity-timeout',
      '--shutdown-grace-period',
      '--service-qps',
      '--service-burst',
      '--kubeconfig',
    ]) {
      expect(text).toContain(flag);
    }
    expect((await cli(['run', '-h'])).code).toBe(0);
  });
});
