import type { BenchCluster } from './cluster.js';
import { parsePrometheus, type PromSamples } from './controller.js';

/**
 * The apiserver's own count of the requests an operator makes: apiserver_request_total on the resources the
 * operators read and write (UserGroups and the usergroup.dev kinds, Secrets, Events; namespaces read), by "VERB resource[/sub]".
 * Counted at the apiserver, not by each operator's client, so the TypeScript operator and the Go peer are measured
 * by the same instrument. Only one operator runs at a time, so the differences are its own (plus the bench's
 * convergence watches, the same for both). Leases are left out: the apiserver renews its own every 10 s and the
 * operators run without leader election. A watch is counted when it ends: read the counts after the process stops.
 */
export function operatorRequests(metrics: PromSamples): Record<string, number> {
  return byVerbAndResource(metrics, 'apiserver_request_total');
}

/**
 * The requests on the operators' resources open now (apiserver_longrunning_requests: watches), by "VERB resource",
 * whoever holds them (kube-controller-manager's garbage collector watches them too): the difference between two
 * readings shows the watches opened and not yet counted by apiserver_request_total.
 */
export function openRequests(metrics: PromSamples): Record<string, number> {
  return byVerbAndResource(metrics, 'apiserver_longrunning_requests');
}

const operatorResource = (group: string, resource: string): boolean => group === 'usergroup.dev' || resource === 'secrets' || resource === 'events';

/**
 * Namespaces are read by the TypeScript operator (its namespaces informer, for the rules' namespaceSelector), so
 * their LISTs and WATCHes count; their writes are the bench's own (each run's namespaces made and deleted). The
 * garbage collector's and namespace controller's watches of namespaces are renewed every 5–10 minutes, for either
 * operator alike.
 */
const operatorRead = (group: string, resource: string, verb: string): boolean =>
  group === '' && resource === 'namespaces' && (verb === 'LIST' || verb === 'WATCH');

function byVerbAndResource(metrics: PromSamples, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of metrics.samples) {
    if (s.name !== name) continue;
    const { group = '', resource = '', subresource = '', verb = '' } = s.labels;
    if (!operatorResource(group, resource) && !operatorRead(group, resource, verb)) continue;
    const key = `${verb} ${resource}${subresource ? `/${subresource}` : ''}`;
    out[key] = (out[key] ?? 0) + s.value;
  }
  return out;
}

/**
 * Objects stored of the operators' kinds, Secrets and Events, by resource: apiserver_resource_objects (its
 * periodic estimate), or apiserver_storage_objects on apiservers before it.
 */
export function storedObjects(metrics: PromSamples): Record<string, number> {
  const name = metrics.samples.some((s) => s.name === 'apiserver_resource_objects') ? 'apiserver_resource_objects' : 'apiserver_storage_objects';
  const out: Record<string, number> = {};
  for (const s of metrics.samples) {
    if (s.name !== name) continue;
    // apiserver_storage_objects has resource="usergroups.usergroup.dev" and no group label.
    const [resource = '', group = s.labels['group'] ?? ''] = (s.labels['resource'] ?? '').split(/\.(.*)/);
    if (operatorResource(group, resource) && s.value > 0) out[resource] = (out[resource] ?? 0) + s.value;
  }
  return out;
}

/** The apiserver's /metrics, as the bench's admin client reads it. */
export async function apiserverMetrics(cluster: BenchCluster): Promise<PromSamples> {
  const res = await cluster.client.request('GET', '/metrics', { accept: 'text/plain', timeoutMs: 60_000 });
  if (res.status !== 200 || typeof res.body !== 'string') throw new Error(`apiserver /metrics: HTTP ${res.status}`);
  return parsePrometheus(res.body);
}

/**
 * Waits until nobody touches the operators' resources: their request count unchanged for `quietMs`. The garbage
 * collector of kube-controller-manager works off a deleted namespace's owned objects (GETs of Secrets) for a while
 * after the namespace is gone, and those requests must not be counted as the next operator's. Resolves with how
 * long it waited; gives up (and resolves) after `timeoutMs`.
 */
export async function waitQuiet(cluster: BenchCluster, quietMs = 3000, timeoutMs = 120_000): Promise<{ waitedMs: number; quiet: boolean }> {
  const started = performance.now();
  const sum = async (): Promise<number> => Object.values(operatorRequests(await apiserverMetrics(cluster))).reduce((a, b) => a + b, 0);
  let last = await sum();
  let since = performance.now();
  while (performance.now() - started < timeoutMs) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = await sum();
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since >= quietMs) return { waitedMs: performance.now() - started, quiet: true };
  }
  return { waitedMs: performance.now() - started, quiet: false };
}
