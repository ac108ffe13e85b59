import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllControllers, msgIs, signalAndWait, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { group, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { SecretWatch } from './support/churn.js';
import { recordRow } from './support/report.js';
import { sized, SCALE } from './support/scale.js';
import { callsOf, sha256 } from './support/faults-support.js';

/*
 * Scenario 11 (issue 42): GitOps deletes and re-applies UserGroups wholesale — an Argo CD prune (foreground
 * propagation, Argo CD's default) followed by a re-sync, a Replace=true sync, a manifest moved between
 * Applications. Under deletionPolicy Retain each re-applied UserGroup must take its kept token Secret back: no
 * POST (no rotation), no token lost (every Secret holds the same token, still the service's), no token Secret ever
 * deleted. Once with the controller running throughout, once across a controller restart (pruned while it ran,
 * re-applied while none ran). The bound stated: every re-applied UserGroup Ready with its Secret owned again within
 * RE_OWN_BOUND_MS of the re-apply, and the Secret readable all along (never deleted).
 */

const GROUPS = sized(1000, 100);
const ARGS = ['--service-qps', '200', '--service-burst', '400', '--concurrency', '8'];
/** How soon after the last re-apply every Secret must be its new UserGroup's again (measured well below it). */
const RE_OWN_BOUND_MS = sized(120_000, 60_000);
const BATCH = 50;

afterAll(killAllControllers);

interface Phase {
  readonly name: string;
  readonly puts: number;
  readonly posts: number;
  readonly tokensLost: number;
  readonly secretsDeleted: number;
  readonly pruneMs: number;
  /** From each UserGroup's re-apply to it being Ready with its Secret owned again. */
  readonly reOwnP50Ms: number;
  readonly reOwnMaxMs: number;
  readonly convergedMs: number;
}

describe('11. GitOps: prune and re-sync', () => {
  let env: TestEnv | undefined;
  let watch: SecretWatch | undefined;
  afterAll(async () => {
    watch?.stop();
    await killAllControllers();
    await env?.close();
  });

  it(`${GROUPS} UserGroups (Retain) pruned and applied again, controller running, then across a restart: no POST, no token lost`, async () => {
    const started = Date.now();
    env = await TestEnv.create('regit');
    const e = env;
    // Adoption Rotate: a UserGroup that wrongly adopted its own group would show as a POST.
    await e.putClusterService(e.defaultService, { url: e.sim.url, tenants: [{ namespaces: [e.namespace], userGroupIds: { prefix: '' }, adoption: 'Rotate' }] });
    watch = await SecretWatch.start(e);
    const names = Array.from({ length: GROUPS }, (_, i) => `g${String(i).padStart(4, '0')}`);
    const manifest = (name: string): Record<string, unknown> => ({
      apiVersion: `${group}/${version}`,
      kind: 'UserGroup',
      metadata: { name, labels: { 'app.kubernetes.io/instance': 'gitops' } },
      spec: { userGroupId: `regit-${name}`, name },
    });
    const inBatches = async (each: (name: string) => Promise<unknown>): Promise<void> => {
      for (let i = 0; i < names.length; i += BATCH) await Promise.all(names.slice(i, i + BATCH).map(each));
    };
    const apply = (name: string): Promise<unknown> =>
      e.custom.createNamespacedCustomObject({ group, version, namespace: e.namespace, plural: 'usergroups', body: manifest(name) });
    const prune = (name: string): Promise<unknown> =>
      e.custom.deleteNamespacedCustomObject({ group, version, namespace: e.namespace, plural: 'usergroups', name, body: { propagationPolicy: 'Foreground' } });
    const list = async (): Promise<(UserGroupObject & { metadata: { uid?: string } })[]> =>
      ((await e.custom.listNamespacedCustomObject({ group, version, namespace: e.namespace, plural: 'usergroups' })) as { items: UserGroupObject[] }).items;
    const secrets = async (): Promise<Map<string, { uid: string; token: string; controller: string | undefined }>> => {
      const items = (await e.core.listNamespacedSecret({ namespace: e.namespace, labelSelector: 'app.kubernetes.io/managed-by=usergroup-operator' })).items;
      return new Map(
        items.map((s) => [
          s.metadata?.name ?? '',
          {
            uid: s.metadata?.uid ?? '',
            token: Buffer.from(s.data?.['token'] ?? '', 'base64').toString('utf8'),
            controller: s.metadata?.ownerReferences?.find((o) => o.controller)?.uid,
          },
        ]),
      );
    };
    /** Polls until every UserGroup is Ready Synced for its generation with its Secret its own; when each first was. */
    const waitOwned = async (since: Map<string, number>): Promise<Map<string, number>> => {
      const at = new Map<string, number>();
      const deadline = Date.now() + RE_OWN_BOUND_MS + 60_000;
      while (at.size < names.length && Date.now() < deadline) {
        const [ugs, owned] = await Promise.all([list(), secrets()]);
        const now = Date.now();
        for (const ug of ugs) {
          const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
          if (at.has(ug.metadata.name) || ready?.reason !== 'Synced' || ug.status?.observedGeneration !== ug.metadata.generation) continue;
          if (owned.get(ug.metadata.name)?.controller === ug.metadata.uid) at.set(ug.metadata.name, now - (since.get(ug.metadata.name) ?? now));
        }
        if (at.size < names.length) await sleep(250);
      }
      return at;
    };
    const calls = (): { puts: number; posts: number } => {
      const ops = e.sim.stats().operations;
      return { puts: callsOf(ops, 'upsert'), posts: callsOf(ops, 'rotate') };
    };

    let controller: ControllerProcess = e.spawnController(ARGS);
    await waitLog(controller, 'workers started', msgIs('workers started'), 60_000);
    const appliedAt = new Map<string, number>();
    await inBatches(async (n) => {
      appliedAt.set(n, Date.now());
      await apply(n);
    });
    await waitOwned(appliedAt);
    const original = await secrets();
    expect(original.size).toBe(GROUPS);

    const phases: Phase[] = [];
    const cycle = async (name: string, between: (() => Promise<void>) | undefined): Promise<void> => {
      const before = calls();
      const deletedBefore = watch?.deleted.length ?? 0;
      const pruneStarted = Date.now();
      await inBatches(prune);
      // Argo CD waits for its prune to finish before it counts the sync done; so does this.
      while ((await list()).length > 0) await sleep(250);
      const pruneMs = Date.now() - pruneStarted;
      await between?.();
      const reapplied = new Map<string, number>();
      const reapplyStarted = Date.now();
      await inBatches(async (n) => {
        reapplied.set(n, Date.now());
        await apply(n);
      });
      const owned = await waitOwned(reapplied);
      const convergedMs = Date.now() - reapplyStarted;
      const now = await secrets();
      let lost = 0;
      for (const [n, s] of original) {
        const after = now.get(n);
        const service = e.sim.groups(e.apiKey).find((g) => g.userGroupId === `regit-${n}`);
        if (after?.token !== s.token || after.uid !== s.uid || service?.tokenSha256 !== sha256(s.token)) lost++;
      }
      const times = [...owned.values()].sort((x, y) => x - y);
      const done = calls();
      phases.push({
        name,
        puts: done.puts - before.puts,
        posts: done.posts - before.posts,
        tokensLost: lost,
        secretsDeleted: (watch?.deleted.length ?? 0) - deletedBefore,
        pruneMs,
        reOwnP50Ms: times[Math.floor(times.length / 2)] ?? -1,
        reOwnMaxMs: times.at(-1) ?? -1,
        convergedMs,
      });
      expect(owned.size, `${name}: UserGroups owning their Secret again`).toBe(GROUPS);
    };

    await cycle('controller running', undefined);
    await cycle('across a restart', async () => {
      // Pruned while the controller ran; re-applied while none runs; then a new process.
      await signalAndWait(controller, 'SIGTERM');
      controller = e.spawnController(ARGS);
      await waitLog(controller, 'workers started', msgIs('workers started'), 60_000);
    });

    for (const p of phases) console.log(`[gitops re-create] ${SCALE} ${GROUPS}: ${JSON.stringify(p)}`);
    recordRow({
      scenario: '11. GitOps prune and re-sync (Retain)',
      objects: GROUPS,
      faults: `every UserGroup deleted (foreground) and applied again, twice: controller running; across a restart`,
      converged: phases.every((p) => p.tokensLost === 0 && p.reOwnMaxMs >= 0 && p.reOwnMaxMs < RE_OWN_BOUND_MS),
      tokensLost: phases.reduce((n, p) => n + p.tokensLost, 0),
      duplicateRotations: phases.reduce((n, p) => n + p.posts, 0),
      wallMs: Date.now() - started,
      notes: phases
        .map(
          (p) =>
            `${p.name}: ${p.posts} POSTs, ${p.puts} PUTs, ${p.secretsDeleted} Secrets deleted, prune ${(p.pruneMs / 1000).toFixed(1)} s, ` +
            `Secret owned again p50 ${(p.reOwnP50Ms / 1000).toFixed(1)} s / max ${(p.reOwnMaxMs / 1000).toFixed(1)} s after its re-apply`,
        )
        .join('; '),
    });
    for (const p of phases) {
      expect({ phase: p.name, posts: p.posts, tokensLost: p.tokensLost, secretsDeleted: p.secretsDeleted }).toEqual({
        phase: p.name,
        posts: 0,
        tokensLost: 0,
        secretsDeleted: 0,
      });
      // One PUT each re-created UserGroup (its status is new): a re-sync that re-PUTs what exists.
      expect(p.puts, p.name).toBeLessThanOrEqual(GROUPS * 1.05);
      expect(p.reOwnMaxMs, p.name).toBeLessThan(RE_OWN_BOUND_MS);
    }
  });
});
