import { describe, expect, it } from 'vitest';
import { runCommand } from '../../src/cli/commands.js';

async function capture(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCommand(argv, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
  });
  return { code, out, err };
}

describe('usergroup-operator command line', () => {
  it('prints the package version', async () => {
    const r = await capture(['version']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^usergroup-operator \d+\.\d+\.\d+\n$/);
  });

  it('prints usage for help and no command', async () => {
    expect((await capture([])).out).toContain('usage: usergroup-operator');
    expect((await capture(['--help'])).code).toBe(0);
  });

  it('rejects an unknown command with exit code 2 and the usage on stderr', async () => {
    const r = await capture(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('unknown command "frobnicate"');
    expect(r.out).toBe('');
  });
});
