// The apiserver client: requests and watch streams over node:http(s), with bounded bodies and per-request auth.
import type * as NodeHttp from 'node:http';
import type * as NodeHttps from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import { urlToHttpOptions } from 'node:url';
import { http, https } from '../platform/node-http.js';
import { apiErrorFrom, type ApiError } from './api-error.js';
import type { KubeAccess } from './kubeconfig.js';

export interface KubeResponse {
  readonly status: number;
  readonly body: unknown;
  /** Bytes of body read (request() always says; stand-ins for tests may not). */
  readonly bytes?: number;
}

export interface RequestOptions {
  readonly query?: Readonly<Record<string, string>>;
  readonly body?: unknown;
  readonly contentType?: string;
  readonly timeoutMs?: number;
  /** Accept header; JSON objects by default. */
  readonly accept?: string;
  /**
   * The most bytes of response body to read: past it the response is abandoned (its connection closed) and
   * request() rejects with ResponseTooLargeError, so one answer never becomes an unbounded string. Unbounded
   * by default: single objects are bounded by etcd (1.5 MiB); lists set it.
   */
  readonly maxBytes?: number;
}

/**
 * Called once per apiserver request when its answer (or transport failure) is known: the HTTP method,
 * or WATCH for a watch opened with openStream, and the status code ("none" when no response arrived).
 */
export type KubeRequestObserver = (verb: string, code: string, resource: string) => void;

/**
 * The resource a request is about, from its path (/api/v1/namespaces/ns/secrets/name → secrets; a status
 * subresource counts as its resource): bounded, unlike the path, so it can be a metric label.
 */
export function resourceOf(path: string): string {
  const parts = path.split('?')[0]?.split('/').filter(Boolean) ?? [];
  // /api/v1/… or /apis/group/version/…; then optionally namespaces/<ns>/.
  let i = parts[0] === 'api' ? 2 : 3;
  if (parts[i] === 'namespaces' && parts.length > i + 2) i += 2;
  return parts[i] ?? 'none';
}

/** A response body longer than RequestOptions.maxBytes; nothing of it was kept. */
export class ResponseTooLargeError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly maxBytes: number,
  ) {
    super(`${method} ${path}: response body exceeds ${maxBytes} bytes; abandoned`);
  }
}

/**
 * The operator's HTTP access to the apiserver. TLS material is read once; the
 * Authorization header is asked of the KubeAccess per request, which re-reads
 * rotating in-cluster ServiceAccount tokens. Requests share a keep-alive agent;
 * watches, which hold a connection for minutes, get their own.
 */
export class KubeClient {
  private agent: NodeHttp.Agent;
  /** The server's protocol, host and port, parsed once; each request adds its path (no URL object per request). */
  private readonly target: Pick<NodeHttp.RequestOptions, 'protocol' | 'hostname' | 'port'>;
  /** The server URL's own path (an apiserver behind a proxy path), without trailing slash. */
  private readonly pathPrefix: string;
  private readonly transport: typeof http | typeof https;

  private constructor(
    private readonly access: KubeAccess,
    server: URL,
    private readonly makeAgent: () => NodeHttp.Agent,
    private readonly streamAgent: NodeHttp.Agent,
    private readonly userAgent: string,
    private readonly observe: KubeRequestObserver | undefined,
  ) {
    this.agent = makeAgent();
    const { protocol, hostname, port } = urlToHttpOptions(server);
    this.target = { protocol, hostname, port };
    this.pathPrefix = server.pathname.replace(/\/+$/, '');
    this.transport = isPlain(server) ? http : https;
  }

  static create(access: KubeAccess, userAgent = 'usergroup-operator', observe?: KubeRequestObserver): Promise<KubeClient> {
    const tls = access.tls;
    const material: NodeHttps.AgentOptions = {};
    if (tls.ca !== undefined) material.ca = tls.ca;
    if (tls.cert !== undefined) material.cert = tls.cert;
    if (tls.key !== undefined) material.key = tls.key;
    if (tls.rejectUnauthorized !== undefined) material.rejectUnauthorized = tls.rejectUnauthorized;
    if (tls.servername !== undefined) material.servername = tls.servername;
    const server = new URL(access.server);
    const make = (options: NodeHttps.AgentOptions): NodeHttp.Agent =>
      isPlain(server) ? new http.Agent(options) : new https.Agent({ ...material, ...options });
    return Promise.resolve(new KubeClient(access, server, () => make({ keepAlive: true, maxSockets: 32 }), make({ keepAlive: false }), userAgent, observe));
  }

  /** One request with a JSON body; resolves with any status (call() below parses refusals), rejects only on transport errors. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<KubeResponse> {
    const authorization = this.access.authorization();
    const req = this.open(method, path, options, this.agent, authorization instanceof Promise ? await authorization : authorization);
    const timeoutMs = options.timeoutMs ?? 30_000;
    const timer = setTimeout(() => {
      req.request.destroy(new Error(`${method} ${path} timed out after ${timeoutMs} ms`));
      // Pooled sockets to the same apiserver share this one's fate: do not let each of them time out in turn.
      this.resetConnections();
    }, timeoutMs);
    let code = 'none';
    try {
      const res = await req.response;
      code = String(res.statusCode ?? 'none');
      const maxBytes = options.maxBytes ?? Infinity;
      const tooLarge = (): ResponseTooLargeError => {
        // The rest of the body is never read: the connection goes, not back to the pool.
        req.request.destroy();
        return new ResponseTooLargeError(method, path, maxBytes);
      };
      // Known before a byte is read when the apiserver says it (it does not for chunked lists).
      if (Number(res.headers['content-length'] ?? 0) > maxBytes) throw tooLarge();
      const { text, bytes } = await readText(res, maxBytes, tooLarge);
      let body: unknown = text;
      if (text) {
        try {
          body = JSON.parse(text) as unknown;
        } catch {
          // Not JSON: keep the text for the error message.
        }
      }
      return { status: res.statusCode ?? 0, body, bytes };
    } finally {
      clearTimeout(timer);
      this.observe?.(method, code, resourceOf(path));
    }
  }

  /** A streaming GET (watches). */
  async openStream(
    path: string,
    query: Readonly<Record<string, string>>,
    accept?: string,
  ): Promise<{ request: NodeHttp.ClientRequest; response: Promise<NodeHttp.IncomingMessage> }> {
    const opened = this.open('GET', path, { query, ...(accept ? { accept } : {}) }, this.streamAgent, await this.access.authorization());
    const observe = this.observe;
    if (observe)
      void opened.response.then(
        (res) => observe('WATCH', String(res.statusCode ?? 'none'), resourceOf(path)),
        () => observe('WATCH', 'none', resourceOf(path)),
      );
    return opened;
  }

  /**
   * Drops every pooled keep-alive connection (in-flight requests on them fail at
   * once and are retried by their callers). Used when a request timed out: the
   * other pooled connections were opened over the same path and would time out in
   * turn, 30 s each.
   */
  resetConnections(): void {
    const old = this.agent;
    this.agent = this.makeAgent();
    old.destroy();
  }

  /**
   * Closes the idle pooled connections only: the next requests open fresh ones.
   * Cheap enough to do whenever a watch goes silent, since nothing in flight is cut.
   */
  dropIdleConnections(): void {
    for (const sockets of Object.values(this.agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
  }

  close(): void {
    this.agent.destroy();
    this.streamAgent.destroy();
  }

  private open(
    method: string,
    path: string,
    options: RequestOptions,
    agent: NodeHttp.Agent,
    authorization: string | undefined,
  ): { request: NodeHttp.ClientRequest; response: Promise<NodeHttp.IncomingMessage> } {
    const headers: Record<string, string> = { Accept: options.accept ?? 'application/json', 'User-Agent': this.userAgent };
    if (authorization !== undefined) headers['Authorization'] = authorization;
    let payload: string | undefined;
    if (options.body !== undefined) {
      payload = JSON.stringify(options.body);
      headers['Content-Type'] = options.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    const request = this.transport.request({ ...this.target, path: this.pathPrefix + withQuery(path, options.query), method, headers, agent });
    const response = new Promise<NodeHttp.IncomingMessage>((resolve, reject) => {
      request.once('response', resolve);
      request.once('error', reject);
    });
    request.end(payload);
    return { request, response };
  }
}

/** An http: server: no TLS, for the agents and for the requests alike. */
const isPlain = (server: URL): boolean => server.protocol === 'http:';

/** The path with the query appended, each key and value percent-encoded (encodeURIComponent). */
export function withQuery(path: string, query: Readonly<Record<string, string>> | undefined): string {
  if (query === undefined) return path;
  let out = path;
  let separator = path.includes('?') ? '&' : '?';
  for (const k in query) {
    out += `${separator}${encodeURIComponent(k)}=${encodeURIComponent(query[k] ?? '')}`;
    separator = '&';
  }
  return out;
}

/**
 * The body as text, decoded chunk by chunk: each socket buffer can be freed at once, and a list page never
 * exists as one more megabyte-sized Buffer outside the V8 heap (malloc keeps such memory long after it is
 * freed). Buffers in, so the bound counts bytes exactly; the decoder carries a character split across chunks.
 * Listeners rather than `for await`: the async iterator's promise per chunk showed in the profile at 10,000 groups.
 */
function readText(res: NodeHttp.IncomingMessage, maxBytes: number, tooLarge: () => Error): Promise<{ text: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const decoder = new StringDecoder('utf8');
    let text = '';
    let bytes = 0;
    res.on('data', (buffer: Buffer) => {
      bytes += buffer.length;
      if (bytes > maxBytes) {
        res.removeAllListeners('data');
        reject(tooLarge());
        return;
      }
      text += decoder.write(buffer);
    });
    res.once('end', () => resolve({ text: text + decoder.end(), bytes }));
    res.once('error', reject);
    // After 'end' this settles nothing; before it, the connection went (timeout, reset) without an error.
    res.once('close', () => reject(new Error('response closed before its end')));
  });
}

/** What call() needs of a KubeClient; test stand-ins implement just this. */
export type KubeRequester = Pick<KubeClient, 'request'>;

/** A 2xx answer, or the refusal parsed into an ApiError. */
export type ApiResult = ({ readonly ok: true } & KubeResponse) | { readonly ok: false; readonly error: ApiError };

/**
 * request() with a non-2xx answer parsed once, here, into an ApiError: callers ask isNotFound(res.error)… instead
 * of reading status codes, and the error they throw or report carries the apiserver's message. Rejects only on
 * transport errors, as request() does.
 */
export async function call(client: KubeRequester, method: string, path: string, options?: RequestOptions): Promise<ApiResult> {
  const res = await client.request(method, path, options);
  return res.status >= 200 && res.status < 300 ? { ok: true, ...res } : { ok: false, error: apiErrorFrom(method, path, res.status, res.body) };
}
