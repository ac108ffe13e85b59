import { readFileSync } from 'node:fs';
import os from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Controller } from '../controller/controller.js';
import type { DefaultConnection } from '../controller/connections.js';
import { KubeClient } from '../kube/http.js';
import { createLogger } from '../observability/log.js';
import { validateServiceUrl } from '../service/connection.js';
import { SecretValue } from '../service/secret-value.js';
import { parseRunConfig, usage, type RunConfig } from './config.js';

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/** Reads the default connection's API key; a failure is a start-up error, not a crash later. */
export function defaultConnection(config: RunConfig, env: Readonly<Record<string, string | undefined>>): { ok: true; value: DefaultConnection | undefined } | { ok: false; error: string } {
  let apiKey: string | undefined;
  if (config.apiKeyFile !== undefined) {
    try {
      apiKey = readFileSync(config.apiKeyFile, 'utf8').trim();
    } catch (err) {
      return { ok: false, error: `cannot read the API key file ${config.apiKeyFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
    }
    if (!apiKey) return { ok: false, error: `the API key file ${config.apiKeyFile} is empty` };
  } else if (env['USERGROUP_API_KEY']) {
    apiKey = env['USERGROUP_API_KEY'].trim();
  }
  if (config.serviceUrl === undefined) {
    return apiKey === undefined ? { ok: true, value: undefined } : { ok: false, error: 'an API key is set but --service-url (USERGROUP_SERVICE_URL) is not' };
  }
  if (apiKey === undefined) return { ok: false, error: '--service-url is set but no API key: use --api-key-file or USERGROUP_API_KEY' };
  const url = validateServiceUrl(config.serviceUrl, config.allowInsecureService);
  if (!url.ok) return { ok: false, error: `--service-url: ${url.message}` };
  return { ok: true, value: { url: url.url, apiKey: new SecretValue(apiKey), allowInsecure: config.allowInsecureService } };
}

export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}

export interface RunningOperator {
  readonly controller: Controller;
  readonly log: Logger;
  stop(): Promise<void>;
}

/** Starts the controller from a parsed configuration (also used by `dev`). */
export async function startOperator(config: RunConfig, connection: DefaultConnection | undefined, log: Logger, kc: KubeConfig): Promise<RunningOperator> {
  const client = await KubeClient.create(kc, 'usergroup-operator');
  const controller = new Controller(
    client,
    {
      namespaces: config.namespaces,
      concurrency: config.concurrency,
      resyncPeriodMs: config.resyncPeriodMs,
      defaultConnection: connection,
      serviceQps: config.serviceQps,
      serviceBurst: config.serviceBurst,
      serviceClient: { timeoutMs: config.serviceTimeoutMs, userAgent: 'usergroup-operator' },
      instance: process.env['POD_NAME'] ?? os.hostname(),
      ...(config.watchInactivityTimeoutMs !== undefined ? { watchInactivityMs: config.watchInactivityTimeoutMs } : {}),
    },
    log,
  );
  await controller.start();
  controller.startWorkers();
  return {
    controller,
    log,
    stop: async () => {
      await controller.stop(config.shutdownGracePeriodMs);
      client.close();
    },
  };
}

export async function runCommand(argv: readonly string[], io: Io, env: Readonly<Record<string, string | undefined>> = process.env): Promise<number> {
  const parsed = parseRunConfig(argv, env);
  if (parsed.ok === 'help') {
    io.out(usage());
    return 0;
  }
  if (!parsed.ok) {
    io.err(`usergroup-operator run: invalid configuration:\n${parsed.errors.map((e) => `  - ${e}`).join('\n')}\n\nsee usergroup-operator run --help\n`);
    return 2;
  }
  const config = parsed.config;
  const connection = defaultConnection(config, env);
  if (!connection.ok) {
    io.err(`usergroup-operator run: invalid configuration:\n  - ${connection.error}\n`);
    return 2;
  }
  const log = createLogger(config.logLevel);
  let kc: KubeConfig;
  try {
    kc = loadKubeConfig(config.kubeconfig);
  } catch (err) {
    io.err(`usergroup-operator run: cannot load a kubeconfig: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  log.info({ namespaces: config.namespaces, concurrency: config.concurrency, defaultConnection: connection.value ? 'configured' : 'none' }, 'starting');
  const operator = await startOperator(config, connection.value, log, kc);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      operator.stop().then(
        () => {
          log.info('stopped');
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err: String(err) }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
