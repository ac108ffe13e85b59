// `usergroup-operator sim`: the simulator's flags, and running it until a signal stops it.
import { readFile } from 'node:fs/promises';
import { allValues, flagsOnlyProblem, lastValue, scanArgv, type FlagSpec, type Scanned } from '../platform/argv.js';
import { parseFaults, type Faults } from './faults.js';
import { seededRandom } from './random.js';
import { hiddenFieldNames, type HiddenFieldNames } from './responses.js';
import { startSimulator, type Simulator, type SimulatorOptions } from './server.js';
import { ApiKeys } from './teams.js';

const simUsage = `usage: usergroup-operator sim [flags]

Runs the user-group service simulator: PUT /api/user (create or update), POST /api/user
(rotate), plus admin endpoints under /_sim/ (stats, faults, groups; an API key is required).

flags:
  --port <p>                  port to listen on (default $USERGROUP_SIM_PORT, else 0 = a free port)
  --host <addr>               address to listen on (default 127.0.0.1)
  --api-key <k>               an API key (Customer team); repeatable
  --testing-api-key <k>       an API key whose groups are tagged Testing; repeatable
  --api-key-file <path>       API keys one per line (blank lines and # comments skipped); repeatable
                              with no key flag, $USERGROUP_SIM_API_KEY is the key
  --state-file <path>         load groups from and save them to this file (mode 0600)
  --max-body-bytes <n>        answer 413 to request bodies above n bytes (default 1048576)
  --created-field <name>      what answers call the created indicator (default new_user_group)
  --environment-tag-field <name>
                              what answers call the environment tag (default api_environment_tag)
  --latency-ms <n>            latency added to every API call
  --latency-jitter-ms <n>     random extra latency of 0..n ms
  --spike-rate <f>            fraction of calls delayed by --spike-ms, then answered normally
  --spike-ms <n>              length of a latency spike
  --error-rate <f>            fraction of calls answered 503 (not applied)
  --rate-limit-rate <f>       fraction of calls answered 429 (not applied)
  --retry-after-seconds <n>   Retry-After of a 429 (default 1)
  --hang-rate <f>             fraction of calls never answered (not applied)
  --account-requests-per-minute <n>
                              the account's rate limit: calls per API key in any 60 s, beyond it 429 with
                              Retry-After (default 0: none; the real service documents 180)
  --seed <n>                  seed fault decisions, for repeatable runs
  -h, --help                  show this help

Fractions are from 0 to 1. More knobs (hostile answers) via PUT /_sim/faults.
Stop with Ctrl-C or SIGTERM; pending state is written first.
`;

export interface SimCommandDeps {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Resolves when the simulator should stop. Default: the first SIGINT or SIGTERM. */
  readonly untilStopped: () => Promise<void>;
  /** Called once the simulator listens; lets a test reach it. */
  readonly onStarted: (simulator: Simulator) => void;
}

const FAULT_FLAGS = {
  'latency-ms': { knob: 'latencyMs', kind: 'whole' },
  'latency-jitter-ms': { knob: 'latencyJitterMs', kind: 'whole' },
  'spike-rate': { knob: 'spikeRate', kind: 'rate' },
  'spike-ms': { knob: 'spikeMs', kind: 'whole' },
  'error-rate': { knob: 'errorRate', kind: 'rate' },
  'rate-limit-rate': { knob: 'rateLimitRate', kind: 'rate' },
  'retry-after-seconds': { knob: 'retryAfterSeconds', kind: 'whole' },
  'account-requests-per-minute': { knob: 'accountRequestsPerMinute', kind: 'whole' },
  'hang-rate': { knob: 'hangRate', kind: 'rate' },
} as const satisfies Record<string, { knob: keyof Faults; kind: 'rate' | 'whole' }>;

const value: FlagSpec = { arity: 'value' };
const FLAGS: Readonly<Record<string, FlagSpec>> = {
  port: value,
  host: value,
  'api-key': value,
  'testing-api-key': value,
  'api-key-file': value,
  'state-file': value,
  'max-body-bytes': value,
  'created-field': value,
  'environment-tag-field': value,
  seed: value,
  help: { arity: 'switch', short: 'h' },
  ...Object.fromEntries(Object.keys(FAULT_FLAGS).map((flag) => [flag, value])),
};

class UsageError extends Error {}

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.on('SIGINT', done);
    process.on('SIGTERM', done);
  });
}

function defaultDeps(): SimCommandDeps {
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
    untilStopped: waitForSignal,
    onStarted: () => undefined,
  };
}

function wholeNumber(flag: string, text: string, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) > max) {
    throw new UsageError(`--${flag} must be a whole number from 0 to ${max}, got "${text}"`);
  }
  return Number(text);
}

function fraction(flag: string, text: string): number {
  const value = Number(text);
  if (!/^\d*\.?\d+$/.test(text) || value > 1) {
    throw new UsageError(`--${flag} must be a number from 0 to 1, got "${text}"`);
  }
  return value;
}

async function keysFromFile(path: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : 'unreadable';
    throw new UsageError(`cannot read --api-key-file ${path} (${code})`);
  }
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

function parseFlags(argv: readonly string[]): Scanned | 'help' {
  const scanned = scanArgv(argv, FLAGS);
  if (lastValue(scanned, 'help') === 'true') return 'help';
  const problem = flagsOnlyProblem(scanned, 'sim');
  if (problem) throw new UsageError(problem);
  return scanned;
}

async function buildOptions(values: Scanned, env: SimCommandDeps['env']): Promise<SimulatorOptions> {
  const portText = lastValue(values, 'port') ?? env.USERGROUP_SIM_PORT;
  const port = portText === undefined ? 0 : wholeNumber(lastValue(values, 'port') === undefined ? 'port (USERGROUP_SIM_PORT)' : 'port', portText, 65_535);

  const apiKeys = allValues(values, 'api-key');
  for (const file of allValues(values, 'api-key-file')) apiKeys.push(...(await keysFromFile(file)));
  const testingApiKeys = allValues(values, 'testing-api-key');
  const envKey = env.USERGROUP_SIM_API_KEY;
  if (apiKeys.length === 0 && testingApiKeys.length === 0 && envKey !== undefined && envKey !== '') apiKeys.push(envKey);
  if (apiKeys.length === 0 && testingApiKeys.length === 0) {
    throw new UsageError('an API key is required: --api-key, --testing-api-key, --api-key-file or USERGROUP_SIM_API_KEY');
  }
  try {
    // Checked here so that a bad key is a usage error (exit 2), not a failure to start.
    new ApiKeys(apiKeys, testingApiKeys);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }

  const faults: Partial<Record<keyof Faults, number>> = {};
  for (const [flag, { knob, kind }] of Object.entries(FAULT_FLAGS)) {
    const text = lastValue(values, flag);
    if (text === undefined) continue;
    faults[knob] =
      kind === 'rate'
        ? fraction(flag, text)
        : wholeNumber(flag, text, knob === 'retryAfterSeconds' ? 86_400 : knob === 'accountRequestsPerMinute' ? 1_000_000 : 600_000);
  }
  const checked = parseFaults(faults);
  if (!checked.ok) throw new UsageError(checked.message);

  const seedText = lastValue(values, 'seed');
  const host = lastValue(values, 'host');
  const stateFile = lastValue(values, 'state-file');
  const maxBody = lastValue(values, 'max-body-bytes');
  const hiddenFields = namedHiddenFields(lastValue(values, 'created-field'), lastValue(values, 'environment-tag-field'));
  return {
    hiddenFields,
    port,
    apiKeys,
    testingApiKeys,
    faults: checked.value,
    ...(host === undefined ? {} : { host }),
    ...(stateFile === undefined ? {} : { stateFile }),
    ...(maxBody === undefined ? {} : { maxBodyBytes: Math.max(1, wholeNumber('max-body-bytes', maxBody, 64 * 1024 * 1024)) }),
    ...(seedText === undefined ? {} : { random: seededRandom(wholeNumber('seed', seedText, 4_294_967_295)) }),
  };
}

function namedHiddenFields(created: string | undefined, environmentTag: string | undefined): HiddenFieldNames {
  try {
    return hiddenFieldNames({ ...(created === undefined ? {} : { created }), ...(environmentTag === undefined ? {} : { environmentTag }) });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

/**
 * `usergroup-operator sim`: runs the simulator until SIGINT/SIGTERM.
 * @returns 0 after a clean stop, 2 on bad flags, 1 when it cannot start or save its state
 */
export async function simCommand(argv: readonly string[], deps: Partial<SimCommandDeps> = {}): Promise<number> {
  const io = { ...defaultDeps(), ...deps };
  let options: SimulatorOptions;
  try {
    const values = parseFlags(argv);
    if (values === 'help') {
      io.out(simUsage);
      return 0;
    }
    options = await buildOptions(values, io.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`usergroup-operator sim: ${error.message}\n\n${simUsage}`);
    return 2;
  }

  let simulator: Simulator;
  try {
    simulator = await startSimulator({ ...options, onError: (message) => io.err(`usergroup-operator sim: ${message}\n`) });
  } catch (error) {
    io.err(`usergroup-operator sim: cannot start: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  const stopped = io.untilStopped();
  io.out(`usergroup-operator sim: listening on ${simulator.url}\n`);
  io.onStarted(simulator);
  await stopped;
  try {
    await simulator.stop();
  } catch (error) {
    io.err(`usergroup-operator sim: stopped, but saving the state failed: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  io.out('usergroup-operator sim: stopped\n');
  return 0;
}
