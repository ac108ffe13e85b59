import { describe, expect, it } from 'vitest';
import { runCommand } from '../../src/cli/commands.js';

function capture(argv: string[]): { code: number; out: string; err: string } {
  let out = '';
  let err = '';
  const code = runCommand(argv, { out: (t) => { out += t; }, err: (t) => { err += t; } });
  return { code, out, err };
}

describe('usergroup-operator command line', () => {
  it('prints the package version', () => {
    const r = capture(['version']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^usergroup-operator \d+\.\d+\.\d+\n$/);
  });

  it('prints usage for help and no command', () => {
    expect(capture([]).out).toContain('usage: usergroup-operator');
    expect(capture(['--help']).code).toBe(0);
  });

  it('rejects an unknown command with exit code 2 and the usage on stderr', () => {
    const r = capture(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('unknown command "frobnicate"');
    expect(r.out).toBe('');
  });
});
