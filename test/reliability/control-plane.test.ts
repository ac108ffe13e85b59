import { createHash } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { killAllControllers, msgIs, signalAndWait, waitLog, type ControllerProcess, UNBUDGETED_ARGS } from '../support/controller-process.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import { awaitInvariant, createUserGroups, RotationLedger, type InvariantResult } from './support/invariant.js';
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

/*
 * 3. Control-plane trouble. On a private control plane (it restarts kube-apiserver and compacts etcd),
 * a controller manages many UserGroups while a churn of creates, renames and rotations goes on:
 *  A. kube-apiserver is restarted under the churn (writes fail while it is away);
 *  B. the controller is frozen (SIGSTOP), the apiserver restarted under it (its watches are cut), the
 *     churn goes on while it is away, etcd is compacted past all of it, and the controller resumes: its
 *     watches resume from a resourceVersion nobody has any more (410 Gone), so only a re-list shows the
 *     changes.
 * After each disruption, fresh changes (a new group, a rename, a rotation) must be picked up, and the
 * invariant must hold (every group Ready, Secret = service token, each rotation value executed once).
 */

const GROUPS = sized(200, 30);
/** Pause between churn operations. */
const CHURN_PAUSE_MS = sized(40, 80);
/** Churn operations made while the controller is frozen in phase B. */
const CHURN_WHILE_AWAY = sized(120, 30);
const PICKUP_TIMEOUT_MS = sized(180_000, 120_000);
const CONVERGE_TIMEOUT_MS = sized(300_000, 150_000);
const ROTATE = 'usergroup.dev/rotate-requested-at';
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const secs = (ms: number | undefined): string => (ms === undefined ? 'never' : `${(ms / 1000).toFixed(1)} s`);

/** Retries an apiserver call while the apiserver is away. */
async function retrying<T>(call: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}

/** Polls `check` until it is true; the elapsed ms, or undefined on timeout (recorded, asserted later). */
async function timeUntil(check: () => Promise<boolean>, timeoutMs: number, from = Date.now()): Promise<number | undefined> {
  while (Date.now() - from < timeoutMs) {
    try {
      if (await check()) return Date.now() - from;
    } catch {
      // the apiserver may still be settling
    }
    await sleep(200);
  }
  return undefined;
}

/**
 * Creates, renames and rotations against the apiserver, until stopped or `maxOps` are done. A rotation
 * is only requested on a group whose previous value was handled (never superseding an unseen value);
 * a rotation request that failed may still have been applied, so its group is set aside and the value
 * resolved once the apiserver is back (recorded only if the annotation holds it).
 */
class Churn {
  ops = 0;
  accepted = 0;
  refused = 0;
  creates = 0;
  renames = 0;
  rotations = 0;
  deletes = 0;
  private running = false;
  private done: Promise<void> = Promise.resolve();
  private next = 0;
  private readonly ambiguous: { name: string; userGroupId: string; value: string }[] = [];
  private readonly tainted = new Set<string>();
  /** Groups the churn created. */
  readonly created: string[] = [];
  /** Groups the churn deleted. */
  readonly deleted: string[] = [];
  /** The first refused write, and the first accepted one after it: how long the apiserver was away for writers. */
  firstRefusedAt: number | undefined;
  backAt: number | undefined;

  constructor(
    private readonly env: TestEnv,
    private readonly ledger: RotationLedger,
    private readonly targets: { name: string; userGroupId: string }[],
    private readonly tag: string,
  ) {}

  /** `deletable`: UserGroups (known to the controller) that every ninth operation deletes, one at a time. */
  start(options: { maxOps?: number; deletable?: string[] } = {}): void {
    this.running = true;
    const started = this.ops;
    this.done = (async () => {
      while (this.running && (options.maxOps === undefined || this.ops - started < options.maxOps)) {
        await this.step(options.deletable ?? []);
        await sleep(CHURN_PAUSE_MS);
      }
      this.running = false;
    })();
  }

  /** Ends the loop after the current operation. */
  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }

  /** Waits for a churn started with maxOps to make them all. */
  async finished(): Promise<void> {
    await this.done;
  }

  /** Resolves failed rotation requests with the apiserver back: recorded iff the annotation holds the value. */
  async resolveAmbiguous(): Promise<{ recorded: number; dropped: number }> {
    let recorded = 0;
    let dropped = 0;
    for (const a of this.ambiguous.splice(0)) {
      const ug = await retrying(() => this.env.getUserGroup(a.name));
      if (ug.metadata.annotations?.[ROTATE] === a.value) {
        this.ledger.record(a.userGroupId, a.value);
        recorded++;
      } else {
        dropped++;
      }
    }
    return { recorded, dropped };
  }

  private async step(deletable: string[]): Promise<void> {
    const n = this.ops++;
    const kind = n % 3;
    const failedBefore = this.refused > 0 && this.backAt === undefined;
    try {
      if (kind === 0) {
        const victim = n % 9 === 0 ? deletable.shift() : undefined;
        if (victim !== undefined) {
          await this.env.deleteUserGroup(victim);
          this.deleted.push(victim);
          this.deletes++;
        } else {
          const name = `${this.tag}c${n}`;
          await this.env.createUserGroup(name, { userGroupId: `${this.tag}-ch-${n}`, name: `Churn ${this.tag} ${n}` });
          this.created.push(name);
          this.creates++;
        }
      } else if (kind === 1) {
        const t = this.targets[this.next++ % this.targets.length];
        if (!t) return;
        await this.env.patchUserGroup(t.name, { spec: { name: `Renamed ${t.name} ${this.tag} #${n}` } });
        this.renames++;
      } else {
        // The next target whose last requested value was handled: one try per target, round robin from `next`.
        const tries = this.targets.length;
        for (let tried = 0; tried < tries; tried++) {
          const t = this.targets[this.next++ % this.targets.length];
          if (!t || this.tainted.has(t.name)) continue;
          const ug = await this.env.getUserGroup(t.name);
          const requested = this.ledger.requested(t.userGroupId);
          const last = requested[requested.length - 1];
          if (last !== undefined && ug.status?.rotation?.lastHandledRequest !== last) continue;
          const value = `${this.tag}-rot-${n}`;
          try {
            await this.ledger.request(this.env, t.name, t.userGroupId, value);
          } catch (err) {
            this.tainted.add(t.name);
            this.ambiguous.push({ name: t.name, userGroupId: t.userGroupId, value });
            throw err;
          }
          this.rotations++;
          break;
        }
      }
      this.accepted++;
      if (failedBefore) this.backAt = Date.now();
    } catch {
      this.refused++;
      this.firstRefusedAt ??= Date.now();
    }
  }
}

describe('3. control-plane trouble', () => {
  let cp: ControlPlane;
  let env: TestEnv;
  let c: ControllerProcess;

  beforeAll(async () => {
    const started = Date.now();
    cp = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')] });
    console.log(`[control-plane] private control plane started in ${Date.now() - started} ms`);
    env = await TestEnv.create('rel-cp', {}, cp.kubeconfigPath);
  });

  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
    await ifAssigned(cp)?.stop();
  });

  it(`kube-apiserver restarts and 410 Gone after etcd compaction, under churn, with ${GROUPS} UserGroups`, async () => {
    const wallStart = Date.now();
    const ledger = new RotationLedger();
    c = env.spawnController(['--service-qps', '200', '--service-burst', '200', '--concurrency', '8', ...UNBUDGETED_ARGS]);
    await waitLog(c, 'workers started', msgIs('workers started'));

    const groups = await createUserGroups(env, 'g', GROUPS, 20);
    groups.sort((a, b) => Number(a.name.slice(1)) - Number(b.name.slice(1)));
    const initial = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    console.log(`[control-plane] ${GROUPS} UserGroups converged in ${secs(initial.elapsedMs)}`);

    // g0..g3 are reserved for the changes made right after each disruption; the churn works on the rest.
    const [g0, g1, g2, g3] = groups;
    if (!g0 || !g1 || !g2 || !g3) throw new Error('too few groups');
    const churnTargets = groups.slice(4);

    /** A rotation request made when the apiserver may just be back: a failed write is checked before retrying. */
    const requestRotationSafely = async (name: string, userGroupId: string, value: string): Promise<void> => {
      await retrying(async () => {
        try {
          await ledger.request(env, name, userGroupId, value);
        } catch (err) {
          const ug = await env.getUserGroup(name);
          if (ug.metadata.annotations?.[ROTATE] === value) ledger.record(userGroupId, value);
          else throw err;
        }
      });
    };
    /** A create made when the apiserver may just be back: one that went through before its answer was lost counts. */
    const createSafely = async (name: string, userGroupId: string, displayName: string): Promise<void> => {
      await retrying(async () => {
        try {
          await env.createUserGroup(name, { userGroupId, name: displayName });
        } catch (err) {
          const existing = await env.getUserGroup(name).catch(() => undefined);
          if (existing?.spec['userGroupId'] !== userGroupId) throw err;
        }
      });
    };
    /** A new group synced, a rename at the service, a rotation handled with the new token in the Secret. */
    const pickedUp = async (
      created: string,
      createdId: string,
      renamed: { name: string; userGroupId: string },
      newName: string,
      rotated: { name: string; userGroupId: string },
      value: string,
    ): Promise<boolean> => {
      const ug = await env.getUserGroup(created);
      const ready = ug.status?.conditions?.find((x) => x.type === 'Ready');
      if (ready?.status !== 'True' || ug.status?.observedGeneration !== ug.metadata.generation) return false;
      const token = await env.secretToken(created);
      if (token === undefined || sha256(token) !== env.simGroup(createdId)?.tokenSha256) return false;
      if (env.simGroup(renamed.userGroupId)?.name !== newName) return false;
      const r = await env.getUserGroup(rotated.name);
      if (r.status?.rotation?.lastHandledRequest !== value) return false;
      const rotatedToken = await env.secretToken(rotated.name);
      return rotatedToken !== undefined && sha256(rotatedToken) === env.simGroup(rotated.userGroupId)?.tokenSha256;
    };

    // --- A. kube-apiserver restarted under churn -------------------------------------------------
    const churnA = new Churn(env, ledger, churnTargets, 'a');
    churnA.start();
    await sleep(sized(3_000, 1_500));
    const restartAStart = Date.now();
    await cp.restartApiserver();
    const restartAEnd = Date.now();
    const restartAMs = restartAEnd - restartAStart;
    // Changes made right after it is back.
    await createSafely('after-restart', 'after-restart-id', 'After restart');
    await retrying(() => env.patchUserGroup(g0.name, { spec: { name: 'G0 after restart' } }));
    await requestRotationSafely(g1.name, g1.userGroupId, 'after-restart');
    const pickupAMs = await timeUntil(
      () => pickedUp('after-restart', 'after-restart-id', g0, 'G0 after restart', g1, 'after-restart'),
      PICKUP_TIMEOUT_MS,
      restartAEnd,
    );
    await sleep(sized(3_000, 1_000));
    await churnA.stop();
    const ambiguousA = await churnA.resolveAmbiguous();
    const afterA = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    const convergeAMs = Date.now() - restartAEnd;
    const awayMs = churnA.firstRefusedAt !== undefined && churnA.backAt !== undefined ? churnA.backAt - churnA.firstRefusedAt : undefined;
    console.log(
      `[control-plane] A: restart ${secs(restartAMs)} (writes refused for ${secs(awayMs)}); churn ${churnA.accepted} accepted / ${churnA.refused} refused (${churnA.creates} creates, ${churnA.renames} renames, ${churnA.rotations} rotations; failed rotation requests: ${ambiguousA.recorded} applied, ${ambiguousA.dropped} not); changes after the restart picked up after ${secs(pickupAMs)}; converged ${afterA.converged} ${secs(convergeAMs)} after the restart (${afterA.objects} objects) ${afterA.problems.join('; ')}`,
    );

    // --- B. frozen controller, restart, changes, etcd compaction → 410 Gone ------------------------
    const churnB = new Churn(env, ledger, churnTargets, 'b');
    process.kill(c.pid, 'SIGSTOP');
    const linesBefore = c.logs.length;
    const restartBStart = Date.now();
    await cp.restartApiserver();
    const restartBMs = Date.now() - restartBStart;
    // It also deletes groups the controller knew (created by churn A): only the re-list can tell it.
    churnB.start({ maxOps: CHURN_WHILE_AWAY, deletable: [...churnA.created] });
    await churnB.finished();
    const revision = await cp.compactEtcd();
    const resumedAt = Date.now();
    process.kill(c.pid, 'SIGCONT');
    const gone = await waitLog(
      c,
      '410 Gone re-list of usergroups',
      (l) => l.json?.['msg'] === 'watch expired (410 Gone); re-listing' && l.json['informer'] === 'usergroups',
      60_000,
      linesBefore,
    ).catch(() => undefined);
    const goneInformers = [
      ...new Set(
        c.logs
          .slice(linesBefore)
          .filter(msgIs('watch expired (410 Gone); re-listing'))
          .map((l) => String(l.json?.['informer'])),
      ),
    ];
    await createSafely('after-compaction', 'after-compaction-id', 'After compaction');
    await retrying(() => env.patchUserGroup(g2.name, { spec: { name: 'G2 after compaction' } }));
    await requestRotationSafely(g3.name, g3.userGroupId, 'after-compaction');
    const pickupBMs = await timeUntil(
      () => pickedUp('after-compaction', 'after-compaction-id', g2, 'G2 after compaction', g3, 'after-compaction'),
      PICKUP_TIMEOUT_MS,
      resumedAt,
    );
    const ambiguousB = await churnB.resolveAmbiguous();
    const afterB = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    const convergeBMs = Date.now() - resumedAt;
    // The deletions made while it was away could only be learnt from the re-list.
    const deletedSeen =
      churnB.deletes === 0
        ? 0
        : await timeUntil(
            async () => {
              const events = (await env.events.listNamespacedEvent({ namespace: env.namespace })).items;
              return churnB.deleted.every((name) => events.some((e) => e.reason === 'Deleted' && e.regarding?.name === name));
            },
            PICKUP_TIMEOUT_MS,
            resumedAt,
          );
    console.log(
      `[control-plane] B: restart ${secs(restartBMs)} with the controller frozen; ${churnB.accepted} changes while away (${churnB.creates} creates, ${churnB.renames} renames, ${churnB.rotations} rotations, ${churnB.deletes} deletes; ${churnB.refused} refused, of which rotation requests ${ambiguousB.recorded} applied / ${ambiguousB.dropped} not); etcd compacted at revision ${revision}; 410 Gone on usergroups ${gone ? secs(gone.at - resumedAt) : 'never'} after resuming (informers with 410: ${goneInformers.join(', ') || 'none'}); deletes seen: ${secs(deletedSeen)}; changes after it picked up after ${secs(pickupBMs)}; converged ${afterB.converged} ${secs(convergeBMs)} after resuming ${afterB.problems.join('; ')}`,
    );

    const final: InvariantResult = afterB;
    const churnOps = churnA.accepted + churnB.accepted;
    const converged = initial.converged && afterA.converged && afterB.converged;
    const exitedEarly = c.exited();
    recordRow({
      scenario: '3. control-plane trouble',
      objects: final.objects,
      faults: `kube-apiserver restarted under churn (${secs(restartAMs)}); controller frozen + apiserver restart (${secs(restartBMs)}) + etcd compaction → 410 Gone`,
      converged,
      tokensLost: final.tokensLost,
      duplicateRotations: final.duplicateRotations,
      wallMs: Date.now() - wallStart,
      notes:
        `${GROUPS} groups + churn of ${churnOps} writes (${churnA.refused} refused while the apiserver was away), ${ledger.total} rotations; ` +
        `restart: writes refused for ${secs(awayMs)}, changes after it picked up in ${secs(pickupAMs)}, converged ${secs(convergeAMs)} after it; ` +
        `410: ${churnB.accepted} changes (${churnB.deletes} deletes) made while frozen, usergroups re-listed ${gone ? secs(gone.at - resumedAt) : 'NEVER'} after resuming, deletes seen ${secs(deletedSeen)}, changes after it picked up in ${secs(pickupBMs)}, converged ${secs(convergeBMs)} after resuming` +
        `${final.missingRotations ? `; ${final.missingRotations} rotations missing` : ''}${exitedEarly ? '; controller EXITED' : ''}`,
    });

    expect(exitedEarly).toBe(false);
    expect(churnA.refused).toBeGreaterThan(0); // the apiserver really was away under the churn
    expect(gone).toBeDefined(); // the watch really resumed behind the compaction
    expect(churnB.deletes).toBeGreaterThan(0);
    expect(deletedSeen).toBeDefined(); // deletions made while it was away, learnt from the re-list
    expect(pickupAMs).toBeDefined();
    expect(pickupBMs).toBeDefined();
    expect(initial.converged).toBe(true);
    expect(afterA.converged).toBe(true);
    expect(afterA.tokensLost).toBe(0);
    expect(afterA.duplicateRotations).toBe(0);
    expect(final.converged).toBe(true);
    expect(final.tokensLost).toBe(0);
    expect(final.duplicateRotations).toBe(0);
    expect(final.missingRotations).toBe(0);
    await signalAndWait(c, 'SIGTERM');
  });
});
