import { CoordinationV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllControllers, msgIs, msgMatches, signalAndWait, waitLog, type LogEntry } from '../support/controller-process.js';
import { sha256 } from '../support/hash.js';
import { eventually } from '../support/kube.js';
import { LEADER_ARGS } from '../support/leader-lease.js';
import { TestEnv } from '../support/operator.js';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * A leader that loses its Lease while a service call is out must not let that call run on: the request is cut
 * off (its connection closed) at once, not when the service answers or the call times out, and nothing is
 * written on the strength of it. The service holds every call for LATENCY_MS and the controller would wait up
 * to SERVICE_TIMEOUT_MS, so only the abort can end the call within CUT_OFF_BOUND_MS.
 */
const LATENCY_MS = 20_000;
const SERVICE_TIMEOUT_MS = 60_000;
const CUT_OFF_BOUND_MS = 2_000;
const LEASE = 'ug-lose';
const ARGS = (env: TestEnv): string[] => [...LEADER_ARGS(env, LEASE), '--service-timeout', `${SERVICE_TIMEOUT_MS / 1000}s`];

/** A pino line's own timestamp (the controller's clock, the same machine's as ours). */
const loggedAt = (line: LogEntry): number => Date.parse(String(line.json?.['time']));
const microTime = (ms: number): string => new Date(ms).toISOString().replace(/Z$/, '000Z');

/** Rewrites the Lease's holder, as another candidate taking it would (a merge patch: it wins whatever the leader does next). */
async function setLeaseHolder(env: TestEnv, holder: string, leaseDurationSeconds: number): Promise<void> {
  const now = microTime(Date.now());
  await env.kc
    .makeApiClient(CoordinationV1Api)
    .patchNamespacedLease(
      { namespace: env.namespace, name: LEASE, body: { spec: { holderIdentity: holder, leaseDurationSeconds, acquireTime: now, renewTime: now } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
}

describe('a leader that loses its Lease', () => {
  let env: TestEnv;
  let proxy: RecordingProxy;
  beforeAll(async () => {
    env = await TestEnv.create('lose', { faults: { latencyMs: LATENCY_MS } });
    // The default connection goes through a proxy that sees when the controller hangs up.
    proxy = await startRecordingProxy(env.sim.url);
    await env.putClusterService(env.defaultService, { url: proxy.url });
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(proxy)?.stop();
    await ifAssigned(env)?.close();
  });

  it('cuts off its in-flight PUT at once, writes nothing after, and the group converges once it leads again', async () => {
    const c = env.spawnController(ARGS(env));
    await waitLog(c, 'workers started', msgIs('workers started'));
    const key = `${env.namespace}/held`;
    await env.createUserGroup('held', { userGroupId: 'lose-1', name: 'Held' });
    const put = await eventually('the PUT to be held at the service', async () => proxy.putsFor('lose-1')[0], 30_000, 20);

    // What the controller wrote before its call; nothing may change after it lost the Lease.
    const before = await env.getUserGroup('held');
    expect(await env.getSecret('held')).toBeUndefined();

    const takenAt = Date.now();
    await setLeaseHolder(env, 'someone-else', 3600);
    const lost = await waitLog(c, 'stopping work', msgMatches(/stopping work/), 15_000);
    const lostAt = loggedAt(lost);
    const closedAt = await eventually('the held PUT to be closed by the controller', async () => put.clientClosedAt, LATENCY_MS, 10);
    const withdrawn = await waitLog(c, 'work was withdrawn', msgMatches(/work was withdrawn/), 5_000);
    const cutOffMs = closedAt - lostAt;
    console.log(
      `[leadership] Lease taken -> "${String(lost.json?.['msg'])}" after ${lostAt - takenAt} ms (renew deadline 4 s); ` +
        `lost leadership -> held PUT closed after ${cutOffMs} ms (PUT out for ${closedAt - put.receivedAt} ms; service latency ${LATENCY_MS} ms, timeout ${SERVICE_TIMEOUT_MS} ms)`,
    );
    expect(cutOffMs).toBeGreaterThanOrEqual(0);
    expect(cutOffMs).toBeLessThan(CUT_OFF_BOUND_MS);
    expect(withdrawn.json?.['usergroup']).toBe(key);
    expect(withdrawn.json?.['level']).toBe('info');

    // Let the service apply the abandoned PUT (a service does not know its client left), then look again.
    await eventually('the abandoned PUT applied at the service', async () => env.simGroup('lose-1'), LATENCY_MS + 10_000, 200);
    await waitLog(c, 'workers stopped', msgIs('workers stopped'), 5_000);
    const after = await env.getUserGroup('held');
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.status).toEqual(before.status);
    expect(await env.getSecret('held')).toBeUndefined();
    // The cut-off call is no failure of the service: not logged as one, nothing at error level about the group.
    const sinceLoss = c.logs.slice(c.logs.indexOf(lost) + 1);
    expect(
      sinceLoss.filter((l) => ['service call failed', 'reconcile failed', 'reconcile threw', 'user group synced'].includes(String(l.json?.['msg']))),
    ).toEqual([]);
    expect(sinceLoss.filter((l) => l.json?.['usergroup'] === key).map((l) => l.json?.['msg'])).toEqual([withdrawn.json?.['msg']]);
    expect((await env.eventsFor('held')).map((e) => e.reason)).not.toContain('ServiceUnavailable');
    expect(proxy.putsFor('lose-1')).toHaveLength(1);

    // Handed back with the service fast again: the next leadership redoes the withdrawn work, once.
    env.sim.setFaults({});
    await setLeaseHolder(env, '', 1);
    await waitLog(c, 'became leader again', msgIs('became leader'), 15_000, c.logs.indexOf(lost));
    await env.waitForReady('held', 'Synced', 'True', 30_000);
    const token = await env.secretToken('held');
    expect(sha256(token ?? '')).toBe(env.simGroup('lose-1')?.tokenSha256);
    expect(env.calls().upsert.created).toBe(1);
    await signalAndWait(c, 'SIGTERM');
  });
});
