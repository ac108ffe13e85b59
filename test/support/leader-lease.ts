import { ApiException, CoordinationV1Api } from '@kubernetes/client-node';
import type { TestEnv } from './operator.js';

/** Leader election flags for a controller of the env's namespace: short timings (lease 6 s, renew 4 s, retry 1 s) so tests fail over quickly. */
export const LEADER_ARGS = (env: TestEnv, id = 'ug-test'): string[] => [
  '--leader-elect',
  '--leader-election-namespace',
  env.namespace,
  '--leader-election-id',
  id,
  '--lease-duration',
  '6s',
  '--renew-deadline',
  '4s',
  '--retry-period',
  '1s',
];
/** --lease-duration of LEADER_ARGS. */
export const LEASE_MS = 6_000;
/** --retry-period of LEADER_ARGS. */
export const RETRY_MS = 1_000;

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
