import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllControllers, msgIs, msgMatches, signalAndWait, waitLog } from '../support/controller-process.js';
import { sha256 } from '../support/hash.js';
import { eventually } from '../support/kube.js';
import { LEADER_ARGS, LEASE_MS, readLease } from '../support/leader-lease.js';
import { TestEnv } from '../support/operator.js';
import { totalCalls, waitInSync } from '../support/service-sync.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * SIGTERM to a leading controller process in the middle of a load: it finishes what is in flight, releases
 * the Lease and exits 0 within the grace period; the next controller converges the rest.
 */

// Controller processes come from env.spawnController, which keeps each one's exit code and logs
// visible; whatever a test leaves running is killed at the end.
afterAll(killAllControllers);

describe('graceful shutdown on SIGTERM under load', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('shutdown', { faults: { latencyMs: 150, latencyJitterMs: 150 } });
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  it('exits 0 within the grace period, releases the Lease, leaves no half-written Secret; a new controller converges', async () => {
    const N = 50;
    const graceMs = 15_000;
    const c = env.spawnController([...LEADER_ARGS(env, 'ug-shutdown'), '--shutdown-grace-period', '15s', '--concurrency', '4']);
    await waitLog(c, 'workers started', msgIs('workers started'));
    const names = Array.from({ length: N }, (_, i) => `load-${String(i).padStart(2, '0')}`);
    const idOf = (name: string): string => `sd-${name}`;
    // Create the load in the background, in small batches.
    const creating = (async () => {
      for (let i = 0; i < N; i += 5) {
        await Promise.all(names.slice(i, i + 5).map((n) => env.createUserGroup(n, { userGroupId: idOf(n), name: n })));
        await sleep(50);
      }
    })();
    await eventually('some groups synced (mid-way)', async () => (env.calls().upsert.created >= 10 ? true : undefined), 60_000, 50);
    const termAt = Date.now();
    const createdAtTerm = env.calls().upsert.created;
    c.child.kill('SIGTERM');
    const exit = await Promise.race([c.exit, sleep(graceMs + 15_000).then(() => undefined)]);
    await creating;
    if (!exit) {
      console.log(
        `[shutdown] the process had not exited ${graceMs + 15_000} ms after SIGTERM; last lines:\n${c.logs
          .slice(-15)
          .map((l) => l.text)
          .join('\n')}`,
      );
    }
    expect(exit, 'the process exits after SIGTERM').toBeDefined();
    const exitMs = (exit?.at ?? 0) - termAt;
    console.log(
      `[shutdown] SIGTERM with ${createdAtTerm}/${N} groups created at the service -> exit code ${exit?.code} signal ${exit?.signal} after ${exitMs} ms (grace period ${graceMs} ms)`,
    );
    expect(exit?.signal).toBeNull();
    expect(exit?.code).toBe(0);
    expect(exitMs).toBeLessThan(graceMs);
    expect(c.logs.some(msgIs('shutting down'))).toBe(true);
    expect(c.logs.some(msgIs('released the lease'))).toBe(true);
    expect(c.logs.some(msgIs('stopped'))).toBe(true);
    expect(c.logs.some(msgMatches(/still running after the grace period/))).toBe(false);

    // The Lease is released.
    expect((await readLease(env, 'ug-shutdown'))?.holder).toBe('');

    // Right after the exit: every Secret holds its group's current token, and every group the service
    // knows has its Secret and a Synced status (in-flight reconciles were finished, not cut).
    const atExit = env.sim.groups(env.apiKey);
    expect(atExit.length).toBeGreaterThanOrEqual(createdAtTerm);
    expect(atExit.length).toBeLessThan(N);
    const secrets = (await env.core.listNamespacedSecret({ namespace: env.namespace, labelSelector: 'app.kubernetes.io/managed-by=usergroup-operator' })).items;
    for (const secret of secrets) {
      const name = secret.metadata?.name ?? '';
      const token = Buffer.from(secret.data?.['token'] ?? '', 'base64').toString('utf8');
      expect(sha256(token), `Secret ${name}`).toBe(env.simGroup(idOf(name))?.tokenSha256);
    }
    for (const g of atExit) {
      const name = g.userGroupId.replace(/^sd-/, '');
      expect(
        secrets.some((s) => s.metadata?.name === name),
        `Secret of ${name} (created at the service before the exit)`,
      ).toBe(true);
      const ready = (await env.getUserGroup(name)).status?.conditions?.find((cond) => cond.type === 'Ready');
      expect(ready?.reason, `status of ${name}`).toBe('Synced');
    }

    // A new controller converges everything, without calling the service again for the finished ones.
    const upsertsBefore = totalCalls(env, 'upsert');
    const next = env.spawnController([...LEADER_ARGS(env, 'ug-shutdown')]);
    const tookOverAt = await waitLog(next, 'became leader', msgIs('became leader'));
    console.log(`[shutdown] the next controller led ${tookOverAt.at - (exit?.at ?? 0)} ms after the exit (released Lease: no wait for expiry)`);
    expect(tookOverAt.at - (exit?.at ?? 0)).toBeLessThan(LEASE_MS);
    for (const n of names) await waitInSync(env, n, idOf(n), 120_000);
    expect(env.calls().upsert.created).toBe(N);
    expect(totalCalls(env, 'upsert') - upsertsBefore).toBe(N - atExit.length);
    expect(env.calls().upsert.updated).toBe(0);
    await signalAndWait(next, 'SIGTERM');
  });
});
