import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeClient, resourceOf } from '../../src/kube/http.js';
import type { KubeAccess } from '../../src/kube/kubeconfig.js';
import { Metrics } from '../../src/observability/metrics.js';

/*
 * usergroup_kube_requests_total{verb,code}: the counter the benchmark reads to show the controller does
 * not poll the apiserver. Every KubeClient request and every watch opened is counted once, with its code.
 */

const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) await new Promise((resolve) => s.close(resolve));
});

async function fakeApiserver(): Promise<string> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}\n');
      return;
    }
    if (url.pathname.endsWith('/missing')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"kind":"Status","reason":"NotFound"}');
      return;
    }
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"kind":"Secret"}');
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function kubeConfig(server: string): KubeAccess {
  return { server, tls: {}, authorization: () => Promise.resolve(undefined), namespace: undefined, context: 'x' };
}

async function counted(metrics: Metrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await metrics.kubeRequests.get()).values) out[`${String(v.labels.verb)} ${String(v.labels.resource)} ${String(v.labels.code)}`] = v.value;
  return out;
}

describe('usergroup_kube_requests_total', () => {
  it('counts every request and watch open by verb, resource and code, "none" without an answer', async () => {
    const metrics = new Metrics('test');
    const url = await fakeApiserver();
    const client = await KubeClient.create(kubeConfig(url), 'test', (verb, code, resource) => metrics.observeKubeRequest(verb, code, resource));
    await client.request('GET', '/api/v1/namespaces/a/secrets/s');
    await client.request('GET', '/api/v1/namespaces/a/secrets/s');
    await client.request('GET', '/api/v1/namespaces/a/secrets/missing');
    await client.request('PATCH', '/apis/usergroup.dev/v1/namespaces/a/usergroups/x/status', {
      body: { status: {} },
      contentType: 'application/merge-patch+json',
    });
    const stream = await client.openStream('/api/v1/namespaces/a/secrets', { watch: 'true' });
    const res = await stream.response;
    res.resume();
    await new Promise((resolve) => res.once('end', resolve));
    client.close();

    // Nothing listens on this port any more: a transport failure still counts, as "none".
    const closed = await fakeApiserver();
    const last = servers.pop();
    await new Promise((resolve) => last?.close(resolve));
    const failing = await KubeClient.create(kubeConfig(closed), 'test', (verb, code, resource) => metrics.observeKubeRequest(verb, code, resource));
    await expect(failing.request('DELETE', '/api/v1/namespaces/a/secrets/s')).rejects.toThrow();
    failing.close();

    expect(await counted(metrics)).toEqual({
      'GET secrets 200': 2,
      'GET secrets 404': 1,
      'PATCH usergroups 200': 1,
      'WATCH secrets 200': 1,
      'DELETE secrets none': 1,
    });
    expect(await metrics.registry.metrics()).toContain('usergroup_kube_requests_total{verb="GET",resource="secrets",code="200"} 2');
  });

  it('counts nothing when no observer is given (the kubectl plugin)', async () => {
    const url = await fakeApiserver();
    const client = await KubeClient.create(kubeConfig(url), 'test');
    expect((await client.request('GET', '/x')).status).toBe(200);
    client.close();
  });
});

describe('resourceOf', () => {
  it('names the resource of core, group, namespaced, cluster-scoped and subresource paths', () => {
    expect(resourceOf('/api/v1/namespaces/a/secrets/s')).toBe('secrets');
    expect(resourceOf('/api/v1/namespaces')).toBe('namespaces');
    expect(resourceOf('/api/v1/namespaces/a')).toBe('namespaces');
    expect(resourceOf('/api/v1/secrets?watch=true')).toBe('secrets');
    expect(resourceOf('/apis/coordination.k8s.io/v1/namespaces/op/leases/x')).toBe('leases');
    expect(resourceOf('/apis/usergroup.dev/v1alpha1/usergroupclaims/ugc-1')).toBe('usergroupclaims');
    expect(resourceOf('/apis/usergroup.dev/v1/namespaces/a/usergroups/x/status')).toBe('usergroups');
    expect(resourceOf('/apis/authorization.k8s.io/v1/subjectaccessreviews')).toBe('subjectaccessreviews');
  });
});
