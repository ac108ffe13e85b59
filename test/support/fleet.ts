// Two clusters on one account, for real: two control planes, one simulator, the same namespace, API key,
// ClusterUserGroupService and tenant rules in each (as an Argo CD ApplicationSet puts them), a controller process each.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { inject } from 'vitest';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { repoRoot } from './repo-root.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/sim/server.js';
import { sha256Hex } from '../../src/controller/hash.js';
import { msgIs, signalAndWait, spawnController, waitLog, type ControllerProcess } from './controller-process.js';
import { TestEnv, type TenantRuleObject } from './operator.js';

export type Role = 'Primary' | 'Follower';

export interface FleetCluster {
  readonly name: string;
  readonly env: TestEnv;
  /** Sets this cluster's ClusterUserGroupService: its fleet role (undefined: no fleet) and the fleet's rules. */
  setRole(role: Role | undefined): Promise<void>;
  /** Starts this cluster's controller process (its namespace and `more`), once its caches are synced. */
  startController(args?: readonly string[], more?: readonly string[]): Promise<ControllerProcess>;
}

export interface Fleet {
  readonly sim: Simulator;
  readonly apiKey: string;
  readonly a: FleetCluster;
  readonly b: FleetCluster;
  /** SHA-256 of the token the service holds now for `userGroupId`. */
  serviceTokenSha(userGroupId: string): string | undefined;
  /** Successful rotations of the account, per id. */
  rotations(): Readonly<Record<string, number>>;
  close(): Promise<void>;
}

/**
 * Cluster a is the run's shared control plane, b a private one: both serve the namespace `namespace` (random
 * suffix), the same tenant rules (`tenants`, default: that namespace, any id) and the same simulator account.
 */
export async function startFleet(
  prefix: string,
  options: { tenants?: (namespace: string) => TenantRuleObject[]; sim?: Partial<SimulatorOptions>; roles?: { a?: Role; b?: Role } } = {},
): Promise<Fleet> {
  const namespace = `${prefix}-${randomBytes(3).toString('hex')}`;
  const apiKey = `key-${randomBytes(16).toString('hex')}`;
  const sim = await startSimulator({ apiKeys: [apiKey], ...options.sim });
  const second = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')] });
  const stops: (() => Promise<unknown>)[] = [];
  const tenants = options.tenants?.(namespace) ?? [{ namespaces: [namespace], userGroupIds: { prefix: '' }, adoption: 'Rotate' }];
  const cluster = async (name: string, kubeconfigPath: string, role: Role | undefined): Promise<FleetCluster> => {
    const env = await TestEnv.onAccount(namespace, sim, apiKey, kubeconfigPath);
    const setRole = (r: Role | undefined): Promise<void> => env.putClusterService(namespace, { url: sim.url, tenants, ...(r ? { fleet: { role: r } } : {}) });
    await setRole(role);
    const controllers: ControllerProcess[] = [];
    const startController = async (args: readonly string[] = [], more: readonly string[] = []): Promise<ControllerProcess> => {
      const c = spawnController({ kubeconfigPath, namespace: [namespace, ...more].join(','), defaultService: namespace, args });
      controllers.push(c);
      await waitLog(c, 'caches synced', msgIs('caches synced'));
      return c;
    };
    stops.push(() => Promise.all(controllers.map((c) => signalAndWait(c, 'SIGTERM').catch(() => undefined))));
    return { name, env, setRole, startController };
  };
  const a = await cluster('a', inject('kubeconfig'), options.roles?.a);
  const b = await cluster('b', second.kubeconfigPath, options.roles?.b);
  return {
    sim,
    apiKey,
    a,
    b,
    serviceTokenSha: (id) => sim.groups(apiKey).find((g) => g.userGroupId === id)?.tokenSha256,
    rotations: () => sim.stats(apiKey).rotationsByUserGroupId,
    close: async () => {
      for (const stop of stops) await stop();
      await a.env.close();
      await b.env.close().catch(() => undefined);
      await second.stop();
    },
  };
}

/** SHA-256 of the token a cluster's Secret holds (undefined: no Secret, or no token in it). */
export async function secretTokenSha(env: TestEnv, secretName: string): Promise<string | undefined> {
  const secret = await env.getSecret(secretName);
  const data = secret?.data?.['token'];
  return data === undefined ? undefined : sha256Hex(Buffer.from(data, 'base64').toString('utf8'));
}
