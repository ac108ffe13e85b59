// The kubectl plugin's command line: kubectl's global flags and each command's own, parsed into a PluginCommand.
import { scanArgv, type FlagSpec, type ScanError } from '../../platform/argv.js';
import { parseGoDuration } from '../../platform/go-duration.js';

/** Where to find the cluster, as kubectl's global flags say it. Unset = the kubeconfig's choice. */
export interface ClusterFlags {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly namespace: string | undefined;
}

export type PluginCommand =
  | { readonly kind: 'help' }
  | {
      /** rotate: a token rotation; sync: one PUT of the group now. */
      readonly kind: 'rotate' | 'sync';
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
    }
  | {
      readonly kind: 'migrate-storage';
      readonly cluster: ClusterFlags;
      readonly timeoutMs: number;
      /** --rewrite: empty patches even where a StorageVersionMigration API is served. */
      readonly rewrite: boolean;
    };

/** A usage error: `showUsage` when the whole usage helps more than a one-line hint (no or unknown command). */
export type ParsedArgs = { readonly ok: true; readonly command: PluginCommand } | { readonly ok: false; readonly error: string; readonly showUsage: boolean };

export const DEFAULT_TIMEOUT_MS = 60_000;
/** migrate-storage waits for kube-controller-manager's migrator, which takes minutes on a large cluster. */
export const DEFAULT_MIGRATION_TIMEOUT_MS = 30 * 60_000;

type FlagName = 'namespace' | 'kubeconfig' | 'context' | 'timeout' | 'output' | 'all-namespaces' | 'no-wait' | 'rewrite' | 'help';
type CommandName = 'rotate' | 'sync' | 'status' | 'migrate-storage';
const COMMANDS: readonly string[] = ['rotate', 'sync', 'status', 'migrate-storage'] satisfies readonly CommandName[];

/** kubectl's spellings and shorthands (pflag rules, see platform/argv.ts). */
const FLAGS: Readonly<Record<FlagName, FlagSpec>> = {
  namespace: { arity: 'value', short: 'n' },
  kubeconfig: { arity: 'value' },
  context: { arity: 'value' },
  timeout: { arity: 'value' },
  output: { arity: 'value', short: 'o' },
  'all-namespaces': { arity: 'switch', short: 'A' },
  'no-wait': { arity: 'switch' },
  rewrite: { arity: 'switch' },
  help: { arity: 'switch', short: 'h' },
};

/** Which flags each command accepts; anything else is refused rather than silently ignored. */
const ACCEPTS: Readonly<Record<CommandName, ReadonlySet<FlagName>>> = {
  rotate: new Set<FlagName>(['namespace', 'kubeconfig', 'context', 'timeout', 'no-wait', 'help']),
  sync: new Set<FlagName>(['namespace', 'kubeconfig', 'context', 'timeout', 'no-wait', 'help']),
  status: new Set<FlagName>(['namespace', 'kubeconfig', 'context', 'output', 'all-namespaces', 'help']),
  // Cluster-wide: no namespace.
  'migrate-storage': new Set<FlagName>(['kubeconfig', 'context', 'timeout', 'rewrite', 'help']),
};

/**
 * The arguments kubectl passes after "usergroup" (flags may come before or after
 * the command and the name, as with kubectl's own commands).
 */
export function parsePluginArgs(argv: readonly string[]): ParsedArgs {
  const scanned = scanArgv(argv, FLAGS);
  const [problem] = scanned.errors;
  if (problem) return { ok: false, error: scanError(problem), showUsage: false };
  const positionals = scanned.positionals.map((p) => p.value);
  // A switch set to false is as if not given.
  const values = new Map<FlagName, string>();
  for (const f of scanned.flags) {
    const name = f.name as FlagName;
    if (FLAGS[name].arity === 'switch' && f.value === 'false') values.delete(name);
    else values.set(name, f.value);
  }
  const [command, ...names] = positionals;
  if (values.has('help') || command === 'help') return { ok: true, command: { kind: 'help' } };
  if (command === undefined) return { ok: false, error: 'no command given', showUsage: true };
  if (!isCommand(command)) return { ok: false, error: `unknown command "${command}"`, showUsage: true };

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

  const timeout = values.get('timeout');
  const timeoutMs = timeout === undefined ? undefined : parseGoDuration(timeout);
  if (timeout !== undefined && (timeoutMs === undefined || timeoutMs <= 0)) {
    return { ok: false, error: `invalid --timeout "${timeout}": want a positive duration such as 30s, 2m or 1m30s`, showUsage: false };
  }

  if (command === 'migrate-storage') {
    if (names.length > 0) return { ok: false, error: `migrate-storage takes no arguments, got ${names.join(' ')}`, showUsage: false };
    return { ok: true, command: { kind: command, cluster, timeoutMs: timeoutMs ?? DEFAULT_MIGRATION_TIMEOUT_MS, rewrite: values.has('rewrite') } };
  }

  if (command === 'rotate' || command === 'sync') {
    const [name, ...extra] = names;
    if (name === undefined) return { ok: false, error: `${command} needs the name of a UserGroup`, showUsage: false };
    if (extra.length > 0) return { ok: false, error: `${command} takes one name, got ${names.length}: ${names.join(' ')}`, showUsage: false };
    return { ok: true, command: { kind: command, name, cluster, timeoutMs: timeoutMs ?? DEFAULT_TIMEOUT_MS, wait: !values.has('no-wait') } };
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

function isCommand(word: string): word is CommandName {
  return COMMANDS.includes(word);
}

function scanError(e: ScanError): string {
  switch (e.kind) {
    case 'unknown-flag':
      return `unknown flag: ${e.spelling}`;
    case 'missing-value':
      return `flag needs an argument: ${e.spelling}`;
    case 'not-a-boolean':
      return `invalid value "${e.value}" for ${e.spelling}: want true or false`;
  }
}
