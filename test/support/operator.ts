import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type EventsV1Event,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';
import { inject } from 'vitest';
import { parseRunConfig } from '../../src/cli/config.js';
import { startOperator, type RunningOperator } from '../../src/cli/run.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { createLogger } from '../../src/observability/log.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/sim/server.js';
import { msgIs, signalAndWait, spawnController, TEST_EGRESS_ARGS, waitLog, type ControllerProcess, type SpawnControllerOptions } from './controller-process.js';
import { adminKubeConfig, createNamespace, deleteNamespace, eventually } from './kube.js';

export const group = 'usergroup.dev';
export const version = 'v1';
/** The claim kind stays at v1alpha1 (internal bookkeeping, not a user API). */
export const claimVersion = 'v1alpha1';
export const plural = 'usergroups';

export interface UserGroupObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    finalizers?: string[];
  };
  spec: Record<string, unknown>;
  status?: {
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason: string; message: string; lastTransitionTime: string }[];
    teamId?: number;
    providedId?: string;
    environmentTag?: string;
    adoption?: { adoptedAt: string; tokenRotated: boolean };
    tokenSecretName?: string;
    lastSyncTime?: string;
    syncedHash?: string;
    lastHandledSyncRequest?: string;
    rotation?: { lastHandledRequest?: string; lastRotationTime?: string; tokenIssuedTime?: string; nextRotationTime?: string };
    rolloutRestarts?: { tokenIssuedTime?: string; lastRestartTime?: string };
    podPrompts?: { tokenIssuedTime?: string; lastPromptTime?: string; pods?: number };
  };
}

/** A controller for one test namespace: in this process, or a real child process that can be SIGKILLed. */
export interface OperatorHandle {
  /** Every log line the controller wrote (JSON text). */
  readonly logs: string[];
  /** In-process controllers only: the running operator (metrics/health ports, elector, controller). */
  readonly operator?: RunningOperator;
  /** Child processes only: its pid. */
  readonly pid?: number;
  stop(): Promise<void>;
  /** Child processes only: SIGKILL, no cleanup at all. */
  kill(): Promise<void>;
}

export interface OperatorStart {
  /** Extra `run` flags (the namespace, metrics and health flags are set already). */
  readonly args?: readonly string[];
  /**
   * 'process' runs `node dist/cli/main.js run` (npm test builds dist first); the returned promise
   * resolves once it has synced its caches (a standby that never leads gets there too).
   */
  readonly mode?: 'in-process' | 'process';
  /**
   * Another URL (e.g. a proxy's, or an unreachable one) or API key for the default connection: the env
   * makes a ClusterUserGroupService for it, admitting its namespace like the env's own.
   */
  readonly serviceUrl?: string;
  readonly apiKey?: string;
  /** In-process controllers only: the KubeConfig to use instead of the env's admin one (e.g. through a proxy). */
  readonly kc?: KubeConfig;
  /**
   * In-process controllers only: watch every namespace (no --namespaces), as the chart runs it. Only on a private
   * control plane: on the shared one it would reconcile every other test's UserGroups.
   */
  readonly allNamespaces?: boolean;
}

/** A tenants entry of a ClusterUserGroupService (see crds/usergroup.dev_clusterusergroupservices.yaml). */
export interface TenantRuleObject {
  namespaces?: string[];
  namespaceSelector?: { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };
  userGroupIds: { prefix: string } | { exact: string[] };
  adoption?: 'Rotate' | 'Keep' | 'Refuse';
}

/** The API-key Secret every TestEnv keeps in its namespace. */
const API_KEY_SECRET = 'usergroup-api-key';

/**
 * One isolated world per test file: its own namespace, its own simulator with its
 * own API key, a ClusterUserGroupService of its own (named after the namespace, admitting
 * only it, for any id) as the default connection, and a controller restricted to that
 * namespace (--namespaces), so test files share the control plane without seeing each
 * other's objects.
 */
export class TestEnv {
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly events: EventsV1Api;
  private operators: OperatorHandle[] = [];
  private readonly clusterServices = new Set<string>();

  private constructor(
    readonly namespace: string,
    readonly sim: Simulator,
    readonly apiKey: string,
    readonly kubeconfigPath: string,
  ) {
    this.kc = adminKubeConfig(kubeconfigPath);
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.custom = this.kc.makeApiClient(CustomObjectsApi);
    this.events = this.kc.makeApiClient(EventsV1Api);
  }

  /** The env's default ClusterUserGroupService (the simulator, admitting the env's namespace for any id). */
  get defaultService(): string {
    return this.namespace;
  }

  /** `kubeconfigPath` selects a private control plane; default: the run's shared one. */
  static async create(prefix: string, sim: Partial<SimulatorOptions> = {}, kubeconfigPath: string = inject('kubeconfig')): Promise<TestEnv> {
    const namespace = await createNamespace(prefix, adminKubeConfig(kubeconfigPath));
    const apiKey = `key-${randomBytes(16).toString('hex')}`;
    const simulator = await startSimulator({ apiKeys: [apiKey], ...sim });
    const env = new TestEnv(namespace, simulator, apiKey, kubeconfigPath);
    await env.putApiKeySecret(API_KEY_SECRET, apiKey);
    await env.putClusterService(namespace, { url: simulator.url });
    return env;
  }

  /**
   * One cluster of a fleet (test/support/fleet.ts): a namespace of exactly this name on the control plane at
   * `kubeconfigPath`, served by `sim` (shared with the other clusters) with `apiKey`, and a ClusterUserGroupService
   * named after the namespace. Its tenant rules and fleet role are the caller's (putClusterService).
   */
  static async onAccount(namespace: string, sim: Simulator, apiKey: string, kubeconfigPath: string): Promise<TestEnv> {
    const kc = adminKubeConfig(kubeconfigPath);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace, labels: { 'usergroup.dev/test': 'true' } } } });
    const env = new TestEnv(namespace, sim, apiKey, kubeconfigPath);
    await env.putApiKeySecret(API_KEY_SECRET, apiKey);
    return env;
  }

  /** Creates or replaces an API-key Secret in the env's namespace. */
  async putApiKeySecret(name: string, apiKey: string): Promise<void> {
    const body = { metadata: { name, namespace: this.namespace }, stringData: { apiKey } };
    try {
      await this.core.createNamespacedSecret({ namespace: this.namespace, body });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 409)) throw err;
      await this.core.replaceNamespacedSecret({ namespace: this.namespace, name, body });
    }
  }

  /**
   * Creates or replaces a ClusterUserGroupService (deleted again by close()). Defaults: the env's API-key
   * Secret, and one rule admitting the env's namespace for any id with adoption Keep.
   */
  async putClusterService(
    name: string,
    spec: { url: string; apiKeySecret?: string; tenants?: TenantRuleObject[]; allowInsecure?: boolean; fleet?: { role?: 'Primary' | 'Follower' } },
  ): Promise<void> {
    const body = {
      apiVersion: `${group}/${version}`,
      kind: 'ClusterUserGroupService',
      metadata: { name, labels: { 'usergroup.dev/test': this.namespace } },
      spec: {
        url: spec.url,
        apiKeySecretRef: { namespace: this.namespace, name: spec.apiKeySecret ?? API_KEY_SECRET },
        ...(spec.allowInsecure ? { allowInsecure: true } : {}),
        tenants: spec.tenants ?? [{ namespaces: [this.namespace], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
        ...(spec.fleet ? { fleet: spec.fleet } : {}),
      },
    };
    this.clusterServices.add(name);
    try {
      await this.custom.createClusterCustomObject({ group, version, plural: 'clusterusergroupservices', body });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 409)) throw err;
      const current = (await this.custom.getClusterCustomObject({ group, version, plural: 'clusterusergroupservices', name })) as {
        metadata: { resourceVersion: string };
      };
      await this.custom.replaceClusterCustomObject({
        group,
        version,
        plural: 'clusterusergroupservices',
        name,
        body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata.resourceVersion } },
      });
    }
  }

  async deleteClusterService(name: string): Promise<void> {
    await this.custom.deleteClusterCustomObject({ group, version, plural: 'clusterusergroupservices', name }).catch(ignoreNotFound);
    this.clusterServices.delete(name);
  }

  /** The UserGroupClaims of some namespaces (default: the env's), as the apiserver holds them. */
  async claims(
    namespaces: readonly string[] = [this.namespace],
  ): Promise<{ metadata: { name: string }; spec: { userGroupId: string; namespace: string; userGroup: { name: string; uid: string } } }[]> {
    const list = (await this.custom.listClusterCustomObject({ group, version: claimVersion, plural: 'usergroupclaims' })) as {
      items: { metadata: { name: string }; spec: { userGroupId: string; namespace: string; userGroup: { name: string; uid: string } } }[];
    };
    return list.items.filter((c) => namespaces.includes(c.spec.namespace));
  }

  /** The ClusterUserGroupService a start with this URL and key uses: the env's own, or one made for them. */
  private async serviceFor(options: OperatorStart): Promise<string> {
    if ((options.serviceUrl ?? this.sim.url) === this.sim.url && (options.apiKey ?? this.apiKey) === this.apiKey) return this.defaultService;
    const name = `${this.namespace}-${this.clusterServices.size}`;
    let apiKeySecret: string | undefined;
    if (options.apiKey !== undefined && options.apiKey !== this.apiKey) {
      apiKeySecret = `${API_KEY_SECRET}-${this.clusterServices.size}`;
      await this.putApiKeySecret(apiKeySecret, options.apiKey);
    }
    await this.putClusterService(name, { url: options.serviceUrl ?? this.sim.url, ...(apiKeySecret ? { apiKeySecret } : {}) });
    return name;
  }

  async startOperator(options: OperatorStart = {}): Promise<OperatorHandle> {
    const defaultService = await this.serviceFor(options);
    let handle: OperatorHandle;
    if (options.mode === 'process') {
      if (options.kc) throw new Error('OperatorStart.kc is for in-process controllers; a process takes a kubeconfig file (spawnController)');
      handle = await startChild({ kubeconfigPath: this.kubeconfigPath, namespace: this.namespace, defaultService, args: options.args ?? [] });
    } else {
      const args = [
        ...(options.allNamespaces ? [] : ['--namespaces', this.namespace]),
        '--default-service',
        defaultService,
        '--metrics-addr',
        '0',
        '--health-addr',
        '0',
        '--log-level',
        'debug',
        ...TEST_EGRESS_ARGS,
        ...(options.args ?? []),
      ];
      handle = await startInProcess(args, options.kc ?? this.kc);
    }
    this.operators.push(handle);
    return handle;
  }

  /**
   * A controller process for this env's namespace and default connection, without waiting for anything
   * (see waitLog), its exit code and logs visible. Not stopped by close(): killAllControllers (afterAll)
   * ends what the test has not.
   */
  spawnController(args: readonly string[], options: { kubeconfigPath?: string } = {}): ControllerProcess {
    return spawnController({
      kubeconfigPath: options.kubeconfigPath ?? this.kubeconfigPath,
      namespace: this.namespace,
      defaultService: this.defaultService,
      args,
    });
  }

  /** Stops controllers and the simulator, deletes the namespace, its ClusterUserGroupServices and its claims. */
  async close(): Promise<void> {
    await Promise.all(this.operators.map((o) => o.stop()));
    await this.sim.stop();
    for (const name of [...this.clusterServices]) await this.deleteClusterService(name).catch(() => undefined);
    await this.custom
      .deleteCollectionClusterCustomObject({
        group,
        version: claimVersion,
        plural: 'usergroupclaims',
        labelSelector: `usergroup.dev/namespace=${this.namespace}`,
      })
      .catch(() => undefined);
    await deleteNamespace(this.namespace, this.kc).catch(() => undefined);
  }

  async createUserGroup(name: string, spec: Record<string, unknown>, annotations?: Record<string, string>): Promise<UserGroupObject> {
    return (await this.custom.createNamespacedCustomObject({
      group,
      version,
      namespace: this.namespace,
      plural,
      body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name, ...(annotations ? { annotations } : {}) }, spec },
    })) as UserGroupObject;
  }

  async getUserGroup(name: string): Promise<UserGroupObject> {
    return (await this.custom.getNamespacedCustomObject({ group, version, namespace: this.namespace, plural, name })) as UserGroupObject;
  }

  async patchUserGroup(name: string, patch: Record<string, unknown>): Promise<UserGroupObject> {
    return (await this.custom.patchNamespacedCustomObject(
      { group, version, namespace: this.namespace, plural, name, body: patch },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as UserGroupObject;
  }

  async deleteUserGroup(name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ group, version, namespace: this.namespace, plural, name });
  }

  /** Sets the rotation annotation, as `kubectl annotate ... --overwrite` does. */
  async requestRotation(name: string, value: string): Promise<void> {
    await this.patchUserGroup(name, { metadata: { annotations: { 'usergroup.dev/rotate-requested-at': value } } });
  }

  /** Waits until the Ready condition matches and status describes the current generation. */
  async waitForReady(name: string, reason = 'Synced', status = reason === 'Synced' ? 'True' : 'False', timeoutMs = 30_000): Promise<UserGroupObject> {
    return eventually(
      `UserGroup ${this.namespace}/${name} Ready=${status} reason ${reason}`,
      async () => {
        const ug = await this.getUserGroup(name);
        const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === status && ready.reason === reason && ug.status?.observedGeneration === ug.metadata.generation ? ug : undefined;
      },
      timeoutMs,
    );
  }

  async getSecret(name: string): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ namespace: this.namespace, name });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }

  async secretToken(name: string, key = 'token'): Promise<string | undefined> {
    const data = (await this.getSecret(name))?.data?.[key];
    return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
  }

  /** The simulator's view of a group (its token only as sha256). */
  simGroup(userGroupId: string): ReturnType<Simulator['groups']>[number] | undefined {
    return this.sim.groups(this.apiKey).find((g) => g.userGroupId === userGroupId);
  }

  /** Calls counted at the simulator for this env's API key. */
  calls(): ReturnType<Simulator['stats']>['operations'] {
    return this.sim.stats(this.apiKey).operations;
  }

  /** events.k8s.io Events about one object in this namespace. */
  async eventsFor(name: string): Promise<EventsV1Event[]> {
    const list = await this.events.listNamespacedEvent({ namespace: this.namespace });
    return list.items.filter((e) => e.regarding?.name === name);
  }
}

export type { CoreV1Event };

function ignoreNotFound(err: unknown): void {
  if (!(err instanceof ApiException && err.code === 404)) throw err;
}

async function startInProcess(args: string[], kc: KubeConfig): Promise<OperatorHandle> {
  const parsed = parseRunConfig(args, {});
  if (parsed.ok !== true) throw new Error(`bad test configuration: ${JSON.stringify(parsed)}`);
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(line);
      done();
    },
  });
  const log = createLogger('debug', sink);
  const operator: RunningOperator = await startOperator(parsed.config, log, await kubeAccessFromKubeConfig(kc));
  let stopped = false;
  return {
    logs,
    operator,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await operator.stop();
    },
    kill: () => Promise.reject(new Error('an in-process controller cannot be killed; use mode: process')),
  };
}

/** A controller process (see spawnController), once it has synced its caches. */
async function startChild(options: SpawnControllerOptions): Promise<OperatorHandle> {
  const c = spawnController(options);
  try {
    await waitLog(c, 'caches synced', msgIs('caches synced'));
  } catch (err) {
    await signalAndWait(c, 'SIGKILL');
    throw err;
  }
  return {
    logs: c.output,
    pid: c.pid,
    stop: () => signalAndWait(c, 'SIGTERM'),
    kill: () => signalAndWait(c, 'SIGKILL'),
  };
}
