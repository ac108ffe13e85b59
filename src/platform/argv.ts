// Command-line flag scanning in pflag's grammar, shared by every command.
/**
 * The one command-line grammar of every command here (run, the kubectl plugin, sim, dev): pflag's, as kubectl and
 * Kubernetes controllers use it. `--name value`, `--name=value`, `-n value`, `-n=value`, `-nvalue`; a switch is
 * `--name` or `--name=true|false`; `--` ends the flags. Each command keeps its own table of what the values mean.
 */

/** How a flag takes its value. `switch-or-word` also takes a following `true` or `false` (`--leader-elect false`). */
export type Arity = 'value' | 'switch' | 'switch-or-word';

export interface FlagSpec {
  readonly arity: Arity;
  /** One letter, spelled `-x`. */
  readonly short?: string;
}

export interface ScannedFlag {
  /** The long name, without dashes. */
  readonly name: string;
  /** A switch's value is 'true' or 'false'. */
  readonly value: string;
  /** As written (`--namespace`, `-n`), for messages. */
  readonly spelling: string;
}

/**
 * What the scanner refused. `argument` carries no text: a stray argument may be a mistyped secret, and a caller
 * that echoes it would leak it.
 */
export type ScanError =
  | { readonly kind: 'unknown-flag'; readonly spelling: string }
  | { readonly kind: 'missing-value'; readonly spelling: string; readonly name: string }
  | { readonly kind: 'not-a-boolean'; readonly spelling: string; readonly name: string; readonly value: string };

export interface Scanned {
  /** In order; a repeated flag appears once per occurrence. */
  readonly flags: readonly ScannedFlag[];
  /** With their positions (1-based) in argv. */
  readonly positionals: readonly { readonly value: string; readonly position: number }[];
  readonly errors: readonly ScanError[];
}

/** Reads argv against `specs` (keyed by long name). Never throws; every problem is one entry of `errors`. */
export function scanArgv(argv: readonly string[], specs: Readonly<Record<string, FlagSpec>>): Scanned {
  const byShort = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) if (spec.short !== undefined) byShort.set(spec.short, name);
  const flags: ScannedFlag[] = [];
  const positionals: { value: string; position: number }[] = [];
  const errors: ScanError[] = [];

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') {
      argv.slice(i + 1).forEach((value, k) => positionals.push({ value, position: i + 2 + k }));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push({ value: arg, position: i + 1 });
      continue;
    }
    const { spelling, inline } = split(arg);
    const name = spelling.startsWith('--') ? spelling.slice(2) : byShort.get(spelling.slice(1));
    const spec = name === undefined ? undefined : specs[name];
    if (name === undefined || spec === undefined) {
      errors.push({ kind: 'unknown-flag', spelling });
      continue;
    }
    if (spec.arity !== 'value') {
      let value = inline;
      const next = argv[i + 1];
      if (value === undefined && spec.arity === 'switch-or-word' && (next === 'true' || next === 'false')) {
        value = next;
        i++;
      }
      value ??= 'true';
      if (value === 'true' || value === 'false') flags.push({ name, value, spelling });
      else errors.push({ kind: 'not-a-boolean', spelling, name, value });
      continue;
    }
    let value = inline;
    if (value === undefined) {
      const next = argv[i + 1];
      if (next === undefined) {
        errors.push({ kind: 'missing-value', spelling, name });
        continue;
      }
      value = next;
      i++;
    }
    flags.push({ name, value, spelling });
  }
  return { flags, positionals, errors };
}

/** The last value given for a flag (pflag: the last one wins), or undefined. */
export function lastValue(scanned: Scanned, name: string): string | undefined {
  return scanned.flags.findLast((f) => f.name === name)?.value;
}

/** Every value given for a repeatable flag, in order. */
export function allValues(scanned: Scanned, name: string): string[] {
  return scanned.flags.filter((f) => f.name === name).map((f) => f.value);
}

/**
 * The first problem of a command that takes only flags, as one line; undefined when there is none. A stray
 * argument is not quoted (it may be a mistyped secret).
 */
export function flagsOnlyProblem(scanned: Scanned, command: string): string | undefined {
  const [problem] = scanned.errors;
  if (problem?.kind === 'unknown-flag') return `unknown flag ${problem.spelling}`;
  if (problem?.kind === 'missing-value') return `${problem.spelling} needs a value`;
  if (problem) return `${problem.spelling}: "${problem.value}" is not true or false`;
  return scanned.positionals.length > 0 ? `unexpected argument; ${command} takes only flags` : undefined;
}

/** "--flag=value", "-n=value" and pflag's attached shorthand "-nvalue". */
function split(arg: string): { spelling: string; inline: string | undefined } {
  if (arg.startsWith('--')) {
    const eq = arg.indexOf('=');
    return eq < 0 ? { spelling: arg, inline: undefined } : { spelling: arg.slice(0, eq), inline: arg.slice(eq + 1) };
  }
  if (arg.length <= 2) return { spelling: arg, inline: undefined };
  const rest = arg.slice(2);
  return { spelling: arg.slice(0, 2), inline: rest.startsWith('=') ? rest.slice(1) : rest };
}
