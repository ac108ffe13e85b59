import { createHash } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { KubeClient } from '../../src/kube/http.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { killAllControllers, msgIs, signalAndWait, waitLog } from '../support/controller-process.js';
import { adminKubeConfig, eventually, kubeconfigVia } from '../support/kube.js';
import { TestEnv, type UserGroupObject } from '../support/operator.js';
import { userGroupInformer } from '../support/usergroup-informer.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * These tests restart kube-apiserver and compact etcd, so they run on a private control plane:
 * the shared one serves the other test files at the same time.
 */

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
/** Synced for the current generation, and the Secret holds the service's current token. */
async function inSync(env: TestEnv, ug: UserGroupObject): Promise<boolean> {
  const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'True' || ready.reason !== 'Synced' || ug.status?.observedGeneration !== ug.metadata.generation) return false;
  const id = String(ug.spec['userGroupId']);
  const sim = env.simGroup(id);
  if (!sim || sim.name !== ug.spec['name']) return false;
  const token = await env.secretToken(ug.metadata.name);
  return token !== undefined && sha256(token) === sim.tokenSha256;
}

async function waitInSync(env: TestEnv, name: string, timeoutMs = 90_000, intervalMs = 200): Promise<UserGroupObject> {
  return eventually(
    `${env.namespace}/${name} in sync with the service`,
    async () => {
      const ug = await env.getUserGroup(name);
      return (await inSync(env, ug)) ? ug : undefined;
    },
    timeoutMs,
    intervalMs,
  );
}

async function listUserGroups(env: TestEnv): Promise<UserGroupObject[]> {
  const list = (await env.custom.listNamespacedCustomObject({
    group: 'usergroup.dev',
    version: 'v1',
    namespace: env.namespace,
    plural: 'usergroups',
  })) as { items: UserGroupObject[] };
  return list.items;
}

/** Every UserGroup in the namespace is in sync (spec name at the service, token in the Secret). */
async function waitAllInSync(env: TestEnv, timeoutMs = 120_000): Promise<UserGroupObject[]> {
  return eventually(
    `every UserGroup in ${env.namespace} in sync`,
    async () => {
      const items = await listUserGroups(env);
      for (const ug of items) if (!(await inSync(env, ug))) return undefined;
      return items;
    },
    timeoutMs,
    500,
  );
}

/** Retries an apiserver call while the apiserver is away (restarting). */
async function retrying<T>(what: string, call: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  return eventually(what, async () => call(), timeoutMs, 200);
}

const rotationsOf = (env: TestEnv, userGroupId: string): number => env.sim.stats(env.apiKey).rotationsByUserGroupId[userGroupId] ?? 0;

describe('resilience against a restarted, compacted or silent kube-apiserver', () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    const started = Date.now();
    cp = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')] });
    console.log(`[resilience] private control plane started in ${Date.now() - started} ms (${cp.serverUrl})`);
  });

  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(cp)?.stop();
  });

  it('kube-apiserver restarted mid-run: everything converges and later changes are still seen', async () => {
    const env = await TestEnv.create('restart', {}, cp.kubeconfigPath);
    const c = env.spawnController([]);
    try {
      await waitLog(c, 'workers started', msgIs('workers started'));
      for (let i = 0; i < 8; i++) await env.createUserGroup(`r${i}`, { userGroupId: `re-${i}`, name: `R ${i}` });
      for (let i = 0; i < 8; i++) await waitInSync(env, `r${i}`);

      // Background churn (creates and renames) that keeps going through the restart; failures while the
      // apiserver is down are expected and ignored: the final check compares with what the apiserver holds.
      // Cleared once the restart is over: a property, as narrowing cannot see the write from outside the loop.
      const state = { churning: true };
      let churned = 0;
      let failed = 0;
      const churn = (async () => {
        for (let n = 0; state.churning; n++) {
          try {
            if (n % 2 === 0) await env.createUserGroup(`c${n}`, { userGroupId: `ch-${n}`, name: `C ${n}` });
            else await env.patchUserGroup(`r${n % 8}`, { spec: { name: `R ${n % 8} v${n}` } });
            churned++;
          } catch {
            failed++;
          }
          await sleep(150);
        }
      })();
      await sleep(1_000);
      const restartStart = Date.now();
      await cp.restartApiserver();
      const restartedAt = Date.now();
      // Changes made right after the restart.
      await retrying('create after-restart', () => env.createUserGroup('after-restart', { userGroupId: 're-after', name: 'After' }));
      await retrying('rename r0', () => env.patchUserGroup('r0', { spec: { name: 'R 0 after restart' } }));
      await waitInSync(env, 'after-restart', 120_000, 100);
      const recoveryMs = Date.now() - restartedAt;
      await eventually(
        'the rename made after the restart to reach the service',
        async () => (env.simGroup('re-0')?.name === 'R 0 after restart' ? true : undefined),
        120_000,
      );
      console.log(
        `[resilience] apiserver restart took ${restartedAt - restartStart} ms; a UserGroup created right after it was Synced ${recoveryMs} ms after the restart completed`,
      );
      await sleep(2_000);
      state.churning = false;
      await churn;
      console.log(`[resilience] churn during the restart: ${churned} writes accepted, ${failed} refused`);
      expect(churned).toBeGreaterThan(5);
      expect(failed).toBeGreaterThan(0); // the apiserver really was away

      // Changes after the churn are still picked up (the watches recovered for good).
      await env.patchUserGroup('r1', { spec: { name: 'R 1 final' } });
      await env.createUserGroup('final', { userGroupId: 're-final', name: 'Final' });
      await waitInSync(env, 'final');
      await waitInSync(env, 'r1');
      const all = await waitAllInSync(env);
      expect(all.length).toBeGreaterThanOrEqual(10);
      // One group at the service per UserGroup, none created twice.
      expect(env.sim.groups(env.apiKey).length).toBe(all.length);
      expect(env.calls().upsert.created).toBe(all.length);
      const watchTrouble = c.logs.filter((l) => /watch|list/.test(String(l.json?.['msg'])) && l.json?.['level'] !== 'debug');
      console.log(
        `[resilience] controller watch/list log lines around the restart: ${[...new Set(watchTrouble.map((l) => `${String(l.json?.['informer'])}: ${String(l.json?.['msg'])}`))].join(' | ')}`,
      );
    } finally {
      await signalAndWait(c, 'SIGTERM');
      await env.close();
    }
  });

  it('410 Gone after etcd compaction: the controller re-lists and misses nothing (deletes included)', async () => {
    const env = await TestEnv.create('gone', {}, cp.kubeconfigPath);
    const c = env.spawnController([]);
    try {
      await waitLog(c, 'workers started', msgIs('workers started'));
      for (const n of ['a', 'b', 'c', 'd']) await env.createUserGroup(n, { userGroupId: `gone-${n}`, name: n.toUpperCase() });
      for (const n of ['a', 'b', 'c', 'd']) await waitInSync(env, n);

      // Freeze the controller and restart the apiserver under it (its connections, watches included, are
      // gone: no event can reach it any more), then change things, compact etcd past those changes and
      // let the controller run again: its watches resume from a resourceVersion that neither the new
      // apiserver's watch cache nor etcd still has (410 Gone), so only a re-list can show the changes.
      process.kill(c.pid, 'SIGSTOP');
      const linesBefore = c.logs.length;
      await cp.restartApiserver();
      await env.deleteUserGroup('a');
      await env.createUserGroup('e', { userGroupId: 'gone-e', name: 'E' });
      await env.patchUserGroup('c', { spec: { name: 'C changed while away' } });
      await env.requestRotation('d', 'while-away');
      const revision = await cp.compactEtcd();
      const resumedAt = Date.now();
      process.kill(c.pid, 'SIGCONT');
      console.log(`[resilience] apiserver restarted, changes made, etcd compacted at revision ${revision}; controller resumed`);

      const gone = await waitLog(
        c,
        '410 Gone re-list of usergroups',
        (l) => l.json?.['msg'] === 'watch expired (410 Gone); re-listing' && l.json['informer'] === 'usergroups',
        60_000,
        linesBefore,
      ).catch((err: unknown) => {
        const informerLines = c.logs
          .slice(linesBefore)
          .filter((l) => l.json?.['informer'] !== undefined)
          .map((l) => l.text);
        console.log(`[resilience] informer log lines after resuming:\n${informerLines.join('\n')}`);
        throw err;
      });
      console.log(`[resilience] usergroups watch got 410 Gone and re-listed ${gone.at - resumedAt} ms after resuming`);

      // Everything that happened while it was away is acted on; the deletion could only be learnt from the re-list.
      await eventually('a Deleted Event for a', async () => ((await env.eventsFor('a')).some((e) => e.reason === 'Deleted') ? true : undefined), 60_000, 500);
      // The Event can be read back before this process has read the controller's stdout: wait for the line.
      const deleted = await waitLog(
        c,
        'deletion of a logged',
        (l) => l.json?.['msg'] === 'UserGroup deleted; the group stays at the service' && l.json['usergroup'] === `${env.namespace}/a`,
        10_000,
        linesBefore,
      );
      expect(c.logs.indexOf(deleted)).toBeGreaterThan(c.logs.indexOf(gone));
      await waitInSync(env, 'e');
      await waitInSync(env, 'c');
      expect(env.simGroup('gone-c')?.name).toBe('C changed while away');
      await eventually(
        'rotation of d handled',
        async () => ((await env.getUserGroup('d')).status?.rotation?.lastHandledRequest === 'while-away' ? true : undefined),
        60_000,
      );
      await waitInSync(env, 'd');

      // And after the re-list, the new watches see further changes.
      await env.createUserGroup('f', { userGroupId: 'gone-f', name: 'F' });
      await env.patchUserGroup('b', { spec: { name: 'B changed after' } });
      await env.deleteUserGroup('c');
      await waitInSync(env, 'f');
      await waitInSync(env, 'b');
      await eventually('a Deleted Event for c', async () => ((await env.eventsFor('c')).some((e) => e.reason === 'Deleted') ? true : undefined), 60_000, 500);
      await sleep(2_000);
      expect(rotationsOf(env, 'gone-d')).toBe(1);
      expect(env.calls().upsert.created).toBe(6);
      await waitAllInSync(env);
    } finally {
      await signalAndWait(c, 'SIGTERM');
      await env.close();
    }
  });

  it("an informer's watch meets 410 Gone: it re-lists by watch-list (still no LIST request) and reports only what changed while it was cut off", async () => {
    const env = await TestEnv.create('wl-gone', {}, cp.kubeconfigPath);
    const proxy: TcpProxy = await startTcpProxy('127.0.0.1', Number(new URL(cp.serverUrl).port));
    const requests: string[] = [];
    const access = await kubeAccessFromKubeConfig(adminKubeConfig(kubeconfigVia(cp.kubeconfigPath, proxy.port)));
    const client = await KubeClient.create(access, 'watch-list-gone-test', (verb, code) => requests.push(`${verb} ${code}`));
    const informer = userGroupInformer(client, env.namespace, { retryInitialMs: 100 });
    const events: string[] = [];
    informer.on((type, ug) => events.push(`${type} ${ug.metadata.name}`));
    try {
      for (const n of ['a', 'b', 'c', 'd']) await env.createUserGroup(n, { userGroupId: `wl-${n}`, name: n.toUpperCase() });
      informer.start();
      await informer.waitForSync();
      expect(events).toEqual(['added a', 'added b', 'added c', 'added d']);
      expect(requests).toEqual(['WATCH 200']);

      // Cut it off: its one connection (the watch-list's, now its watch) is frozen, so it hears nothing of the
      // changes; the apiserver restarts (its new watch cache starts after them) and etcd is compacted, so the
      // resourceVersion it watches from is gone. Then its connection is reset: it watches again, meets 410.
      events.length = 0;
      proxy.freeze();
      await env.deleteUserGroup('a');
      await env.patchUserGroup('c', { spec: { name: 'C changed while away' } });
      await env.createUserGroup('e', { userGroupId: 'wl-e', name: 'E' });
      await cp.restartApiserver();
      await cp.compactEtcd();
      proxy.cutFrozen();

      await eventually('the changes, from the re-list', () => Promise.resolve(events.length >= 3 ? true : undefined), 60_000);
      // The diff against the store: b and d are unchanged (no event), a is gone, c changed, e is new.
      expect(events).toEqual(['updated c', 'added e', 'deleted a']);
      expect(informer.get(`${env.namespace}/c`)?.spec).toMatchObject({ ok: true, value: { name: 'C changed while away' } });
      expect(informer.stats).toMatchObject({ gone: 1, watchLists: 2, lists: 0 });
      expect(requests.filter((r) => !r.startsWith('WATCH '))).toEqual([]);
      console.log(`[resilience] informer requests through the 410 Gone: ${requests.join(', ')}`);

      // And the watch-list's connection goes on as the watch.
      await env.patchUserGroup('b', { spec: { name: 'B changed after' } });
      await eventually('b updated', () => Promise.resolve(events.includes('updated b') ? true : undefined));
      expect(informer.stats.watchLists).toBe(2);
    } finally {
      await informer.stop();
      client.close();
      await proxy.close();
      await env.close();
    }
  });

  it('a silent watch (frozen connection, never closed) is dropped by the watchdog and re-opened', async () => {
    const env = await TestEnv.create('silent', {}, cp.kubeconfigPath);
    const proxy: TcpProxy = await startTcpProxy('127.0.0.1', Number(new URL(cp.serverUrl).port));
    const viaProxy = kubeconfigVia(cp.kubeconfigPath, proxy.port);
    const c = env.spawnController(['--watch-inactivity-timeout', '3s'], { kubeconfigPath: viaProxy });
    try {
      await waitLog(c, 'workers started', msgIs('workers started'));
      await env.createUserGroup('s1', { userGroupId: 'silent-1', name: 'S1' });
      await waitInSync(env, 's1');
      expect(proxy.accepted).toBeGreaterThan(0);

      const linesBefore = c.logs.length;
      proxy.freeze();
      const frozen = proxy.frozen;
      const frozenAt = Date.now();
      await env.createUserGroup('s2', { userGroupId: 'silent-2', name: 'S2' });
      await waitInSync(env, 's2', 180_000, 100);
      const tookMs = Date.now() - frozenAt;
      const silentLines = c.logs.slice(linesBefore).filter(msgIs('watch went silent; reconnecting'));
      const firstSilent = silentLines.find((l) => l.json?.['informer'] === 'usergroups');
      const stalled = c.logs.slice(linesBefore).filter((l) => String(l.json?.['err']).includes('timed out after'));
      console.log(
        `[resilience] after freezing ${frozen} proxied connections: the usergroups watch was dropped as silent after ${(firstSilent?.at ?? NaN) - frozenAt} ms; a UserGroup created then was Synced after ${tookMs} ms (watch inactivity timeout 3s); ${stalled.length} apiserver requests timed out on frozen pooled connections meanwhile: ${stalled.map((l) => String(l.json?.['err'])).join('; ')}`,
      );
      expect(frozen).toBeGreaterThan(0);
      // The watchdog drops the frozen watch after the inactivity timeout (plus slack for a busy machine).
      expect(firstSilent).toBeDefined();
      expect((firstSilent?.at ?? Infinity) - frozenAt).toBeLessThan(3_000 + 5_000);

      // Later changes keep flowing.
      await env.patchUserGroup('s1', { spec: { name: 'S1 renamed' } });
      await waitInSync(env, 's1', 120_000);
      expect(env.calls().upsert.created).toBe(2);
    } finally {
      await signalAndWait(c, 'SIGTERM');
      await proxy.close();
      await env.close();
    }
  }, 300_000); // each frozen pooled apiserver connection costs a reconcile a 30 s request timeout
});
