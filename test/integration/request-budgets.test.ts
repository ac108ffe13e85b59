import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_REQUEST_BUDGETS } from '../../src/controller/request-budget.js';
import { killAllControllers } from '../support/controller-process.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { allowed, callsFor, eventsIn, ROTATE, SYNC, userGroupIn, waitSynced } from '../support/request-budgets.js';
import { annotateUserGroupAs, createUserGroupAs, tenantIdentity, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * Every tenant-triggered call is budgeted per namespace (request-budget.ts), against the real apiserver, the real
 * controller process and the simulator: a tenant, as its own ServiceAccount under a namespace editor's Role, writes
 * new rotation and sync requests in a loop for a minute and gets no more calls than its namespace's budgets allow,
 * nothing it asked for last is dropped, and another namespace's new UserGroup syncs at once meanwhile. That the
 * budgets survive a leader change and a shard move is request-budgets-failover.test.ts's to show.
 */

afterAll(killAllControllers);

describe('a tenant writing requests in a loop for a minute', () => {
  let env: TestEnv;
  let flood: Tenant;
  let quiet: Tenant;

  beforeAll(async () => {
    env = await TestEnv.create('rb-ops');
    flood = await tenantIdentity(await createNamespace('rb-flood', env.kc), env.kc);
    quiet = await tenantIdentity(await createNamespace('rb-quiet', env.kc), env.kc);
    await env.putClusterService(env.defaultService, {
      url: env.sim.url,
      tenants: [{ namespaces: [flood.namespace, quiet.namespace], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
    // The operator as shipped: the default budgets (10 at once, then 10 a minute, for each kind).
    await env.startOperator({ mode: 'process', args: ['--namespaces', `${flood.namespace},${quiet.namespace}`] });
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
    for (const t of [ifAssigned(flood), ifAssigned(quiet)]) if (t) await deleteNamespace(t.namespace, env.kc).catch(() => undefined);
  });

  it('gets at most its budgets in service calls, has its last requests answered, and another namespace syncs in under 2 s meanwhile', async () => {
    const budgets = DEFAULT_REQUEST_BUDGETS;
    const names = Array.from({ length: 5 }, (_, i) => `flood-${i}`);
    const ids = names.map((n) => `${flood.namespace}.${n}`);
    for (const [i, name] of names.entries()) await createUserGroupAs(flood, name, { userGroupId: ids[i] ?? '', name: `Flood ${i}` });
    for (const name of names) await waitSynced(env, flood.namespace, name);
    const before = callsFor(env, ids);

    const floodMs = 60_000;
    const started = Date.now();
    let round = 0;
    let writes = 0;
    const looping = (async () => {
      while (Date.now() - started < floodMs) {
        round++;
        const value = `v-${String(round)}`;
        await Promise.all(names.map((name) => annotateUserGroupAs(flood, name, { [ROTATE]: value, [SYNC]: value })));
        writes += names.length;
      }
    })();

    // A third of the way in, another tenant of the same account creates a UserGroup.
    await sleep(floodMs / 3);
    const quietId = `${quiet.namespace}.newcomer`;
    const createdAt = Date.now();
    await createUserGroupAs(quiet, 'newcomer', { userGroupId: quietId, name: 'Newcomer' });
    await waitSynced(env, quiet.namespace, 'newcomer', 30_000);
    const quietSyncMs = Date.now() - createdAt;

    await looping;
    const stoppedAt = Date.now();
    const last = `v-${String(round)}`;
    const duringLoop = callsFor(env, ids);
    // Nothing dropped: the values written last are handled, within what the budget needs for one request per group.
    const drainBoundMs = Math.ceil((names.length / Math.min(budgets.sync.perMinute, budgets.rotation.perMinute)) * 60_000) + 10_000;
    await eventually(
      'every group to handle the last rotation and sync request',
      async () => {
        const ugs = await Promise.all(names.map((n) => userGroupIn(env, flood.namespace, n)));
        return ugs.every((ug) => ug.status?.rotation?.lastHandledRequest === last && ug.status.lastHandledSyncRequest === last) ? true : undefined;
      },
      drainBoundMs + 30_000,
      250,
    );
    const drainedMs = Date.now() - stoppedAt;
    const elapsedMs = Date.now() - started;
    const after = callsFor(env, ids);
    const puts = after.puts - before.puts;
    const posts = after.posts - before.posts;
    const minutes = elapsedMs / 60_000;
    const stats = env.sim.stats(env.apiKey);
    console.log(
      `[request budgets] ${String(writes)} annotation writes (rotate and sync) on ${String(names.length)} groups in ${(floodMs / 1000).toFixed(0)} s by the tenant's ServiceAccount; ` +
        `over ${(elapsedMs / 1000).toFixed(1)} s (loop + drain): sync PUTs ${String(puts)} (budget ${String(budgets.sync.burst)} + ${String(budgets.sync.perMinute)}/min × ${minutes.toFixed(2)} min = ${String(allowed(budgets.sync, elapsedMs))}; ${(puts / minutes).toFixed(1)}/min), ` +
        `rotation POSTs ${String(posts)} (budget ${String(allowed(budgets.rotation, elapsedMs))}; ${(posts / minutes).toFixed(1)}/min); during the loop alone ${String(duringLoop.puts - before.puts)} PUTs, ${String(duringLoop.posts - before.posts)} POSTs; ` +
        `last values handled ${(drainedMs / 1000).toFixed(1)} s after the loop stopped (bound ${(drainBoundMs / 1000).toFixed(0)} s); other namespace's new UserGroup Ready=True in ${String(quietSyncMs)} ms`,
    );

    // A requested rotation reads the current token with a PUT before its POST: one PUT per POST beside the syncs.
    expect(puts).toBeLessThanOrEqual(allowed(budgets.sync, elapsedMs) + posts);
    expect(posts).toBeLessThanOrEqual(allowed(budgets.rotation, elapsedMs));
    // The budget, not a lack of requests, held the tenant: it asked for far more and got at least its burst.
    expect(writes).toBeGreaterThan(10 * (budgets.sync.burst + budgets.rotation.burst));
    expect(puts).toBeGreaterThanOrEqual(budgets.sync.burst);
    expect(posts).toBeGreaterThanOrEqual(budgets.rotation.burst);
    // Every call is counted by id: no POST was refused (a refused one names no group), no PUT failed.
    expect(stats.operations.rotate.ok).toBe(Object.values(stats.rotationsByUserGroupId).reduce((a, b) => a + b, 0));
    expect(stats.operations.upsert.created + stats.operations.upsert.updated).toBe(Object.values(stats.upsertsByUserGroupId).reduce((a, b) => a + b, 0));
    expect(drainedMs).toBeLessThanOrEqual(drainBoundMs);
    expect(quietSyncMs).toBeLessThan(2_000);
    // Told, once per slot: both kinds of waiting Event were written in the flooded namespace, none in the other.
    await eventually('the waiting Events', async () =>
      (await eventsIn(env, flood.namespace, 'RotationRequestWaiting')).length > 0 && (await eventsIn(env, flood.namespace, 'SyncRequestWaiting')).length > 0
        ? true
        : undefined,
    );
    const waiting = await eventsIn(env, flood.namespace, 'RotationRequestWaiting');
    expect(waiting[0]?.note).toMatch(
      /^rotation request "v-\d+" waits \d+s for its turn: rotation requests in this namespace are limited to 10 at once, then 10 a minute$/,
    );
    expect([...(await eventsIn(env, quiet.namespace, 'RotationRequestWaiting')), ...(await eventsIn(env, quiet.namespace, 'SyncRequestWaiting'))]).toEqual([]);
  }, 300_000);
});
