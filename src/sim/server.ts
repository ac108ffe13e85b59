// The service simulator's HTTP server: options, routing, and its start and stop.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleAdmin } from './admin.js';
import { AccountRateLimit } from './account-limit.js';
import { handleUserCall } from './api.js';
import { parseFaults, type Faults } from './faults.js';
import { MAX_BODY_BYTES, sendFailure } from './http-io.js';
import type { RandomSource } from './random.js';
import { StatsRecorder, type SimStats } from './stats.js';
import { DebouncedStateWriter, loadState, serializeState } from './state-file.js';
import { hiddenFieldNames, type HiddenFieldNames } from './responses.js';
import { GroupStore } from './store.js';
import { ApiKeys } from './teams.js';
import { groupView, type SimGroupView } from './views.js';

export interface SimulatorOptions {
  /** 0 (the default) picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Keys whose groups are tagged Customer. Each key is its own team. */
  readonly apiKeys: readonly string[];
  /** Keys whose groups are tagged Testing. A key may be in both lists; it is then a testing key. */
  readonly testingApiKeys?: readonly string[];
  readonly faults?: Partial<Faults>;
  /**
   * The largest request body accepted; larger ones get 413. Default 1 MiB. The spec shows no bound: a smaller
   * one stands for a service stricter than the operator's own limits (the 16 KiB of properties).
   */
  readonly maxBodyBytes?: number;
  /** What the answers call the created indicator and the environment tag (default DEFAULT_HIDDEN_FIELDS: the public API's names). */
  readonly hiddenFields?: Partial<HiddenFieldNames>;
  /** The service's storage: loaded at start when present, rewritten (mode 0600) after mutations. */
  readonly stateFile?: string;
  /** Decides faults; pass seededRandom(n) for repeatable tests. Default Math.random. */
  readonly random?: RandomSource;
  /** Background problems (a failed state write, a handler crash). Default: a line on stderr. */
  readonly onError?: (message: string) => void;
}

export interface Simulator {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  readonly url: string;
  readonly port: number;
  /** Counts since the last reset: of one key's team, or with no key of all calls. */
  stats(apiKey?: string): SimStats;
  resetStats(apiKey?: string): void;
  faults(): Faults;
  /** Replaces all knobs; omitted ones go back to no fault. @throws RangeError on a bad value */
  setFaults(faults: Partial<Faults>): void;
  /** Groups of one key's team, or with no key all groups. Tokens appear only as SHA-256. */
  groups(apiKey?: string): SimGroupView[];
  /** Closes every connection, hung ones included, and writes pending state. Idempotent. */
  stop(): Promise<void>;
}

const STATE_WRITE_DELAY_MS = 100;

function validFaults(input: Partial<Faults>): Faults {
  const faults = parseFaults(input);
  if (!faults.ok) throw new RangeError(faults.message);
  return faults.value;
}

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

function baseUrl(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/**
 * Starts the user-group service simulator.
 * @throws Error on bad options (no key, bad fault values, bad port) or an unreadable state file
 */
export async function startSimulator(options: SimulatorOptions): Promise<Simulator> {
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new RangeError(`port must be a whole number from 0 to 65535, got ${port}`);
  }
  const keys = new ApiKeys(options.apiKeys, options.testingApiKeys);
  const teamOf = (apiKey: string): number => {
    const team = keys.teamForKey(apiKey);
    if (team === undefined) throw new Error('that API key is not configured in this simulator');
    return team.id;
  };
  let faults = validFaults(options.faults ?? {});
  const random = options.random ?? Math.random;
  const onError = options.onError ?? ((message: string) => process.stderr.write(`usergroup-operator sim: ${message}\n`));
  const stats = new StatsRecorder();
  const stopping = new AbortController();

  const stateFile = options.stateFile;
  const records = stateFile === undefined ? [] : await loadState(stateFile);
  let writer: DebouncedStateWriter | undefined;
  const store = new GroupStore(records, () => writer?.schedule());
  if (stateFile !== undefined) {
    writer = new DebouncedStateWriter(
      stateFile,
      () => serializeState(store.list()),
      STATE_WRITE_DELAY_MS,
      (error) => onError(`writing the state file failed: ${error instanceof Error ? error.message : String(error)}`),
    );
  }

  const maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) throw new RangeError(`maxBodyBytes must be a positive whole number, got ${maxBodyBytes}`);
  const hiddenFields = hiddenFieldNames(options.hiddenFields);
  const accountLimit = new AccountRateLimit();
  const apiContext = { keys, store, stats, faults: () => faults, random, stopping: stopping.signal, maxBodyBytes, hiddenFields, accountLimit };
  const adminContext = { keys, store, stats, faults: () => faults, setFaults: (next: Faults) => (faults = next) };

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?', 1)[0] ?? '/';
    if (path === '/api/user') {
      const operation = request.method === 'PUT' ? 'upsert' : request.method === 'POST' ? 'rotate' : undefined;
      if (operation === undefined) {
        sendFailure(response, 405, `method ${request.method ?? ''} is not allowed on /api/user; use PUT to create or update, POST to rotate`, {
          allow: 'PUT, POST',
        });
        return;
      }
      await handleUserCall(apiContext, operation, request, response);
    } else if (path === '/_sim' || path.startsWith('/_sim/')) {
      await handleAdmin(adminContext, path, request, response);
    } else {
      sendFailure(response, 404, 'not found; the service answers PUT and POST /api/user');
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      onError(`request failed: ${error instanceof Error ? error.message : String(error)}`);
      sendFailure(response, 500, 'internal simulator error');
    });
  });
  const address = await listen(server, port, options.host ?? '127.0.0.1');

  let stopped: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    stopping.abort();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // close() alone waits for open connections, and a hung call's never ends on its own.
    server.closeAllConnections();
    await closed;
    await writer?.flush();
  };

  return {
    url: baseUrl(address),
    port: address.port,
    stats: (apiKey) => stats.snapshot(apiKey === undefined ? undefined : teamOf(apiKey)),
    resetStats: (apiKey) => stats.reset(apiKey === undefined ? undefined : teamOf(apiKey)),
    faults: () => faults,
    setFaults: (next) => {
      faults = validFaults(next);
    },
    groups: (apiKey) => store.list(apiKey === undefined ? undefined : teamOf(apiKey)).map(groupView),
    stop: () => (stopped ??= stop()),
  };
}
