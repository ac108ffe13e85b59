import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, CoordinationV1Api, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../src/kube/http.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { LeaderElector } from '../../src/kube/leader-election.js';
import { eventually } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * How a leader renews its Lease against a real apiserver: one PUT on the version it last wrote (client-go's fast path),
 * no GET first, so a loaded apiserver has the whole renew deadline for one request. The GET it skips is the check that
 * the Lease is still its own; the resourceVersion does that check instead, and the last test is the case that would
 * catch it not doing so: another identity takes the Lease, and this leader must stop, not write over it.
 */

const LEASE_MS = 3_000;
const RENEW_MS = 2_000;
const RETRY_MS = 400;

interface Candidate {
  readonly elector: LeaderElector;
  /** Lease requests as `VERB code` (the client's request observer, as the operator's metrics count them). */
  readonly requests: string[];
  readonly events: string[];
}

describe('Lease renewal (one elector in-process, a real apiserver)', () => {
  let env: TestEnv;
  const running: LeaderElector[] = [];
  beforeAll(async () => {
    env = await TestEnv.create('lease-renew');
  });
  afterEach(async () => {
    for (const e of running.splice(0)) await e.stop();
  });
  afterAll(async () => ifAssigned(env)?.close());

  async function candidate(name: string, identity: string): Promise<Candidate> {
    const requests: string[] = [];
    const events: string[] = [];
    const client = await KubeClient.create(await kubeAccessFromKubeConfig(env.kc), 'lease-renewal-test', (verb, code, resource) => {
      if (resource === 'leases') requests.push(`${verb} ${code}`);
    });
    const elector = new LeaderElector({
      client,
      namespace: env.namespace,
      name,
      identity,
      leaseDurationMs: LEASE_MS,
      renewDeadlineMs: RENEW_MS,
      retryPeriodMs: RETRY_MS,
      log: pino({ level: 'silent' }),
      onStartedLeading: () => events.push('started'),
      onStoppedLeading: () => events.push('stopped'),
    });
    running.push(elector);
    elector.start();
    await eventually(`${identity} to lead`, async () => (elector.isLeader ? true : undefined), 15_000, 50);
    return { elector, requests, events };
  }

  const count = (requests: readonly string[], verb: string): number => requests.filter((r) => r.startsWith(`${verb} `)).length;
  const leases = (): CoordinationV1Api => env.kc.makeApiClient(CoordinationV1Api);

  /** Read, change and write the Lease as an admin would; again if the elector's renewal came in between (409). */
  async function editLease(name: string, change: (lease: V1Lease) => V1Lease): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const lease = await leases().readNamespacedLease({ namespace: env.namespace, name });
      try {
        await leases().replaceNamespacedLease({ namespace: env.namespace, name, body: change(lease) });
        return;
      } catch (err) {
        if (!(err instanceof ApiException) || err.code !== 409 || attempt >= 5) throw err;
      }
    }
  }

  it('a leader renews with one PUT per retry period and reads the Lease only to take it', async () => {
    const c = await candidate('renew-fast', 'leader-a');
    // Taking a Lease that does not exist yet: GET 404, POST 201.
    expect(c.requests).toEqual(['GET 404', 'POST 201']);
    await sleep(8 * RETRY_MS);
    expect(c.elector.isLeader).toBe(true);
    expect(count(c.requests, 'GET')).toBe(1);
    expect(count(c.requests, 'PUT')).toBeGreaterThanOrEqual(5);
    expect(c.requests.filter((r) => r.startsWith('PUT ')).every((r) => r === 'PUT 200')).toBe(true);
    const lease = await leases().readNamespacedLease({ namespace: env.namespace, name: 'renew-fast' });
    expect(lease.spec?.holderIdentity).toBe('leader-a');
  });

  it('a Lease written by someone else since (same holder): the PUT is refused (409), one GET and PUT renew it, leadership is kept', async () => {
    const c = await candidate('renew-edited', 'leader-b');
    await sleep(2 * RETRY_MS);
    const before = { gets: count(c.requests, 'GET'), conflicts: c.requests.filter((r) => r === 'PUT 409').length };
    // An admin's edit: a new resourceVersion, the holder unchanged.
    await editLease('renew-edited', (lease) => {
      if (lease.metadata) lease.metadata.labels = { edited: 'by-admin' };
      return lease;
    });
    await sleep(4 * RETRY_MS);
    expect(c.requests.filter((r) => r === 'PUT 409').length - before.conflicts).toBe(1);
    expect(count(c.requests, 'GET') - before.gets).toBe(1);
    expect(c.elector.isLeader).toBe(true);
    expect(c.events).toEqual(['started']);
  });

  it('another identity takes the Lease: the refused PUT does not win it back; the leader stops within the renew deadline and never writes the Lease again', async () => {
    const c = await candidate('renew-taken', 'leader-c');
    await sleep(2 * RETRY_MS);
    await editLease('renew-taken', (lease) => {
      if (lease.spec) Object.assign(lease.spec, { holderIdentity: 'intruder', renewTime: new V1MicroTime(), leaseDurationSeconds: 60 });
      return lease;
    });
    const takenAt = Date.now();
    // Every renewal accepted before the take-over was answered before it (an edit one of them came between was refused,
    // 409, and made again): what follows is the leader's answer to the take-over.
    const putsBefore = count(c.requests, 'PUT');
    await eventually('the leader to stop', async () => (c.events.includes('stopped') ? true : undefined), RENEW_MS + 3 * RETRY_MS + 2_000, 20);
    const stoppedAfterMs = Date.now() - takenAt;
    await sleep(4 * RETRY_MS);
    expect(c.elector.isLeader).toBe(false);
    expect(stoppedAfterMs).toBeLessThanOrEqual(RENEW_MS + 2 * RETRY_MS + 1_000);
    // At most one PUT after the take-over, and it was refused: nothing this elector sent was accepted.
    const after = c.requests.filter((r) => r.startsWith('PUT ')).slice(putsBefore);
    expect(after.every((r) => r === 'PUT 409')).toBe(true);
    expect(after.length).toBeLessThanOrEqual(1);
    const now = await leases().readNamespacedLease({ namespace: env.namespace, name: 'renew-taken' });
    expect(now.spec?.holderIdentity).toBe('intruder');
  });
});
