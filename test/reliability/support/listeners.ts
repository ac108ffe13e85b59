import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP listener that accepts connections and never answers: a black hole for a client's whole timeout. */
export interface Tarpit {
  readonly url: string;
  readonly connections: () => number;
  stop(): Promise<void>;
}

export async function startTarpit(): Promise<Tarpit> {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    // Read and discard; never write.
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** An HTTP listener a tenant might aim a connection at: it records what arrives and answers with a revealing error. */
export interface Listener {
  readonly url: (host?: string) => string;
  readonly connections: () => number;
  readonly requests: () => readonly { readonly authorization: string | undefined; readonly body: string }[];
  stop(): Promise<void>;
}

export const LISTENER_SECRET_TEXT = 'internal-db-host=10.0.0.5 version=redis-7.2';

export async function startListener(): Promise<Listener> {
  let connections = 0;
  const requests: { authorization: string | undefined; body: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ authorization: req.headers.authorization, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ success: 0, message: LISTENER_SECRET_TEXT }));
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: (host = '127.0.0.1') => `http://${host}:${port}`,
    connections: () => connections,
    requests: () => requests,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
