import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcWatcher } from '../../devtools/bench/proc.js';
import { imageEnv, imageNodeFlags } from '../../devtools/image/dockerfile.js';
import { killAllControllers, msgIs, spawnController, UNBUDGETED_ARGS, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { group, plural, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import { repoRoot } from '../support/repo-root.js';
import { tenantIdentity, type Tenant } from '../support/tenancy.js';
import { awaitInvariant, createUserGroups, RotationLedger } from './support/invariant.js';
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

/*
 * 9a. Hostile tenant: memory. Tenant A (a ServiceAccount under a namespace editor's Role) fills its namespace
 * with what the controller might cache: SECRETS Secrets of 1 MiB carrying the operator's managed-by label
 * (some also with a forged UserGroup owner reference and 200 KiB of annotations), and USERGROUPS UserGroups
 * with the largest properties admission lets through (64 top-level strings of 16 KiB; or one nested value
 * of 1.4 MiB, which the schema cannot see into). The controller runs as the chart's defaults run it: the image's
 * flags, its V8 heap at the chart's heapPercent (75 %) of its memory limit (320 MiB); its peak RSS must stay under
 * that limit, it must never restart, and another namespace's groups keep syncing and rotating meanwhile.
 */

const SECRETS = sized(300, 60);
const FORGED = sized(50, 10);
const USERGROUPS = sized(150, 30);
const GOOD = sized(40, 10);
const LIMIT_MIB = 320;
const HEAP_MIB = (LIMIT_MIB * 75) / 100;
const MiB = 1024 * 1024;

describe('9a. hostile tenant: memory', () => {
  let env: TestEnv;
  let nsA: string;
  let tenantA: Tenant;
  let c: ControllerProcess;

  beforeAll(async () => {
    env = await TestEnv.create('rel-mem');
    nsA = await createNamespace('rel-mem-a', env.kc);
    tenantA = await tenantIdentity(nsA, env.kc);
    await env.putClusterService(env.defaultService, {
      url: env.sim.url,
      tenants: [{ namespaces: [env.namespace, nsA], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
  }, 180_000);
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
    if (nsA) await deleteNamespace(nsA, env.kc).catch(() => undefined);
  });

  async function inParallel(count: number, parallel: number, job: (i: number) => Promise<unknown>): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < count) await job(next++);
      }),
    );
  }

  it(`stays under ${LIMIT_MIB} MiB with ${SECRETS} labelled 1 MiB Secrets and ${USERGROUPS} maximal UserGroups in a tenant's namespace`, async () => {
    const started = Date.now();
    c = spawnController({
      kubeconfigPath: env.kubeconfigPath,
      namespace: `${env.namespace},${nsA}`,
      defaultService: env.defaultService,
      nodeFlags: [...imageNodeFlags(repoRoot), `--max-old-space-size=${HEAP_MIB}`],
      env: imageEnv(repoRoot),
      // The good namespace asks 40 rotations at once at full size: the default budget (10, then 10 a minute) would
      // spread them past the wait. This scenario is about memory; the budgets have their own tests.
      args: ['--log-level', 'info', ...UNBUDGETED_ARGS],
    });
    const watcher = new ProcWatcher(c.pid, 250);
    await waitLog(c, 'workers started', msgIs('workers started'));
    const ledger = new RotationLedger();
    const good = await createUserGroups(env, 'g', GOOD, 20);
    const baseline = await awaitInvariant(env, ledger, 120_000);
    expect(baseline.problems).toEqual([]);
    const rssBefore = watcher.sample()?.peakRssBytes ?? 0;

    // The flood. UserGroups with the largest properties admission lets through.
    const wide = Object.fromEntries(Array.from({ length: 64 }, (_, k) => [`p${k}`, 'v'.repeat(16_384)]));
    const deep = { nested: { rows: Array.from({ length: 90 }, () => 'n'.repeat(16_000)) } };
    const uids: string[] = [];
    await inParallel(USERGROUPS, 8, async (i) => {
      const made = (await tenantA.custom.createNamespacedCustomObject({
        group,
        version,
        namespace: nsA,
        plural,
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'UserGroup',
          metadata: { name: `huge-${i}` },
          spec: { userGroupId: `huge-${i}`, name: `Huge ${i}`, properties: i % 2 === 0 ? wide : deep },
        },
      })) as UserGroupObject;
      uids[i] = made.metadata.uid ?? '';
    });
    // 1 MiB Secrets with the operator's label; the first FORGED also "owned" by a UserGroup.
    const blob = 'x'.repeat(MiB - 1024);
    await inParallel(SECRETS, 8, (i) =>
      tenantA.core.createNamespacedSecret({
        namespace: nsA,
        body: {
          metadata: {
            name: `big-${i}`,
            labels: { 'app.kubernetes.io/managed-by': 'usergroup-operator', 'usergroup.dev/usergroup': `fake-${i}` },
            ...(i < FORGED
              ? {
                  annotations: { padding: 'a'.repeat(200 * 1024) },
                  // Owned by one of the tenant's real UserGroups, so garbage collection keeps it.
                  ownerReferences: [
                    {
                      apiVersion: 'usergroup.dev/v1',
                      kind: 'UserGroup',
                      name: `huge-${i % USERGROUPS}`,
                      uid: uids[i % USERGROUPS] ?? '',
                      controller: true,
                    },
                  ],
                }
              : {}),
          },
          type: 'Opaque',
          stringData: { token: blob.slice(0, blob.length - (i < FORGED ? 200 * 1024 : 0)) },
        },
      }),
    );
    const floodDone = Date.now() - started;

    // Meanwhile the other namespace keeps working: a rotation for each of its groups, and they sync.
    for (const g of good) await ledger.request(env, g.name, g.userGroupId, 'during-flood');
    const others = await awaitInvariant(env, ledger, 120_000);
    // Every huge UserGroup is told why it is not synced.
    await eventually(
      'every huge UserGroup Ready=False InvalidSpec',
      async () => {
        const list = ((await env.custom.listNamespacedCustomObject({ group, version, namespace: nsA, plural })) as { items: UserGroupObject[] }).items;
        return list.length === USERGROUPS && list.every((ug) => ug.status?.conditions?.some((x) => x.type === 'Ready' && x.reason === 'InvalidSpec'))
          ? true
          : undefined;
      },
      180_000,
      1_000,
    );
    // A restart over all of it: the list at startup is where pages pile up.
    const sample = watcher.sample();
    const peakFirst = sample?.peakRssBytes ?? 0;
    c.child.kill('SIGKILL');
    await c.exit;
    watcher.stop();
    const restarted = spawnController({
      kubeconfigPath: env.kubeconfigPath,
      namespace: `${env.namespace},${nsA}`,
      defaultService: env.defaultService,
      nodeFlags: [...imageNodeFlags(repoRoot), `--max-old-space-size=${HEAP_MIB}`],
      env: imageEnv(repoRoot),
      args: ['--log-level', 'info', ...UNBUDGETED_ARGS],
    });
    const watcher2 = new ProcWatcher(restarted.pid, 250);
    await waitLog(restarted, 'workers started', msgIs('workers started'), 120_000);
    for (const g of good) await ledger.request(env, g.name, g.userGroupId, 'after-restart');
    const afterRestart = await awaitInvariant(env, ledger, 120_000);
    await new Promise((r) => setTimeout(r, 5_000));
    const peakRestart = watcher2.sample()?.peakRssBytes ?? 0;
    const restartedExited = restarted.exited();
    watcher2.stop();
    const peak = Math.max(peakFirst, peakRestart);
    const mib = (b: number): string => `${(b / MiB).toFixed(0)} MiB`;

    recordRow({
      scenario: '9a. hostile tenant: memory',
      objects: SECRETS + USERGROUPS + GOOD,
      faults: `tenant A (ServiceAccount): ${SECRETS} Secrets of 1 MiB with the managed-by label (${FORGED} of them also with a forged UserGroup owner and 200 KiB of annotations), ${USERGROUPS} UserGroups with the largest properties admission allows (64 × 16 KiB strings, or a 1.4 MiB nested value); then a SIGKILL and a restart over all of it`,
      converged: others.converged && afterRestart.converged && peak < LIMIT_MIB * MiB && !restartedExited,
      tokensLost: afterRestart.tokensLost,
      duplicateRotations: afterRestart.duplicateRotations,
      wallMs: Date.now() - started,
      notes:
        `controller as the image runs it (${[...imageNodeFlags(repoRoot)].join(' ')}) with --max-old-space-size=${HEAP_MIB}: peak RSS ${mib(rssBefore)} before the flood, ${mib(peakFirst)} through it, ${mib(peakRestart)} for the restarted controller listing it all (limit ${LIMIT_MIB} MiB); ` +
        `flood written in ${(floodDone / 1000).toFixed(1)} s; the other namespace's ${GOOD} groups rotated twice (during the flood, after the restart): converged ${others.converged && afterRestart.converged ? 'yes' : 'NO'}; every huge UserGroup Ready=False InvalidSpec; controller exits: ${restartedExited ? 1 : 0} unplanned`,
    });

    expect(others.problems).toEqual([]);
    expect(afterRestart.problems).toEqual([]);
    expect(peak).toBeLessThan(LIMIT_MIB * MiB);
    expect(restartedExited).toBe(false);
  });
});
