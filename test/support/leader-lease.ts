import { ApiException, CoordinationV1Api } from '@kubernetes/client-node';
import type { TestEnv } from './operator.js';

/** Short Lease timings, so tests fail over within seconds: lease 6 s, renew deadline 4 s, retry 1 s. */
export const LEASE_MS = 6_000;
export const RENEW_MS = 4_000;
export const RETRY_MS = 1_000;

/** The Lease flags with those timings, for a leader election or shard group `id` in the env's namespace. */
const leaseArgs = (env: TestEnv, id: string): string[] => [
  '--leader-election-namespace',
  env.namespace,
  '--leader-election-id',
  id,
  '--lease-duration',
  `${LEASE_MS / 1000}s`,
  '--renew-deadline',
  `${RENEW_MS / 1000}s`,
  '--retry-period',
  `${RETRY_MS / 1000}s`,
];

/** One leader among the controllers started with the same `id`. */
export const LEADER_ARGS = (env: TestEnv, id = 'ug-test'): string[] => ['--leader-elect', ...leaseArgs(env, id)];

/** Every controller started with the same `id` works, each on its share of `namespaces`. */
export const SHARD_ARGS = (env: TestEnv, id: string, namespaces: readonly string[]): string[] => [
  '--namespaces',
  namespaces.join(','),
  '--shard-by-namespace',
  ...leaseArgs(env, id),
];

export interface LeaseView {
  holder: string;
  transitions: number;
}

/** Holder and transitions of a Lease of the env's namespace; undefined when there is none. */
export async function readLease(env: TestEnv, name: string): Promise<LeaseView | undefined> {
  try {
    const lease = await env.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: env.namespace, name });
    return { holder: lease.spec?.holderIdentity ?? '', transitions: lease.spec?.leaseTransitions ?? 0 };
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}
