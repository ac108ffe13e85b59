import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../src/api/constants.js';
import { repoRoot } from '../repo-root.js';
import { ControlPlane } from '../controlplane/controlplane.js';
import { KubeClient } from '../../src/kube/http.js';
import { loadKubeAccess, type KubeAccess } from '../../src/kube/kubeconfig.js';
import { paths } from '../../src/kube/paths.js';
import { watchOnce, type WatchEvent } from '../../src/kube/watch-stream.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import { OPERATIONS, OUTCOMES, type SimStats } from '../../src/sim/stats.js';
import { placeOf } from './spread.js';
import { forEachBounded } from './stats.js';

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const FIELD_MANAGER = 'usergroup-bench';

/** The bench's world: a private control plane, the simulator in this process, and an admin client. */
export class BenchCluster {
  private constructor(
    readonly cp: ControlPlane,
    readonly sim: Simulator,
    readonly access: KubeAccess,
    readonly client: KubeClient,
    /** The controller's API key (its own team at the simulator). */
    readonly controllerKey: string,
    /** The limit script's API key, so its calls and groups stay apart from the controller's. */
    readonly limitKey: string,
    /** The Go peer's API key (the `peer` phase), so its calls are counted apart from the controller's. */
    readonly peerKey: string,
  ) {}

  /** `etcdQuotaBackendBytes`: etcd's --quota-backend-bytes (the `scale` phase's 100,000 groups outgrow the 2 GiB default). */
  static async start(latencyMs: number, progress: (line: string) => void, options: { etcdQuotaBackendBytes?: number } = {}): Promise<BenchCluster> {
    const cp = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')], progress, ...options });
    const controllerKey = `bench-${randomBytes(12).toString('hex')}`;
    const limitKey = `bench-limit-${randomBytes(12).toString('hex')}`;
    const peerKey = `bench-peer-${randomBytes(12).toString('hex')}`;
    const sim = await startSimulator({ apiKeys: [controllerKey, limitKey, peerKey], faults: { latencyMs } });
    const access = await loadKubeAccess({ path: cp.kubeconfigPath });
    const client = await KubeClient.create(access, 'usergroup-bench');
    return new BenchCluster(cp, sim, access, client, controllerKey, limitKey, peerKey);
  }

  async stop(): Promise<void> {
    this.client.close();
    await this.sim.stop();
    await this.cp.stop();
  }

  /**
   * The controller's connection for a namespace, as a cluster admin sets it up: the API key in a Secret and a
   * ClusterUserGroupService admitting that namespace for any id. Returns its name (for --default-service).
   */
  async connectTo(namespace: string): Promise<string> {
    return this.connect(`bench-${namespace}`, namespace, [namespace]);
  }

  /**
   * One connection for many namespaces (the scale phase's spread): the API key in a Secret of `home` and one
   * ClusterUserGroupService whose tenant rule names them all. One rule by name rather than a namespaceSelector:
   * admission then does not hang on the namespace informer's labels, and 100 names are a small object; and one
   * service, since --default-service names one. Returns its name.
   */
  async connectToAll(home: string, namespaces: readonly string[]): Promise<string> {
    return this.connect(`bench-${home}`, home, namespaces);
  }

  private async connect(name: string, home: string, namespaces: readonly string[]): Promise<string> {
    const secret = await this.client.request('POST', paths.secrets(home), {
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'bench-api-key' }, stringData: { apiKey: this.controllerKey } },
    });
    if (secret.status !== 201 && secret.status !== 409) throw new Error(`creating the API-key Secret in ${home}: HTTP ${secret.status}`);
    const service = await this.client.request('POST', paths.clusterUserGroupServices(), {
      body: {
        apiVersion: 'usergroup.dev/v1',
        kind: 'ClusterUserGroupService',
        metadata: { name },
        spec: {
          url: this.sim.url,
          apiKeySecretRef: { namespace: home, name: 'bench-api-key' },
          tenants: [{ namespaces: [...namespaces], userGroupIds: { prefix: '' } }],
        },
      },
    });
    if (service.status !== 201 && service.status !== 409) throw new Error(`creating ClusterUserGroupService ${name}: HTTP ${service.status}`);
    return name;
  }

  async createNamespace(prefix: string): Promise<string> {
    const name = `${prefix}-${randomBytes(3).toString('hex')}`;
    const res = await this.client.request('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
    if (res.status !== 201) throw new Error(`creating namespace ${name}: HTTP ${res.status}`);
    return name;
  }

  /**
   * Deletes a namespace and waits until the namespace controller has removed everything in it, so the next
   * measurement does not run against the objects (and the deletion work) of the previous one. The connection made
   * for it (connectTo, connectToAll) goes too, as an admin removes a tenant's rule with its namespace: its rule would
   * otherwise go on giving every id to a namespace name, and so bind no id to the next run's namespace.
   */
  async deleteNamespace(name: string, timeoutMs = 900_000): Promise<number> {
    const started = performance.now();
    const res = await this.client.request('DELETE', `/api/v1/namespaces/${name}`);
    if (res.status !== 200 && res.status !== 202 && res.status !== 404) throw new Error(`deleting namespace ${name}: HTTP ${res.status}`);
    const connection = await this.client.request('DELETE', `${paths.clusterUserGroupServices()}/bench-${name}`);
    if (connection.status !== 200 && connection.status !== 404) throw new Error(`deleting ClusterUserGroupService bench-${name}: HTTP ${connection.status}`);
    for (;;) {
      const got = await this.client.request('GET', `/api/v1/namespaces/${name}`);
      if (got.status === 404) return performance.now() - started;
      if (performance.now() - started > timeoutMs) throw new Error(`namespace ${name} still there after ${timeoutMs / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  /** Every call the simulator answered for one key's team, all operations and outcomes. */
  serviceCalls(apiKey: string = this.controllerKey): number {
    return totalCalls(this.sim.stats(apiKey));
  }

  /**
   * Creates (or updates) UserGroups ug-00000… with server-side apply, `parallelism` at a time.
   * Resolves with the uid of each; throws on the first refusal.
   */
  async applyUserGroups(
    namespace: string,
    n: number,
    parallelism: number,
    onApplied?: (i: number, uid: string) => void,
    client: KubeClient = this.client,
  ): Promise<string[]> {
    const uids: string[] = new Array<string>(n);
    await forEachBounded(n, parallelism, async (i) => {
      uids[i] = await this.applyUserGroup(namespace, i, client);
      onApplied?.(i, uids[i] ?? '');
    });
    return uids;
  }

  /**
   * Creates N UserGroups spread over `namespaces` (spread.ts: group g is ug-⌊g/M⌋ in namespace g mod M), in the
   * order of g, `parallelism` at a time; throws on the first refusal.
   */
  async applySpreadUserGroups(namespaces: readonly string[], n: number, parallelism: number, onApplied?: (g: number) => void): Promise<void> {
    await forEachBounded(n, parallelism, async (g) => {
      const { namespace, index } = placeOf(g, namespaces);
      await this.applyUserGroup(namespace, index, this.client);
      onApplied?.(g);
    });
  }

  /** Server-side apply of UserGroup number `i` in a namespace; resolves with its uid. */
  /** UserGroup ug-00000 in `namespace`, on the ClusterUserGroupService `service` instead of the default one. */
  async applyUserGroupOn(namespace: string, service: string): Promise<string> {
    return this.applyUserGroup(namespace, 0, this.client, { kind: 'ClusterUserGroupService', name: service });
  }

  private async applyUserGroup(namespace: string, i: number, client: KubeClient, serviceRef?: { kind: string; name: string }): Promise<string> {
    const name = userGroupName(i);
    const body = {
      apiVersion: 'usergroup.dev/v1',
      kind: 'UserGroup',
      metadata: { name, namespace },
      spec: serviceRef ? { ...(userGroupSpec(namespace, i) as Record<string, Json>), serviceRef } : userGroupSpec(namespace, i),
    };
    const p = `${paths.userGroups(namespace)}/${name}`;
    const res = await client.request('PATCH', p, { query: { fieldManager: FIELD_MANAGER }, body, contentType: 'application/apply-patch+yaml' });
    if (res.status !== 200 && res.status !== 201)
      throw new Error(`applying ${namespace}/${name}: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    const uid = isRecord(res.body) && isRecord(res.body['metadata']) ? res.body['metadata']['uid'] : undefined;
    return typeof uid === 'string' ? uid : '';
  }

  /** The current resourceVersion of a collection (a one-item list: a consistent read). */
  async collectionVersion(collection: string, labelSelector?: string): Promise<string> {
    const res = await this.client.request('GET', collection, { query: { limit: '1', ...(labelSelector ? { labelSelector } : {}) } });
    const rv = isRecord(res.body) && isRecord(res.body['metadata']) ? res.body['metadata']['resourceVersion'] : undefined;
    if (res.status !== 200 || typeof rv !== 'string') throw new Error(`listing ${collection}: HTTP ${res.status}`);
    return rv;
  }

  /** Every item of a collection, paged by 500. */
  async listAll(collection: string, labelSelector?: string): Promise<Json[]> {
    const items: Json[] = [];
    await this.eachPage(collection, labelSelector, (page) => items.push(...page));
    return items;
  }

  /**
   * Reads a collection page by page (500 a page), handing each page over and keeping none: at 100,000 objects a
   * whole list would be hundreds of MiB of JSON in this process. Resolves with the list's resourceVersion (that
   * of the first page: a paged list is one consistent snapshot).
   */
  async eachPage(collection: string, labelSelector: string | undefined, onPage: (items: Json[]) => void): Promise<string> {
    let cont = '';
    let version = '';
    do {
      const query: Record<string, string> = { limit: '500' };
      if (labelSelector) query['labelSelector'] = labelSelector;
      if (cont) query['continue'] = cont;
      const res = await this.client.request('GET', collection, { query, timeoutMs: 120_000 });
      if (res.status !== 200 || !isRecord(res.body)) throw new Error(`listing ${collection}: HTTP ${res.status}`);
      onPage((Array.isArray(res.body['items']) ? res.body['items'] : []).filter(isRecord));
      const meta = res.body['metadata'];
      cont = isRecord(meta) && typeof meta['continue'] === 'string' ? meta['continue'] : '';
      if (!version && isRecord(meta) && typeof meta['resourceVersion'] === 'string') version = meta['resourceVersion'];
    } while (cont);
    return version;
  }

  /**
   * Watches a collection from `resourceVersion` until stopped, re-watching from the last version seen when
   * the server ends a watch. Repeated failures end it with an error (`onError`); so does a 410 (the version
   * seen last is older than the apiserver's watch history), unless `relist` is given: it rebuilds the caller's
   * view (a paged list) and resolves with the version to watch on from.
   */
  watch(
    collection: string,
    resourceVersion: string,
    onEvent: (event: WatchEvent) => void,
    options: { labelSelector?: string; onError?: (message: string) => void; relist?: () => Promise<string> } = {},
  ): { stop(): void } {
    const abort = new AbortController();
    let rv = resourceVersion;
    // A function, not the property: stop() aborts while a watch is awaited, which narrowing cannot see.
    const stopped = (): boolean => abort.signal.aborted;
    void (async () => {
      let failures = 0;
      while (!stopped()) {
        const end = await watchOnce(this.client, collection, {
          resourceVersion: rv,
          ...(options.labelSelector ? { labelSelector: options.labelSelector } : {}),
          timeoutSeconds: 600,
          inactivityMs: 700_000,
          signal: abort.signal,
          onEvent: (event) => {
            const v = isRecord(event.object['metadata']) ? event.object['metadata']['resourceVersion'] : undefined;
            if (typeof v === 'string') rv = v;
            failures = 0;
            if (event.type !== 'BOOKMARK') onEvent(event);
          },
        });
        if (stopped() || end.kind === 'closed') continue;
        if (end.kind === 'gone' && options.relist) {
          try {
            rv = await options.relist();
            continue;
          } catch (err) {
            options.onError?.(`watch of ${collection} ended (410 Gone) and listing it again failed: ${String(err)}`);
            return;
          }
        }
        if (end.kind === 'gone' || ++failures > 5) {
          options.onError?.(`watch of ${collection} ended: ${end.kind === 'failed' ? end.message : end.kind}`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    })();
    return { stop: () => abort.abort() };
  }
}

export const userGroupName = (i: number): string => `ug-${String(i).padStart(5, '0')}`;
export const userGroupId = (namespace: string, i: number): string => `${namespace}-${i}`;
export const userGroupSpec = (namespace: string, i: number): Json => ({
  userGroupId: userGroupId(namespace, i),
  name: `Bench customer ${i}`,
  properties: { tier: i % 3 === 0 ? 'gold' : 'standard', region: 'eu-west' },
});

export const OWNED_SECRETS = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

function totalCalls(stats: SimStats): number {
  let total = 0;
  for (const op of OPERATIONS) for (const outcome of OUTCOMES) total += stats.operations[op][outcome];
  return total;
}

/** metadata.name, metadata.annotations[key] and friends of a raw object. */
export function meta(object: Json): { name: string; namespace: string; generation: number; annotations: Record<string, string>; uid: string } {
  const m: Json = isRecord(object['metadata']) ? object['metadata'] : {};
  const annotations = isRecord(m['annotations']) ? (m['annotations'] as Record<string, string>) : {};
  const text = (v: unknown): string => (typeof v === 'string' ? v : '');
  return { name: text(m['name']), namespace: text(m['namespace']), generation: Number(m['generation'] ?? 0), annotations, uid: text(m['uid']) };
}

/** Ready=True for the object's current generation. */
export function readyForGeneration(object: Json): boolean {
  const generation = meta(object).generation;
  const status = isRecord(object['status']) ? object['status'] : {};
  if (status['observedGeneration'] !== generation) return false;
  const conditions = Array.isArray(status['conditions']) ? status['conditions'] : [];
  return conditions.some(
    (c) => isRecord(c) && c['type'] === 'Ready' && c['status'] === 'True' && (c['observedGeneration'] === undefined || c['observedGeneration'] === generation),
  );
}

/** The decoded value of a Secret's data key, or undefined. */
export function secretData(object: Json, key: string): string | undefined {
  const data = isRecord(object['data']) ? object['data'] : {};
  const v = data[key];
  return typeof v === 'string' ? Buffer.from(v, 'base64').toString('utf8') : undefined;
}

export { isRecord };
export type { Json };
