import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllControllers, msgIs, msgMatches, signalAndWait, waitLog } from '../support/controller-process.js';
import { sha256 } from '../support/hash.js';
import { eventually, kubectl } from '../support/kube.js';
import { LEADER_ARGS, LEASE_MS, readLease, RETRY_MS } from '../support/leader-lease.js';
import { TestEnv } from '../support/operator.js';
import { totalCalls, waitInSync, waitRotationHandled } from '../support/service-sync.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * Leader election between two controller processes (--leader-elect): one leads, the standby takes over
 * after a SIGKILL or a SIGSTOP within the lease, and a leader that cannot renew stops working at once.
 * How lost leadership cuts off service calls already in flight is test/integration/leadership.test.ts.
 */

// Controller processes come from env.spawnController, which keeps each one's exit code and logs
// visible; whatever a test leaves running (SIGSTOPped ones too) is killed at the end.
afterAll(killAllControllers);

/** The Lease exactly as the apiserver stores it (kubectl), to check the MicroTime format. */
async function rawLease(env: TestEnv, name: string): Promise<Record<string, unknown>> {
  const res = await kubectl(['get', 'lease', '-n', env.namespace, name, '-o', 'json']);
  if (res.code !== 0) throw new Error(`kubectl get lease: ${res.stderr}`);
  return JSON.parse(res.stdout) as Record<string, unknown>;
}

const rotationsOf = (env: TestEnv, userGroupId: string): number => env.sim.stats(env.apiKey).rotationsByUserGroupId[userGroupId] ?? 0;

const SERVICE_CALL_MSGS = new Set([
  'user group synced',
  'token rotated',
  'rotation refused; recovered the current token',
  'service call failed',
  'reconcile failed',
]);

// =============================================================================================

describe('leader election with two controller processes', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('lead');
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  it('one leader syncs; after SIGKILL the standby takes over within the lease, the rotation requested meanwhile happens once', async () => {
    // Both start together: exactly one may win.
    const a = env.spawnController(LEADER_ARGS(env));
    const b = env.spawnController(LEADER_ARGS(env));
    await Promise.all([a, b].map((c) => waitLog(c, 'caches synced', msgIs('caches synced'))));
    const firstLeader = await eventually('one controller to become leader', async () => [a, b].find((c) => c.logs.some(msgIs('became leader'))), 30_000, 100);
    const standby = firstLeader === a ? b : a;
    // Give the loser several retry periods: it must stay a standby.
    await sleep(3 * RETRY_MS + 500);
    expect(standby.logs.some(msgIs('became leader'))).toBe(false);
    expect(firstLeader.logs.filter(msgIs('became leader'))).toHaveLength(1);
    const leaderId = firstLeader.identity();
    const standbyId = standby.identity();
    expect(leaderId).toBeTruthy();
    expect(standbyId).toBeTruthy();
    expect(leaderId).not.toBe(standbyId);
    const lease = await readLease(env, 'ug-test');
    expect(lease?.holder).toBe(leaderId);
    const raw = await rawLease(env, 'ug-test');
    const spec = raw['spec'] as Record<string, unknown>;
    expect(spec['leaseDurationSeconds']).toBe(6);
    // MicroTime: RFC 3339 with microseconds.
    expect(spec['renewTime']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(spec['acquireTime']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);

    const ids = ['le-1', 'le-2', 'le-3', 'le-4'];
    for (const [i, id] of ids.entries()) await env.createUserGroup(`g${i + 1}`, { userGroupId: id, name: `Group ${i + 1}` });
    for (const [i, id] of ids.entries()) await waitInSync(env, `g${i + 1}`, id);
    // Only the leader called the service: one PUT per group, and the standby logged no service work.
    expect(env.calls().upsert.created).toBe(4);
    expect(totalCalls(env, 'upsert')).toBe(4);
    expect(standby.logs.filter((l) => SERVICE_CALL_MSGS.has(String(l.json?.['msg'])))).toEqual([]);
    expect(standby.logs.some(msgIs('workers started'))).toBe(false);
    expect(firstLeader.logs.filter(msgIs('user group synced'))).toHaveLength(4);

    // SIGKILL the leader; while nobody leads, ask for a rotation.
    const transitionsBefore = lease?.transitions ?? 0;
    const killedAt = Date.now();
    await signalAndWait(firstLeader, 'SIGKILL');
    await env.requestRotation('g1', 'during-failover');

    const took = await waitLog(standby, 'became leader', msgIs('became leader'), LEASE_MS + 20_000);
    const failoverMs = took.at - killedAt;
    const leaseNow = await eventually(
      'the Lease to name the standby',
      async () => {
        const l = await readLease(env, 'ug-test');
        return l?.holder === standbyId ? { l, at: Date.now() } : undefined;
      },
      10_000,
      100,
    );
    console.log(
      `[leader election] failover (SIGKILL -> standby "became leader"): ${failoverMs} ms; Lease holder changed seen after ${leaseNow.at - killedAt} ms (lease 6s, renew 4s, retry 1s)`,
    );
    // Within the lease duration plus the standby's retry period (and slack for a loaded 2-core machine).
    expect(failoverMs).toBeLessThanOrEqual(LEASE_MS + 2 * RETRY_MS * 1.2 + 2_000);
    expect(leaseNow.l?.transitions).toBe(transitionsBefore + 1);

    // The standby did no service work before it led.
    const tookIndex = standby.logs.indexOf(took);
    expect(standby.logs.slice(0, tookIndex).filter((l) => SERVICE_CALL_MSGS.has(String(l.json?.['msg'])))).toEqual([]);

    // The rotation requested while nobody led happens exactly once.
    await waitRotationHandled(env, 'g1', 'le-1', 'during-failover');
    await sleep(3_000);
    expect(rotationsOf(env, 'le-1')).toBe(1);
    expect(totalCalls(env, 'rotate')).toBe(1);
    const token = await env.secretToken('g1');
    expect(sha256(token ?? '')).toBe(env.simGroup('le-1')?.tokenSha256);
    // The new leader found the other groups in sync: no PUT again, but the one that reads the token to rotate.
    expect(totalCalls(env, 'upsert')).toBe(5);

    // Work continues: a group created after the failover is synced by the new leader.
    await env.createUserGroup('g5', { userGroupId: 'le-5', name: 'Group 5' });
    await waitInSync(env, 'g5', 'le-5');
    expect(standby.logs.some((l) => l.json?.['msg'] === 'user group synced' && l.json['usergroup'] === `${env.namespace}/g5`)).toBe(true);
    expect(env.calls().upsert.created).toBe(5);
  });
});

describe('a leader that cannot renew stops at once', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('stop');
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  it('SIGSTOPped leader: the standby takes over; after SIGCONT the old leader stops working and makes no call', async () => {
    const a = env.spawnController(LEADER_ARGS(env));
    await waitLog(a, 'became leader', msgIs('became leader'));
    const b = env.spawnController(LEADER_ARGS(env));
    await waitLog(b, 'caches synced', msgIs('caches synced'));
    await waitLog(b, 'waiting to become leader', msgIs('waiting to become leader'));
    for (const i of [1, 2, 3]) await env.createUserGroup(`s${i}`, { userGroupId: `st-${i}`, name: `Stop ${i}` });
    for (const i of [1, 2, 3]) await waitInSync(env, `s${i}`, `st-${i}`);
    expect(b.logs.some(msgIs('became leader'))).toBe(false);

    const stoppedAt = Date.now();
    process.kill(a.pid, 'SIGSTOP');
    const took = await waitLog(b, 'became leader', msgIs('became leader'), LEASE_MS + 20_000);
    console.log(`[leader election] takeover from a SIGSTOPped leader: ${took.at - stoppedAt} ms`);
    expect((await readLease(env, 'ug-test'))?.holder).toBe(b.identity());

    // A rotation while the old leader is still frozen: the new leader does it.
    await env.requestRotation('s1', 'r1');
    await waitRotationHandled(env, 's1', 'st-1', 'r1');
    expect(rotationsOf(env, 'st-1')).toBe(1);

    const aLinesBefore = a.logs.length;
    const contAt = Date.now();
    process.kill(a.pid, 'SIGCONT');
    const stopLine = await waitLog(a, 'stopping work', msgMatches(/stopping work/), 10_000, aLinesBefore);
    console.log(`[leader election] resumed old leader logged "${String(stopLine.json?.['msg'])}" ${stopLine.at - contAt} ms after SIGCONT`);
    expect(String(stopLine.json?.['msg'])).toMatch(/lease not renewed|could not renew/);
    await waitLog(a, 'workers stopped', msgIs('workers stopped'), 10_000, aLinesBefore);

    // More work for the new leader only.
    await env.requestRotation('s1', 'r2');
    await env.requestRotation('s2', 'r1');
    await env.patchUserGroup('s3', { spec: { name: 'Stop 3 renamed' } });
    await waitRotationHandled(env, 's1', 'st-1', 'r2');
    await waitRotationHandled(env, 's2', 'st-2', 'r1');
    await eventually('the rename to reach the service', async () => (env.simGroup('st-3')?.name === 'Stop 3 renamed' ? true : undefined));
    await waitInSync(env, 's3', 'st-3');
    await sleep(4_000);
    expect(rotationsOf(env, 'st-1')).toBe(2);
    expect(rotationsOf(env, 'st-2')).toBe(1);
    expect(totalCalls(env, 'rotate')).toBe(3);
    // 3 creates + 1 rename + the PUT each of the 3 rotations reads the current token with; nothing PUT twice.
    expect(env.calls().upsert.created).toBe(3);
    expect(env.calls().upsert.updated).toBe(4);
    expect(totalCalls(env, 'upsert')).toBe(7);

    // The old leader did nothing after it woke up, and it did not take the Lease back. A reconcile SIGSTOP froze
    // mid-way may report, on waking, that its work was withdrawn (it aborts before any call: the service's counts
    // above are exact); any other reconcile line would be work done by a leader that is no longer one.
    const after = a.logs.slice(aLinesBefore);
    const withdrawn = (l: (typeof after)[number]): boolean => String(l.json?.['msg']).startsWith('stopped before finishing: work was withdrawn');
    expect(after.filter((l) => SERVICE_CALL_MSGS.has(String(l.json?.['msg'])) || (l.json?.['reconcileId'] !== undefined && !withdrawn(l)))).toEqual([]);
    expect(after.some(msgIs('became leader'))).toBe(false);
    expect((await readLease(env, 'ug-test'))?.holder).toBe(b.identity());
    expect(a.exited()).toBe(false);
  });
});
