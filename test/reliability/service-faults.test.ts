import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import type { Faults } from '../../src/sim/faults.js';
import { seededRandom } from '../../src/sim/random.js';
import { killAllControllers, msgIs, waitLog, UNBUDGETED_ARGS } from '../support/controller-process.js';
import { group, plural, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { callsOf, fmt, injectedByKind, injectedTotal, processHealth } from './support/faults-support.js';
import { awaitInvariant, createUserGroups, RotationLedger } from './support/invariant.js';
import { rotationBudgetMs } from './support/budgets.js';
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

/**
 * 1. Service faults: every call to the service has a 30 % chance of a 503, 10 % of a 429 with
 * Retry-After, 5 % of hanging until the client gives up, and independently 5 % of a 2 s latency spike.
 * The client timeout is 2 s, so a hang costs 2 s and a spiked call loses its answer although the
 * simulator applies it (an ambiguous outcome: for a POST the rotation happened but the controller
 * did not see the new token, the crash-safe path of "Rotating a token" must recover it without a
 * second rotation). Under these faults all groups must converge, and a tenth of them get two
 * rotation requests each (the second once the first is handled).
 */

const GROUPS = sized(500, 60);
/** Every 10th group rotates. */
const ROTATE_EVERY = 10;
const VALUES_PER_GROUP = 2;
const FAULTS: Partial<Faults> = {
  errorRate: 0.3,
  rateLimitRate: 0.1,
  retryAfterSeconds: 1,
  hangRate: 0.05,
  spikeRate: 0.05,
  spikeMs: 2000,
};
/**
 * The simulator's draws are seeded: its first MINIMUM_CALLS decisions (72 at the reduced scale) then hold every kind
 * of fault (seed 8: 25 5xx, 9 429, 4 hangs, 3 spikes), so the assertions that each kind was injected cannot fail by
 * chance. Unseeded, a CI run drew no hang in 166 calls. Which call gets which fault still depends on timing.
 */
const SEED = 8;
const SERVICE_TIMEOUT = '2s';
// qps/burst raised so the token bucket (default 10/s) is not what the scenario measures; concurrency
// raised so 2 s hangs and spikes do not serialise the run.
const ARGS = [
  '--service-timeout',
  SERVICE_TIMEOUT,
  '--service-qps',
  '50',
  '--service-burst',
  '100',
  '--concurrency',
  '16',
  '--log-level',
  'info',
  ...UNBUDGETED_ARGS,
];
/**
 * Budget for the whole run (creation, rotations, invariant), derived from the retry design, not tuned to
 * pass (support/budgets.ts): at this failing share every first sync and rotation completes within the
 * transient-retry budget but with probability 1e-4; each 429 pauses the whole connection for its
 * Retry-After (1 s), one pause per 429 at most, for ~10 % of at most 3× the minimum calls; and a minute for
 * creating the objects and the last writes to show.
 */
const FAILING = FAULTS.errorRate! + FAULTS.rateLimitRate! + FAULTS.hangRate!;
const MINIMUM_CALLS = GROUPS + (GROUPS / ROTATE_EVERY) * VALUES_PER_GROUP;
const BUDGET_MS =
  rotationBudgetMs(FAILING, MINIMUM_CALLS, 2_000).budgetMs + 3 * MINIMUM_CALLS * FAULTS.rateLimitRate! * FAULTS.retryAfterSeconds! * 1000 + 60_000;

const s1 = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
}

describe('1. service faults', () => {
  let env: TestEnv | undefined;
  afterAll(async () => {
    await killAllControllers();
    await env?.close();
  });

  it(`${GROUPS} UserGroups converge and ${GROUPS / ROTATE_EVERY} of them rotate ${VALUES_PER_GROUP}× under 5xx, 429, hangs and spikes`, async () => {
    const e = (env = await TestEnv.create('rel-faults', { random: seededRandom(SEED) }));
    e.sim.setFaults(FAULTS);
    const c = e.spawnController(ARGS);
    await waitLog(c, 'workers started', msgIs('workers started'));

    const started = Date.now();
    const deadline = started + BUDGET_MS;
    const ledger = new RotationLedger();
    await createUserGroups(e, 'sf', GROUPS, 25);
    const createdMs = Date.now() - started;

    // Rotations, requested while the rest still converges: the first value once the group is Synced,
    // the next once the previous is handled (never superseding a value the controller has not seen).
    const rotating = Array.from({ length: GROUPS / ROTATE_EVERY }, (_, k) => ({ name: `sf${k * ROTATE_EVERY}`, userGroupId: `sf-id-${k * ROTATE_EVERY}` }));
    const value = (n: number): string => `v${n + 1}`;
    const next = new Map(rotating.map((g) => [g.name, 0]));
    const planned = rotating.length * VALUES_PER_GROUP;
    // Latencies seen by this 1 s poll: creation → first Synced, request → handled.
    const syncedAt = new Map<string, number>();
    const requestedAt = new Map<string, number>();
    const handledMs = new Map<string, number>();
    for (;;) {
      const list = (await e.custom.listNamespacedCustomObject({ group, version, namespace: e.namespace, plural })) as { items: UserGroupObject[] };
      const now = Date.now();
      const byName = new Map(list.items.map((u) => [u.metadata.name, u]));
      for (const ug of list.items) {
        const ready = ug.status?.conditions?.find((cond) => cond.type === 'Ready');
        if (!syncedAt.has(ug.metadata.name) && ready?.status === 'True' && ug.status?.observedGeneration === ug.metadata.generation)
          syncedAt.set(ug.metadata.name, now - started);
      }
      const due: Promise<void>[] = [];
      for (const g of rotating) {
        const n = next.get(g.name) ?? 0;
        const ug = byName.get(g.name);
        if (!ug) continue;
        const handled = ug.status?.rotation?.lastHandledRequest;
        if (n > 0 && handled === value(n - 1) && !handledMs.has(`${g.name} ${handled}`))
          handledMs.set(`${g.name} ${handled}`, now - (requestedAt.get(`${g.name} ${handled}`) ?? now));
        if (n >= VALUES_PER_GROUP) continue;
        const canRequest = n === 0 ? syncedAt.has(g.name) : handled === value(n - 1);
        if (!canRequest) continue;
        next.set(g.name, n + 1);
        requestedAt.set(`${g.name} ${value(n)}`, Date.now());
        due.push(ledger.request(e, g.name, g.userGroupId, value(n)));
      }
      await Promise.all(due);
      if ((handledMs.size === planned && syncedAt.size === GROUPS) || Date.now() > deadline) break;
      await sleep(1_000);
    }
    const requestedAllMs = Math.max(0, ...requestedAt.values()) - started;

    const inv = await awaitInvariant(e, ledger, Math.max(10_000, deadline - Date.now()));
    const wallMs = Date.now() - started;

    // What the simulator counted, faulted outcomes included.
    const stats = e.sim.stats(e.apiKey);
    const puts = callsOf(stats.operations, 'upsert');
    const posts = callsOf(stats.operations, 'rotate');
    const minimum = GROUPS + ledger.total;
    const byKind = injectedByKind(stats);
    const injected = injectedTotal(stats);
    const spikes = stats.spikes.upsert + stats.spikes.rotate;
    const executed = Object.values(stats.rotationsByUserGroupId).reduce((a, b) => a + b, 0);

    // Once converged nothing should call the service any more (no change, resync is 10 h away).
    const callsAtConvergence = puts + posts;
    await sleep(5_000);
    const after = e.sim.stats(e.apiKey).operations;
    const idleCalls = callsOf(after, 'upsert') + callsOf(after, 'rotate') - callsAtConvergence;

    // How often the crash-safe path ran: after a failed POST the next reconcile checks with a PUT whether the
    // rotation reached the service anyway (a spiked POST is applied although its answer is lost).
    const events = (await e.events.listNamespacedEvent({ namespace: e.namespace })).items;
    const occurrences = (match: (note: string, reason: string) => boolean): number =>
      events.filter((ev) => match(ev.note ?? '', ev.reason ?? '')).reduce((n, ev) => n + (ev.series?.count ?? 1), 0);
    const completedByPut = occurrences((note, reason) => reason === 'TokenRotated' && note.includes('completed after'));
    const recovered = occurrences((_note, reason) => reason === 'TokenRotatedElsewhere');
    const recoveryPuts = c.logs.filter((l) => l.json?.['msg'] === 'user group synced' && l.json['why'] === 'rotation-recovery').length;

    // The slowest rotation and group: how many failed service calls the controller logged for it.
    const failedCalls = (name: string): number =>
      c.logs.filter((l) => l.json?.['msg'] === 'service call failed' && l.json['usergroup'] === `${e.namespace}/${name}`).length;
    const slowestRotation = [...handledMs.entries()].sort((a, b) => b[1] - a[1])[0];
    const slowestSync = [...syncedAt.entries()].sort((a, b) => b[1] - a[1])[0];
    const latency =
      slowestRotation && slowestSync
        ? `first Synced p50 ${s1(percentile([...syncedAt.values()], 0.5))}, p99 ${s1(percentile([...syncedAt.values()], 0.99))}, max ${s1(slowestSync[1])} (${slowestSync[0]}, ${failedCalls(slowestSync[0])} failed calls); ` +
          `rotation request → handled p50 ${s1(percentile([...handledMs.values()], 0.5))}, max ${s1(slowestRotation[1])} (${slowestRotation[0]}, ${failedCalls(slowestRotation[0].split(' ')[0] ?? '')} failed calls on that group)`
        : 'latencies incomplete';

    // Evidence for a slow tail: the slowest group's failed calls, as offsets from the run's start.
    const slowest = slowestRotation && slowestSync && slowestSync[1] > slowestRotation[1] ? slowestSync[0] : slowestRotation?.[0].split(' ')[0];
    if (slowest !== undefined && Math.max(slowestRotation?.[1] ?? 0, slowestSync?.[1] ?? 0) > 30_000) {
      const timeline = c.logs
        .filter((l) => l.json?.['msg'] === 'service call failed' && l.json['usergroup'] === `${e.namespace}/${slowest}`)
        .map((l) => `${s1(l.at - started)} ${String(l.json?.['operation'])} ${String(l.json?.['reason'])}`);
      console.log(`[service-faults] slowest group ${slowest}: ${timeline.length} failed calls at ${timeline.join(', ')}`);
    }

    const health = processHealth(c);
    const converged = inv.converged && ledger.total === planned;
    recordRow({
      scenario: '1. service faults',
      objects: inv.objects,
      faults:
        `30 % 5xx, 10 % 429 (Retry-After 1 s), 5 % hangs, 5 % 2 s spikes, client timeout ${SERVICE_TIMEOUT}; ` +
        `${fmt(injected)} faults (5xx ${fmt(byKind.injected_5xx ?? 0)}, 429 ${fmt(byKind.injected_429 ?? 0)}, hang ${fmt(byKind.injected_hang ?? 0)}) + ${fmt(spikes)} spikes`,
      converged,
      tokensLost: inv.tokensLost,
      duplicateRotations: inv.duplicateRotations,
      wallMs,
      notes:
        `calls ${fmt(puts + posts)} (PUT ${fmt(puts)}, POST ${fmt(posts)}) vs minimum ${fmt(minimum)} (${fmt(GROUPS)} PUT + ${fmt(ledger.total)} POST) = ` +
        `${((puts + posts) / minimum).toFixed(2)}×; rotations requested ${ledger.total}/${planned} on ${rotating.length} groups (${VALUES_PER_GROUP} each, sequential), ` +
        `executed ${executed}, missing ${inv.missingRotations}; recovery PUTs after a failed POST ${recoveryPuts} ` +
        `(of which found the rotation applied, answer lost: ${completedByPut}; TokenRotatedElsewhere: ${recovered}); created in ${s1(createdMs)}, last rotation requested at ${s1(requestedAllMs)}; ` +
        `${latency}; ${idleCalls} calls in 5 s after convergence; controller ${health.alive ? 'alive' : `DEAD (${health.exit ?? '?'})`}, ` +
        `workers started ${health.workerStarts}×, "reconcile threw" ${health.threw}, "reconcile failed" ${health.failed}`,
    });

    if (!converged || !health.alive || health.threw > 0) {
      console.error(
        `[service-faults] problems: ${inv.problems.join('; ')}\n${health.sample.join('\n')}\ncontroller log (last 40 lines):\n${c.output.slice(-40).join('\n')}`,
      );
    }
    expect(ledger.total, 'every planned rotation value could be requested (the previous one was handled)').toBe(planned);
    expect(inv.problems).toEqual([]);
    expect(inv.converged).toBe(true);
    expect(inv.tokensLost).toBe(0);
    expect(inv.duplicateRotations).toBe(0);
    expect(inv.missingRotations).toBe(0);
    expect(health.alive, `controller exited: ${health.exit ?? ''}`).toBe(true);
    expect(health.workerStarts).toBe(1);
    expect(health.threw).toBe(0);
    // The faults really happened (each kind at least once), and each group was created exactly once.
    expect(byKind.injected_5xx ?? 0).toBeGreaterThan(0);
    expect(byKind.injected_429 ?? 0).toBeGreaterThan(0);
    expect(byKind.injected_hang ?? 0).toBeGreaterThan(0);
    expect(spikes).toBeGreaterThan(0);
    expect(stats.operations.upsert.created).toBe(GROUPS);
    expect(executed).toBe(planned);
  });
});
