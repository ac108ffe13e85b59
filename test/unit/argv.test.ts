import { describe, expect, it } from 'vitest';
import { allValues, flagsOnlyProblem, lastValue, scanArgv, type FlagSpec } from '../../src/platform/argv.js';

const SPECS: Record<string, FlagSpec> = {
  namespace: { arity: 'value', short: 'n' },
  key: { arity: 'value' },
  all: { arity: 'switch', short: 'A' },
  elect: { arity: 'switch-or-word' },
};

describe('scanArgv: the one pflag grammar of every command', () => {
  it('reads long, "=", short, "-n=" and attached shorthand values', () => {
    for (const argv of [['--namespace', 'a'], ['--namespace=a'], ['-n', 'a'], ['-n=a'], ['-na']]) {
      const scanned = scanArgv(argv, SPECS);
      expect(scanned.errors, JSON.stringify(argv)).toEqual([]);
      expect(lastValue(scanned, 'namespace'), JSON.stringify(argv)).toBe('a');
    }
  });

  it('keeps every occurrence in order; the last one wins for a single value', () => {
    const scanned = scanArgv(['--key', 'k1', '-n', 'a', '--key=k2', '-n', 'b'], SPECS);
    expect(allValues(scanned, 'key')).toEqual(['k1', 'k2']);
    expect(lastValue(scanned, 'namespace')).toBe('b');
    expect(lastValue(scanned, 'all')).toBeUndefined();
  });

  it('a switch is bare or =true|false; only switch-or-word takes a following true or false', () => {
    expect(lastValue(scanArgv(['-A'], SPECS), 'all')).toBe('true');
    expect(lastValue(scanArgv(['--all=false'], SPECS), 'all')).toBe('false');
    const word = scanArgv(['--all', 'false'], SPECS);
    expect(lastValue(word, 'all')).toBe('true');
    expect(word.positionals).toEqual([{ value: 'false', position: 2 }]);
    const elect = scanArgv(['--elect', 'false', 'x'], SPECS);
    expect(lastValue(elect, 'elect')).toBe('false');
    expect(elect.positionals).toEqual([{ value: 'x', position: 3 }]);
    expect(lastValue(scanArgv(['--elect', 'maybe'], SPECS), 'elect')).toBe('true');
  });

  it('"--" ends the flags: what follows is positional, with its position', () => {
    const scanned = scanArgv(['a', '--', '-n', '--key'], SPECS);
    expect(scanned.positionals).toEqual([
      { value: 'a', position: 1 },
      { value: '-n', position: 3 },
      { value: '--key', position: 4 },
    ]);
    expect(scanned.flags).toEqual([]);
  });

  it('reports every problem and goes on: unknown flags, missing values, non-boolean switches', () => {
    const scanned = scanArgv(['--nope', '-x', '--all=yes', '--key'], SPECS);
    expect(scanned.errors).toEqual([
      { kind: 'unknown-flag', spelling: '--nope' },
      { kind: 'unknown-flag', spelling: '-x' },
      { kind: 'not-a-boolean', spelling: '--all', name: 'all', value: 'yes' },
      { kind: 'missing-value', spelling: '--key', name: 'key' },
    ]);
  });

  it("an unknown flag's value is left as a positional (the caller decides whether to echo it)", () => {
    const scanned = scanArgv(['--nope', 'secret'], SPECS);
    expect(scanned.errors).toEqual([{ kind: 'unknown-flag', spelling: '--nope' }]);
    expect(scanned.positionals).toEqual([{ value: 'secret', position: 2 }]);
  });

  it('a lone "-" is positional (stdin, by convention)', () => {
    expect(scanArgv(['-'], SPECS).positionals).toEqual([{ value: '-', position: 1 }]);
  });
});

describe('flagsOnlyProblem: the one-line refusal of sim and dev', () => {
  it('names the first problem, and never quotes a stray argument', () => {
    expect(flagsOnlyProblem(scanArgv(['--nope'], SPECS), 'sim')).toBe('unknown flag --nope');
    expect(flagsOnlyProblem(scanArgv(['--key'], SPECS), 'sim')).toBe('--key needs a value');
    expect(flagsOnlyProblem(scanArgv(['--all=yes'], SPECS), 'sim')).toBe('--all: "yes" is not true or false');
    expect(flagsOnlyProblem(scanArgv(['--key', 'k', 'sekrit'], SPECS), 'dev')).toBe('unexpected argument; dev takes only flags');
    expect(flagsOnlyProblem(scanArgv(['--key', 'k', '-A'], SPECS), 'dev')).toBeUndefined();
  });
});
