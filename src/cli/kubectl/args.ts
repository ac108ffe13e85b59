import { parseGoDuration } from '../go-duration.js';

/** Where to find the cluster, as kubectl's global flags say it. Unset = the kubeconfig's choice. */
export interface ClusterFlags {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly namespace: string | undefined;
}

export type PluginCommand =
  | { readonly kind: 'help' }
  | {
      readonly kind: 'rotate';
      readonly name: string;
      readonly cluster: ClusterFlags;
      readonly timeoutMs: number;
      /** false with --no-wait: annotate and return. */
      readonly wait: boolean;
    }
  | {
      readonly kind: 'status';
      /** undefined: every UserGroup of the namespace (or of all namespaces). */
      readonly name: string | undefined;
      readonly cluster: ClusterFlags;
      readonly allNamespaces: boolean;
      readonly wide: boolean;
    };

/** A usage error: `showUsage` when the whole usage helps more than a one-line hint (no or unknown command). */
export type ParsedArgs = { readonly ok: true; readonly command: PluginCommand } | { readonly ok: false; readonly error: string; readonly showUsage: boolean };

export const DEFAULT_TIMEOUT_MS = 60_000;

type FlagName = 'namespace' | 'kubeconfig' | 'context' | 'timeout' | 'output' | 'all-namespaces' | 'no-wait' | 'help';

/** Long and short spellings; value flags take the next argument or "=value" (pflag rules, as kubectl). */
const FLAGS: Readonly<Record<string, { readonly name: FlagName; readonly takesValue: boolean }>> = {
  '--namespace': { name: 'namespace', takesValue: true },
  '-n': { name: 'namespace', takesValue: true },
  '--kubeconfig': { name: 'kubeconfig', takesValue: true },
  '--context': { name: 'context', takesValue: true },
  '--timeout': { name: 'timeout', takesValue: true },
  '--output': { name: 'output', takesValue: true },
  '-o': { name: 'output', takesValue: true },
  '--all-namespaces': { name: 'all-namespaces', takesValue: false },
  '-A': { name: 'all-namespaces', takesValue: false },
  '--no-wait': { name: 'no-wait', takesValue: false },
  '--help': { name: 'help', takesValue: false },
  '-h': { name: 'help', takesValue: false },
};

/** Which flags each command accepts; anything else is refused rather than silently ignored. */
const ACCEPTS: Readonly<Record<'rotate' | 'status', ReadonlySet<FlagName>>> = {
  rotate: new Set<FlagName>(['namespace', 'kubeconfig', 'context', 'timeout', 'no-wait', 'help']),
  status: new Set<FlagName>(['namespace', 'kubeconfig', 'context', 'output', 'all-namespaces', 'help']),
};

interface Scanned {
  readonly positionals: string[];
  readonly values: Map<FlagName, string>;
}

/**
 * The arguments kubectl passes after "usergroup" (flags may come before or after
 * the command and the name, as with kubectl's own commands).
 */
export function parsePluginArgs(argv: readonly string[]): ParsedArgs {
  const scanned = scan(argv);
  if (!scanned.ok) return { ok: false, error: scanned.error, showUsage: false };
  const { positionals, values } = scanned.value;
  const [command, ...names] = positionals;
  if (values.has('help') || command === 'help') return { ok: true, command: { kind: 'help' } };
  if (command === undefined) return { ok: false, error: 'no command given', showUsage: true };
  if (command !== 'rotate' && command !== 'status') return { ok: false, error: `unknown command "${command}"`, showUsage: true };

  for (const flag of values.keys()) {
    if (!ACCEPTS[command].has(flag)) return { ok: false, error: `${command} does not take --${flag}`, showUsage: false };
  }
  const cluster: ClusterFlags = { kubeconfig: values.get('kubeconfig'), context: values.get('context'), namespace: values.get('namespace') };
  for (const [flag, value] of [
    ['kubeconfig', cluster.kubeconfig],
    ['context', cluster.context],
    ['namespace', cluster.namespace],
  ] as const) {
    if (value === '') return { ok: false, error: `--${flag} must not be empty`, showUsage: false };
  }

  if (command === 'rotate') {
    const [name, ...extra] = names;
    if (name === undefined) return { ok: false, error: 'rotate needs the name of a UserGroup', showUsage: false };
    if (extra.length > 0) return { ok: false, error: `rotate takes one name, got ${names.length}: ${names.join(' ')}`, showUsage: false };
    let timeoutMs = DEFAULT_TIMEOUT_MS;
    const timeout = values.get('timeout');
    if (timeout !== undefined) {
      const parsed = parseGoDuration(timeout);
      if (parsed === undefined || parsed <= 0) {
        return { ok: false, error: `invalid --timeout "${timeout}": want a positive duration such as 30s, 2m or 1m30s`, showUsage: false };
      }
      timeoutMs = parsed;
    }
    return { ok: true, command: { kind: 'rotate', name, cluster, timeoutMs, wait: !values.has('no-wait') } };
  }

  const [name, ...extra] = names;
  if (extra.length > 0) return { ok: false, error: `status takes at most one name, got ${names.length}: ${names.join(' ')}`, showUsage: false };
  const allNamespaces = values.has('all-namespaces');
  // kubectl's own rule: a name is only meaningful inside one namespace.
  if (allNamespaces && name !== undefined) {
    return { ok: false, error: 'a resource cannot be retrieved by name across all namespaces', showUsage: false };
  }
  const output = values.get('output');
  if (output !== undefined && output !== 'wide') return { ok: false, error: `unsupported output format "${output}": only -o wide`, showUsage: false };
  return { ok: true, command: { kind: 'status', name, cluster, allNamespaces, wide: output === 'wide' } };
}

function scan(argv: readonly string[]): { ok: true; value: Scanned } | { ok: false; error: string } {
  const positionals: string[] = [];
  const values = new Map<FlagName, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const split = splitFlag(arg);
    const spec = FLAGS[split.flag];
    if (!spec) return { ok: false, error: `unknown flag: ${split.flag}` };
    if (!spec.takesValue) {
      // pflag accepts --all-namespaces=true|false for booleans.
      if (split.value === undefined || split.value === 'true') values.set(spec.name, 'true');
      else if (split.value === 'false') values.delete(spec.name);
      else return { ok: false, error: `invalid value "${split.value}" for ${split.flag}: want true or false` };
      continue;
    }
    let value = split.value;
    if (value === undefined) {
      const next = argv[i + 1];
      if (next === undefined) return { ok: false, error: `flag needs an argument: ${split.flag}` };
      value = next;
      i++;
    }
    values.set(spec.name, value);
  }
  return { ok: true, value: { positionals, values } };
}

/** "--flag=value", "-n=value" and pflag's attached shorthand "-nvalue". */
function splitFlag(arg: string): { flag: string; value: string | undefined } {
  if (arg.startsWith('--')) {
    const eq = arg.indexOf('=');
    return eq < 0 ? { flag: arg, value: undefined } : { flag: arg.slice(0, eq), value: arg.slice(eq + 1) };
  }
  if (arg.length <= 2) return { flag: arg, value: undefined };
  const flag = arg.slice(0, 2);
  const rest = arg.slice(2);
  return { flag, value: rest.startsWith('=') ? rest.slice(1) : rest };
}
