import net, { type AddressInfo, type Socket } from 'node:net';

/**
 * A byte-level TCP proxy on 127.0.0.1 (TLS passes through untouched), to make a
 * connection between a controller and the kube-apiserver misbehave the way real
 * networks do:
 *  - freeze(): every connection open at that moment stops forwarding bytes in both
 *    directions and is never closed (a NAT entry or a load balancer that silently
 *    dropped the flow); connections made later work normally;
 *  - refuseNew(true): new connections are reset at once (the endpoint is down);
 *    existing ones are untouched;
 *  - cutFrozen(): the frozen connections are reset at last (the client learns that
 *    its connection is gone, having been told nothing of what happened meanwhile).
 */
export interface TcpProxy {
  readonly port: number;
  /** Connections accepted so far (frozen or not). */
  readonly accepted: number;
  /** Connections currently open (both legs), frozen ones included. */
  readonly open: number;
  /** Connections currently frozen. */
  readonly frozen: number;
  freeze(): void;
  cutFrozen(): void;
  refuseNew(refuse: boolean): void;
  /** Destroys every connection and stops listening. Idempotent. */
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  frozen: boolean;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let accepted = 0;
  let refusing = false;

  const server = net.createServer((client) => {
    accepted++;
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect({ host: targetHost, port: targetPort });
    const pair: Pair = { client, upstream, frozen: false };
    pairs.add(pair);
    const forward = (from: Socket, to: Socket): void => {
      from.on('data', (chunk: Buffer) => {
        // A frozen pair reads nothing more (paused); anything already read is dropped, never delivered.
        if (pair.frozen) return;
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => {
            if (!pair.frozen) from.resume();
          });
        }
      });
      from.on('end', () => {
        if (!pair.frozen) to.end();
      });
      from.on('close', () => {
        if (pair.frozen) return;
        to.destroy();
        pairs.delete(pair);
      });
      // Errors end the pair (unless frozen: then the other side must see nothing).
      from.on('error', () => undefined);
    };
    forward(client, upstream);
    forward(upstream, client);
  });
  server.on('error', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;

  return {
    port,
    get accepted() {
      return accepted;
    },
    get open() {
      return pairs.size;
    },
    get frozen() {
      return [...pairs].filter((p) => p.frozen).length;
    },
    freeze() {
      for (const pair of pairs) {
        pair.frozen = true;
        pair.client.pause();
        pair.upstream.pause();
      }
    },
    cutFrozen() {
      for (const pair of [...pairs].filter((p) => p.frozen)) {
        pairs.delete(pair);
        pair.client.resetAndDestroy();
        pair.upstream.destroy();
      }
    },
    refuseNew(refuse: boolean) {
      refusing = refuse;
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const pair of pairs) {
          pair.client.destroy();
          pair.upstream.destroy();
        }
        pairs.clear();
        server.close(() => resolve());
      });
      return closed;
    },
  };
}
