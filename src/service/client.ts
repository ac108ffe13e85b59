// The service client: PUT and POST /api/user, classified into typed results.
import { redactSecrets } from './redact.js';
import { parseOversizedResponse, parseServiceResponse } from './response.js';
import type { SecretValue } from './secret-value.js';
import { describeTransportError } from './transport-error.js';
import { buildUpsertBody } from './upsert-body.js';
import type { ServiceFailureKind, ServiceResult, UpsertRequest } from './types.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { Got } from 'got';
import { importGot } from './load-got.js';

export type ServiceOperation = 'upsert' | 'rotate';

export interface ServiceConnection {
  /** Base URL, possibly with a path prefix; /api/user is appended. Check it with validateServiceUrl first. */
  url: string;
  apiKey: SecretValue;
}

export interface ServiceCallSample {
  operation: ServiceOperation;
  status: number | undefined;
  outcome: ServiceFailureKind | 'ok' | 'aborted';
  durationMs: number;
}

/** What one call may carry besides its request. */
export interface CallOptions {
  /**
   * Withdraws the call (shutdown, lost leadership): one in flight is cut off at once, its connection closed,
   * instead of running to the timeout; one not yet sent is not sent. Either way the call rejects with the signal's
   * reason: a withdrawn call says nothing about the service, so it is no result.
   */
  readonly signal?: AbortSignal | undefined;
}

export interface ServiceClientOptions {
  /** Budget for the whole exchange, body included. Default 10000. */
  timeoutMs?: number;
  /** Budget for DNS, and for the TCP and TLS handshakes, each. Default 3000 (at most timeoutMs). */
  connectTimeoutMs?: number;
  /** Larger answers are not read to the end. Default 1 MiB. */
  maxResponseBytes?: number;
  userAgent?: string;
  /** Called once per call sent, for metrics. */
  observe?: (sample: ServiceCallSample) => void;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** A reachable service completes a handshake in well under a second; past 3 s the address is not answering. */
const DEFAULT_CONNECT_TIMEOUT_MS = 3_000;
const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
const DEFAULT_USER_AGENT = 'usergroup-operator';

function endpointOf(base: string): URL {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    // The URL is not repeated: a malformed one may still contain credentials.
    throw new TypeError('service URL is not an absolute URL');
  }
  url.username = '';
  url.password = '';
  url.search = '';
  url.hash = '';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/api/user`;
  return url;
}

function positive(name: string, value: number, integer: boolean): number {
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new RangeError(`${name} must be a positive ${integer ? 'integer' : 'number'}, got ${value}`);
  }
  return value;
}

/**
 * The client of the analytics service's user-group API. Every call resolves to a ServiceResult, or rejects with
 * its signal's reason when the signal withdrew it first; nothing else throws, and no failure message can carry
 * the API key or a token.
 */
export class ServiceClient {
  readonly #endpoint: URL;
  readonly #apiKey: SecretValue;
  readonly #timeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #userAgent: string;
  readonly #observe: ((sample: ServiceCallSample) => void) | undefined;

  constructor(connection: ServiceConnection, options: ServiceClientOptions = {}) {
    this.#endpoint = endpointOf(connection.url);
    this.#apiKey = connection.apiKey;
    this.#timeoutMs = positive('timeoutMs', options.timeoutMs ?? DEFAULT_TIMEOUT_MS, false);
    this.#connectTimeoutMs = Math.min(this.#timeoutMs, positive('connectTimeoutMs', options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, false));
    this.#maxResponseBytes = positive('maxResponseBytes', options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES, true);
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.#observe = options.observe;
  }

  /** Creates or updates a user group: PUT {url}/api/user. Only a call given a signal can be withdrawn (a rejection). */
  upsert(req: UpsertRequest, options: CallOptions = {}): Promise<ServiceResult> {
    return this.#call('upsert', 'PUT', () => JSON.stringify(buildUpsertBody(req)), [], options.signal);
  }

  /** Rotates a user group's token: POST {url}/api/user with the token currently held. Withdrawn: as upsert. */
  rotate(currentToken: SecretValue, options: CallOptions = {}): Promise<ServiceResult> {
    return this.#call('rotate', 'POST', () => JSON.stringify({ current_token: currentToken.reveal() }), [currentToken], options.signal);
  }

  async #call(
    operation: ServiceOperation,
    method: 'PUT' | 'POST',
    body: () => string,
    extraSecrets: readonly SecretValue[],
    signal: AbortSignal | undefined,
  ): Promise<ServiceResult> {
    signal?.throwIfAborted();
    const started = performance.now();
    const secrets = [this.#apiKey, ...extraSecrets];
    let outcome: ExchangeOutcome | undefined;
    let result: ServiceResult;
    try {
      outcome = await this.#send(method, body(), signal);
      result = this.#classify(outcome, secrets);
    } catch (error) {
      // Only reachable through a bug (e.g. properties that cannot be serialised); keep the promise
      // contract and say nothing about the error object beyond what describeTransportError allows.
      result = {
        ok: false,
        failure: {
          kind: 'unavailable',
          status: outcome?.status,
          message: `client error: ${describeTransportError(error, { timeoutMs: this.#timeoutMs, secrets })}`,
        },
      };
    }
    // Cut off by the signal: whatever error got reports is the abort itself, not the service's doing. An answer
    // that came in full before the abort is still returned: it is a fact the caller may weigh.
    if (outcome?.kind === 'failed' && signal?.aborted) {
      this.#report({ operation, status: outcome.status, outcome: 'aborted', durationMs: performance.now() - started });
      throw signal.reason;
    }
    if (!result.ok) {
      // The service may echo the API key or the token we sent back in its message.
      result.failure.message = redactSecrets(result.failure.message, secrets);
    }
    this.#report({
      operation,
      status: outcome?.status,
      outcome: result.ok ? 'ok' : result.failure.kind,
      durationMs: performance.now() - started,
    });
    return result;
  }

  #send(method: 'PUT' | 'POST', body: string, signal: AbortSignal | undefined): Promise<ExchangeOutcome> {
    return exchange({
      url: this.#endpoint,
      method,
      headers: {
        authorization: `Token ${this.#apiKey.reveal()}`,
        'content-type': 'application/json',
        accept: 'application/json',
        'user-agent': this.#userAgent,
      },
      body,
      timeoutMs: this.#timeoutMs,
      connectTimeoutMs: this.#connectTimeoutMs,
      maxResponseBytes: this.#maxResponseBytes,
      signal,
    });
  }

  #classify(outcome: ExchangeOutcome, secrets: readonly SecretValue[]): ServiceResult {
    switch (outcome.kind) {
      case 'complete':
        return parseServiceResponse(outcome.status, outcome.headers, outcome.body);
      case 'oversized':
        return parseOversizedResponse(outcome.status, outcome.headers, this.#maxResponseBytes);
      case 'failed':
        return {
          ok: false,
          failure: {
            kind: 'unavailable',
            status: outcome.status,
            message: describeTransportError(outcome.error, { timeoutMs: this.#timeoutMs, secrets }),
          },
        };
    }
  }

  #report(sample: ServiceCallSample): void {
    if (this.#observe === undefined) {
      return;
    }
    try {
      this.#observe(sample);
    } catch {
      // A broken metrics hook must not turn a finished call into a failure.
    }
  }
}

export interface ExchangeRequest {
  url: URL;
  method: 'PUT' | 'POST';
  headers: Readonly<Record<string, string>>;
  body: string;
  timeoutMs: number;
  /** Budget for DNS and for the TCP (and TLS) handshake: a black-holed address fails in this, not in timeoutMs. */
  connectTimeoutMs: number;
  maxResponseBytes: number;
  /** Cuts the exchange off: got destroys the request, and with it the connection (the server sees it close). */
  signal: AbortSignal | undefined;
}

/**
 * How one HTTP exchange ended. `failed` carries the raw error for classification only: got's errors hold
 * the request options, headers and all, so they must never travel further than the caller's mapping.
 */
export type ExchangeOutcome =
  | { kind: 'complete'; status: number; headers: IncomingHttpHeaders; body: string }
  | { kind: 'oversized'; status: number; headers: IncomingHttpHeaders }
  | { kind: 'failed'; status: number | undefined; error: unknown };

interface ResponseHead {
  statusCode: number;
  headers: IncomingHttpHeaders;
}

/**
 * Sends one request with got and reads the answer, stopping at `maxResponseBytes` (counted after
 * decompression, so a compressed bomb is caught too). Resolves for every outcome; never rejects.
 */
export async function exchange(req: ExchangeRequest): Promise<ExchangeOutcome> {
  let got: Got;
  try {
    // Loaded at the first call, not with the controller: with the undici its first request loads, ~16 MiB of RSS
    // even as load-got.ts loads it, and a controller restarted over synced groups may never call the service at all.
    got = await importGot();
  } catch (error) {
    return { kind: 'failed', status: undefined, error };
  }
  return new Promise<ExchangeOutcome>((resolve) => {
    let head: ResponseHead | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (outcome: ExchangeOutcome): void => {
      if (!settled) {
        settled = true;
        resolve(outcome);
      }
    };

    let stream: ReturnType<Got['stream']>;
    try {
      stream = got.stream(req.url, {
        method: req.method,
        headers: req.headers,
        body: req.body,
        // Retries and backoff belong to the work queue; got retrying underneath would multiply them.
        retry: { limit: 0 },
        throwHttpErrors: false,
        // A redirect would carry the Authorization header to wherever the service points.
        followRedirect: false,
        // One budget for the whole exchange, body included, so a server that drips bytes still ends.
        timeout: { request: req.timeoutMs, lookup: req.connectTimeoutMs, connect: req.connectTimeoutMs, secureConnect: req.connectTimeoutMs },
        signal: req.signal,
      });
    } catch (error) {
      settle({ kind: 'failed', status: undefined, error });
      return;
    }

    const tooLarge = (status: number, headers: IncomingHttpHeaders): void => {
      settle({ kind: 'oversized', status, headers });
      stream.destroy();
    };

    stream.on('response', (response: ResponseHead) => {
      head = { statusCode: response.statusCode, headers: response.headers };
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > req.maxResponseBytes) {
        tooLarge(head.statusCode, head.headers);
      }
    });
    stream.on('data', (chunk: Buffer) => {
      if (settled) {
        return;
      }
      size += chunk.length;
      if (size > req.maxResponseBytes) {
        tooLarge(head?.statusCode ?? 0, head?.headers ?? {});
        return;
      }
      chunks.push(chunk);
    });
    stream.on('end', () => {
      if (head === undefined) {
        settle({ kind: 'failed', status: undefined, error: new Error('stream ended without a response') });
        return;
      }
      settle({
        kind: 'complete',
        status: head.statusCode,
        headers: head.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
    });
    stream.on('error', (error: unknown) => {
      settle({ kind: 'failed', status: head?.statusCode, error });
    });
    stream.on('close', () => {
      settle({ kind: 'failed', status: head?.statusCode, error: new Error('connection closed before the response ended') });
    });
  });
}
