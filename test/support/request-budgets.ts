// What the request-budget tests share (test/integration/request-budgets.test.ts, a tenant flooding its namespace, and
// request-budgets-failover.test.ts, a leader change and a shard move): the request annotations, reading and waiting
// for a UserGroup in any namespace, the simulator's calls per group, and the controller flags for given budgets.
import type { EventsV1Event } from '@kubernetes/client-node';
import type { RequestBudgetOptions } from '../../src/controller/request-budget.js';
import { eventually } from './kube.js';
import { group, version, type TestEnv, type UserGroupObject } from './operator.js';

export const ROTATE = 'usergroup.dev/rotate-requested-at';
export const SYNC = 'usergroup.dev/sync-requested-at';

export async function userGroupIn(env: TestEnv, namespace: string, name: string): Promise<UserGroupObject> {
  return (await env.custom.getNamespacedCustomObject({ group, version, namespace, plural: 'usergroups', name })) as UserGroupObject;
}

const ready = (ug: UserGroupObject): boolean => {
  const c = ug.status?.conditions?.find((x) => x.type === 'Ready');
  return c?.status === 'True' && c.reason === 'Synced' && ug.status?.observedGeneration === ug.metadata.generation;
};

export async function waitSynced(env: TestEnv, namespace: string, name: string, timeoutMs = 60_000): Promise<UserGroupObject> {
  return eventually(
    `${namespace}/${name} Ready=True Synced`,
    async () => {
      const ug = await userGroupIn(env, namespace, name);
      return ready(ug) ? ug : undefined;
    },
    timeoutMs,
    100,
  );
}

export async function eventsIn(env: TestEnv, namespace: string, reason: string): Promise<EventsV1Event[]> {
  return (await env.events.listNamespacedEvent({ namespace })).items.filter((e) => e.reason === reason);
}

/** The calls the simulator counted for these ids, by kind: PUTs (upserts) and POSTs (rotations). */
export function callsFor(env: TestEnv, ids: readonly string[]): { puts: number; posts: number } {
  const stats = env.sim.stats(env.apiKey);
  const sum = (byId: Readonly<Record<string, number>>): number => ids.reduce((n, id) => n + (byId[id] ?? 0), 0);
  return { puts: sum(stats.upsertsByUserGroupId), posts: sum(stats.rotationsByUserGroupId) };
}

export const allowed = (budget: RequestBudgetOptions, ms: number): number => budget.burst + Math.floor((ms / 60_000) * budget.perMinute);

export const budgetArgs = (b: { sync: RequestBudgetOptions; rotation: RequestBudgetOptions }): string[] => [
  '--sync-request-burst',
  String(b.sync.burst),
  '--sync-requests-per-minute',
  String(b.sync.perMinute),
  '--rotation-request-burst',
  String(b.rotation.burst),
  '--rotation-requests-per-minute',
  String(b.rotation.perMinute),
];
