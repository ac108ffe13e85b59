import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { simCommand, type SimCommandDeps } from '../../src/sim/command.js';
import type { Simulator } from '../../src/sim/server.js';

interface Run {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** Runs the command; `during` gets the running simulator, and the command stops when it returns. */
async function run(argv: string[], options: { env?: SimCommandDeps['env']; during?: (sim: Simulator) => Promise<void> } = {}): Promise<Run> {
  let out = '';
  let err = '';
  let release: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (release = resolve));
  const code = await simCommand(argv, {
    out: (text) => (out += text),
    err: (text) => (err += text),
    env: options.env ?? {},
    untilStopped: () => stopped,
    onStarted: (sim) => {
      void (options.during ?? (async () => {}))(sim).finally(release);
    },
  });
  return { code, out, err };
}

describe('usergroup-operator sim', () => {
  it('prints help', async () => {
    const result = await run(['--help']);
    expect(result.code).toBe(0);
    expect(result.out).toContain('usage: usergroup-operator sim');
  });

  it.each([
    [['--api-key', 'k', '--port', 'abc'], /--port must be a whole number from 0 to 65535, got "abc"/],
    [['--api-key', 'k', '--port', '70000'], /--port must be a whole number/],
    [['--api-key', 'k', '--error-rate', '1.5'], /--error-rate must be a number from 0 to 1, got "1.5"/],
    [['--api-key', 'k', '--latency-ms', '-3'], /--latency-ms/],
    [['--api-key', 'k', '--error-rate', '0.7', '--hang-rate', '0.7'], /add up to/],
    [['--api-key', 'k', '--frobnicate'], /unknown flag --frobnicate/],
    [['--api-key', 'k', '--port'], /--port needs a value/],
    [['--api-key', 'k', 'stray-secret'], /unexpected argument/],
    [[], /an API key is required/],
    [['--api-key', 'has space'], /API key #1/],
    [['--api-key', 'k', '--created-field', 'token'], /a hidden field needs a name the spec does not use, got "token"/],
    [['--api-key', 'k', '--created-field', 'x', '--environment-tag-field', 'x'], /need two names, got "x" twice/],
    [['--api-key-file', '/nonexistent/keys'], /cannot read --api-key-file \/nonexistent\/keys \(ENOENT\)/],
  ])('exits 2 on %j', async (argv, message) => {
    const result = await run(argv);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(message);
    expect(result.err).not.toContain('stray-secret');
    expect(result.out).toBe('');
  });

  it('names the hidden fields as told (--created-field, --environment-tag-field)', async () => {
    const result = await run(['--api-key', 'k1', '--created-field', 'is_new', '--environment-tag-field', 'env'], {
      during: async (sim) => {
        const put = async (): Promise<Record<string, unknown>> => {
          const response = await fetch(`${sim.url}/api/user`, {
            method: 'PUT',
            headers: { authorization: 'Token k1' },
            body: JSON.stringify({ user_group_id: 'a', name: 'A' }),
          });
          return ((await response.json()) as { user_group: Record<string, unknown> }).user_group;
        };
        const created = await put();
        expect(created).toMatchObject({ is_new: true, env: 'Customer' });
        expect(created).not.toHaveProperty('new_user_group');
        expect(created).not.toHaveProperty('api_environment_tag');
        expect(await put()).toMatchObject({ is_new: false, env: 'Customer' });
      },
    });
    expect(result.code).toBe(0);
  });

  it('runs until stopped, prints its URL, and serves the API', async () => {
    const result = await run(['--api-key', 'k1', '--testing-api-key', 't1', '--retry-after-seconds', '4', '--rate-limit-rate', '1'], {
      during: async (sim) => {
        const response = await fetch(`${sim.url}/api/user`, {
          method: 'PUT',
          headers: { authorization: 'Token t1' },
          body: JSON.stringify({ user_group_id: 'a', name: 'A' }),
        });
        expect(response.status).toBe(429);
        expect(response.headers.get('retry-after')).toBe('4');
      },
    });
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/^usergroup-operator sim: listening on http:\/\/127\.0\.0\.1:\d+\n/);
    expect(result.out).toContain('stopped');
    expect(result.out + result.err).not.toMatch(/k1|t1/);
  });

  it('falls back to USERGROUP_SIM_API_KEY and USERGROUP_SIM_PORT, and reads key files', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'usergroup-sim-cmd-'));
    try {
      let port = 0;
      const probe = await run([], {
        env: { USERGROUP_SIM_API_KEY: 'envkey' },
        during: async (sim) => {
          port = sim.port;
          expect(sim.groups('envkey')).toEqual([]);
        },
      });
      expect(probe.code).toBe(0);
      // Reuse the port the probe got, which is free again now.
      const withPort = await run([], {
        env: { USERGROUP_SIM_API_KEY: 'envkey', USERGROUP_SIM_PORT: String(port) },
        during: async (sim) => {
          expect(sim.port).toBe(port);
        },
      });
      expect(withPort.code).toBe(0);

      const keyFile = path.join(dir, 'keys');
      await writeFile(keyFile, '# team keys\nfile-key-1\n\n  file-key-2  \n');
      const fromFile = await run(['--api-key-file', keyFile], {
        env: { USERGROUP_SIM_API_KEY: 'ignored' },
        during: async (sim) => {
          expect(sim.groups('file-key-1')).toEqual([]);
          expect(sim.groups('file-key-2')).toEqual([]);
          expect(() => sim.groups('ignored')).toThrow();
        },
      });
      expect(fromFile.code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('flushes the state file when stopped', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'usergroup-sim-cmd-'));
    const stateFile = path.join(dir, 'state.json');
    try {
      const result = await run(['--api-key', 'k', '--state-file', stateFile, '--seed', '3'], {
        during: async (sim) => {
          await fetch(`${sim.url}/api/user`, {
            method: 'PUT',
            headers: { authorization: 'Token k' },
            body: JSON.stringify({ user_group_id: 'saved', name: 'S' }),
          });
        },
      });
      expect(result.code).toBe(0);
      expect(await readFile(stateFile, 'utf8')).toContain('"userGroupId":"saved"');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('exits 1 when it cannot start', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'usergroup-sim-cmd-'));
    const stateFile = path.join(dir, 'state.json');
    await writeFile(stateFile, 'garbage');
    try {
      const result = await run(['--api-key', 'k', '--state-file', stateFile]);
      expect(result.code).toBe(1);
      expect(result.err).toMatch(/cannot start: cannot load state file/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
