import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request that passed through the proxy, exactly as the client sent it. */
export interface RecordedRequest {
  readonly method: string;
  /** Path and query, e.g. /api/user. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The raw request body, byte for byte (decoded as UTF-8). */
  readonly body: string;
  /** The upstream's status code (undefined if the upstream could not be reached). */
  status: number | undefined;
  /** The upstream's whole answer body (decoded as UTF-8), once it has ended; undefined before, or if it never did. */
  response: string | undefined;
  /** When the whole request had arrived (Date.now()). */
  readonly receivedAt: number;
  /** When the client closed the connection before the answer was passed back (Date.now()), if it did. */
  clientClosedAt: number | undefined;
}

export interface RecordingProxy {
  /** Base URL of the proxy, e.g. http://127.0.0.1:41234 (no trailing slash). */
  readonly url: string;
  /** Every request received so far, in arrival order (a live array). */
  readonly requests: readonly RecordedRequest[];
  /** PUT /api/user requests whose JSON body has this user_group_id. */
  putsFor(userGroupId: string): RecordedRequest[];
  /** POST /api/user requests (rotations) whose JSON body has this current_token. */
  postsWith(token: string): RecordedRequest[];
  stop(): Promise<void>;
}

/**
 * A transparent HTTP proxy in front of the service simulator that records every
 * request (method, path, headers, raw body), the answer's body, and whether the client hung up before its answer. The recorded headers hold the API key
 * and bodies may hold tokens: kept in memory only, for assertions.
 */
export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const upstream = new URL(target);
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const record: RecordedRequest = {
        method: req.method ?? '',
        path: req.url ?? '/',
        headers: { ...req.headers },
        body: body.toString('utf8'),
        status: undefined,
        response: undefined,
        receivedAt: Date.now(),
        clientClosedAt: undefined,
      };
      requests.push(record);
      const headers = { ...req.headers, host: upstream.host, 'content-length': String(body.length) };
      delete headers['transfer-encoding'];
      const forward = httpRequest(
        { protocol: upstream.protocol, hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
        (upstreamRes) => {
          record.status = upstreamRes.statusCode;
          const answer: Buffer[] = [];
          upstreamRes.on('data', (chunk: Buffer) => answer.push(chunk));
          upstreamRes.on('end', () => {
            record.response = Buffer.concat(answer).toString('utf8');
          });
          res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
          upstreamRes.pipe(res);
        },
      );
      // A client that goes away is passed on, as a real proxy would: the upstream sees it too.
      res.on('close', () => {
        if (res.writableFinished) return;
        record.clientClosedAt = Date.now();
        forward.destroy();
      });
      forward.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ success: 0, message: 'recording proxy: upstream unreachable' }));
      });
      forward.end(body);
    });
  });
  const address = await new Promise<AddressInfo>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address() as AddressInfo));
  });
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    putsFor: (userGroupId) => withField(requests, 'PUT', 'user_group_id', userGroupId),
    postsWith: (token) => withField(requests, 'POST', 'current_token', token),
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

function withField(requests: readonly RecordedRequest[], method: string, field: string, value: string): RecordedRequest[] {
  return requests.filter((r) => {
    if (r.method !== method || r.path.split('?')[0] !== '/api/user') return false;
    try {
      return (JSON.parse(r.body) as Record<string, unknown>)[field] === value;
    } catch {
      return false;
    }
  });
}
