import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/**
 * A plain-http front of the real kube-apiserver (authenticating upstream as the admin kubeconfig does) that hands
 * watch events to its client `delayMs` late, in order, and everything else at once: the moment a client's own
 * write is answered and the moment the watch tells it of someone else's earlier write come apart, as they can on
 * a busy apiserver.
 */
export interface WatchDelayProxy {
  /** A KubeConfig that reaches the apiserver through the proxy (no credentials of its own: the proxy adds them). */
  readonly kc: KubeConfig;
  close(): Promise<void>;
}

export async function startWatchDelayProxy(admin: KubeConfig, delayMs: number): Promise<WatchDelayProxy> {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('the admin kubeconfig has no cluster');
  const upstream = new URL(cluster.server);
  const tls: https.RequestOptions = {};
  await admin.applyToHTTPSOptions(tls);
  const server = http.createServer((req, res) => {
    const target = new URL(req.url ?? '/', upstream);
    const watch = target.searchParams.get('watch') === 'true' || target.searchParams.get('watch') === '1';
    const headers = { ...req.headers, host: upstream.host };
    const up = https.request(
      { ...tls, hostname: upstream.hostname, port: upstream.port, method: req.method, path: `${target.pathname}${target.search}`, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (!watch) {
          answer.pipe(res);
          return;
        }
        // Each chunk leaves delayMs after it came, never before the one ahead of it.
        let ahead = Promise.resolve();
        answer.on('data', (chunk: Buffer) => {
          const due = Date.now() + delayMs;
          ahead = ahead.then(() => new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())))).then(() => void res.write(chunk));
        });
        answer.on('end', () => void ahead.then(() => res.end()));
        answer.on('error', () => res.destroy());
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'proxy', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'proxy' }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy' }],
    currentContext: 'proxy',
  });
  return {
    kc,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
