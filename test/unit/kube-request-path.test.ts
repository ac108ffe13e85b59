import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeClient, withQuery } from '../../src/kube/http.js';
import type { KubeAccess } from '../../src/kube/kubeconfig.js';

/*
 * The client builds each request's path as a string (no URL object per request): the server URL's own path
 * (an apiserver behind a proxy path) before it, the query percent-encoded after it.
 */

const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A server that answers every request with the path it was asked for. */
async function echoPath(): Promise<string> {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: req.url }));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const access = (server: string): KubeAccess => ({ server, tls: {}, authorization: () => undefined, namespace: undefined, context: 'x' });

async function pathSeen(server: string, path: string, query?: Record<string, string>): Promise<unknown> {
  const client = await KubeClient.create(access(server), 'test');
  try {
    const res = await client.request('GET', path, query ? { query } : {});
    return (res.body as { path: unknown }).path;
  } finally {
    client.close();
  }
}

describe('withQuery', () => {
  it('appends each key and value percent-encoded, after "&" when the path already has a query', () => {
    expect(withQuery('/api/v1/secrets', undefined)).toBe('/api/v1/secrets');
    expect(withQuery('/api/v1/secrets', {})).toBe('/api/v1/secrets');
    expect(withQuery('/api/v1/secrets', { labelSelector: 'a=b,c in (d)', limit: '500' })).toBe('/api/v1/secrets?labelSelector=a%3Db%2Cc%20in%20(d)&limit=500');
    expect(withQuery('/x?watch=1', { continue: 'p&q=r' })).toBe('/x?watch=1&continue=p%26q%3Dr');
  });
});

describe('KubeClient request paths', () => {
  it('puts the server URL’s own path before the request path, without a doubled slash', async () => {
    const base = await echoPath();
    expect(await pathSeen(base, '/api/v1/namespaces')).toBe('/api/v1/namespaces');
    expect(await pathSeen(`${base}/k8s/clusters/c-1`, '/api/v1/namespaces')).toBe('/k8s/clusters/c-1/api/v1/namespaces');
    expect(await pathSeen(`${base}/k8s/clusters/c-1//`, '/api/v1/namespaces', { limit: '1' })).toBe('/k8s/clusters/c-1/api/v1/namespaces?limit=1');
  });
});
