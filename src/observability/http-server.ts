// The small HTTP server behind /metrics and the health probes.
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { http } from '../platform/node-http.js';

/** What a route answers; `headers` for the few that need more than a content type (WWW-Authenticate, Retry-After). */
export interface RouteResponse {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A route gets the request for its headers (the metrics route's Authorization); the body is never read. */
export type Handler = (req: IncomingMessage) => Promise<RouteResponse>;

/** A tiny HTTP server for /metrics or /healthz + /readyz; "0" disables it. */
export async function serve(
  address: string,
  routes: Readonly<Record<string, Handler>>,
): Promise<{ server: Server | undefined; port: number | undefined; close(): Promise<void> }> {
  if (address === '0') return { server: undefined, port: undefined, close: () => Promise.resolve() };
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[|\]$/g, '') || undefined;
  const port = Number(address.slice(i + 1));
  const server = http.createServer((req, res) => {
    const route = routes[(req.url ?? '/').split('?')[0] ?? '/'];
    if (!route || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    route(req).then(
      ({ status, contentType, body, headers }) =>
        res.writeHead(status, { ...headers, 'content-type': contentType }).end(req.method === 'HEAD' ? undefined : body),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
