// One HTTP exchange with the service through got: connect and overall timeouts, a bound on the answer's size.
import type { IncomingHttpHeaders } from 'node:http';
import type { Got } from 'got';
import { importGot } from './load-got.js';

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
