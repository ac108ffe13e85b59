import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { ArgoCd, argoCdDiff, argoCdTarget, type ArgoCdDiff } from '../support/argocd.js';
import { eventually, kubectl, type CommandResult } from '../support/kube.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * The Argo CD health check and the rotate and sync actions (deploy/argocd), judged by Argo CD's own code (its
 * settings manager, Lua VM, health path and the merge patch its API server sends; test/support/argocd.ts) on
 * UserGroups the real controller put into each state, fetched from the apiserver exactly as Argo CD sees them.
 *
 * UPDATE_ARGOCD_FIXTURES=1 also saves those objects to test/fixtures/argocd/ for the unit test
 * (managedFields dropped, the random test namespace renamed "customers").
 */

const ROTATE = 'usergroup.dev/rotate-requested-at';
const SYNC = 'usergroup.dev/sync-requested-at';
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const FIXTURES = fileURLToPath(new URL('../fixtures/argocd/', import.meta.url));

let argo: ArgoCd;
beforeAll(() => {
  argo = ArgoCd.start(inject('argocdLua'));
});
afterAll(() => ifAssigned(argo)?.close());
const health = (ug: UserGroupObject): Promise<{ status: string; message?: string }> => argo.health(ug);
/** Whether discovery offers each action disabled. */
const disabled = async (ug: UserGroupObject): Promise<Record<string, boolean>> =>
  Object.fromEntries(Object.entries(await argo.actions(ug)).map(([name, a]) => [name, a.disabled]));
/** The value a patch computed by an action sets `annotation` to. */
const valueIn = (patch: Record<string, unknown>, annotation: string): string =>
  (patch as { metadata: { annotations: Record<string, string> } }).metadata.annotations[annotation] ?? '';

function saveFixture(env: TestEnv, name: string, ug: UserGroupObject): void {
  if (process.env['UPDATE_ARGOCD_FIXTURES'] !== '1') return;
  const copy = JSON.parse(JSON.stringify(ug).replaceAll(env.namespace, 'customers')) as { metadata: Record<string, unknown> };
  delete copy.metadata['managedFields'];
  fs.mkdirSync(FIXTURES, { recursive: true });
  fs.writeFileSync(path.join(FIXTURES, `${name}.json`), `${JSON.stringify(copy, null, 2)}\n`);
}

describe('Argo CD health check and rotate action on real UserGroups', () => {
  let env: TestEnv;
  let operator: OperatorHandle | undefined;
  const operators: OperatorHandle[] = [];
  const save = (name: string, ug: UserGroupObject): void => saveFixture(env, name, ug);

  async function startOperator(): Promise<OperatorHandle> {
    const op = await env.startOperator();
    operators.push(op);
    return op;
  }

  beforeAll(async () => {
    env = await TestEnv.create('argocd');
  });
  afterEach((ctx) => {
    env.sim.setFaults({});
    if (ctx.task.result?.state === 'fail') {
      for (const op of operators) console.error(`controller log (last 40 lines):\n${op.logs.slice(-40).join('\n')}`);
    }
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
  });

  it('is Progressing before any controller has written status, Healthy once Synced', async () => {
    await env.createUserGroup('early', { userGroupId: 'argo-early', name: 'Early' });
    const fresh = await env.getUserGroup('early');
    expect(fresh.status).toBeUndefined();
    expect(await health(fresh)).toEqual({ status: 'Progressing', message: 'Waiting for the controller to report the Ready condition' });
    save('no-status', fresh);

    operator = await startOperator();
    const synced = await env.waitForReady('early');
    expect(await health(synced)).toEqual({ status: 'Healthy', message: 'Synced: user group synced; token in Secret early' });
    expect(await disabled(synced)).toEqual({ rotate: false, sync: false });
    save('synced', synced);
  });

  it('is Suspended for a suspended group, whose actions are disabled and refused', async () => {
    await env.createUserGroup('paused', { userGroupId: 'argo-paused', name: 'Paused', suspend: true });
    const paused = await env.waitForReady('paused', 'Suspended');
    expect(await health(paused)).toEqual({ status: 'Suspended', message: 'Suspended: spec.suspend is true: the operator makes no call to the service' });
    expect(await disabled(paused)).toEqual({ rotate: true, sync: true });
    // `argocd app actions run` ignores `disabled`: the actions themselves refuse.
    await expect(argo.run(paused, 'rotate')).rejects.toThrow(/not rotated: spec\.suspend is true/);
    await expect(argo.run(paused, 'sync')).rejects.toThrow(/not synced: spec\.suspend is true/);
    save('suspended', paused);
  });

  it('is Progressing "Pending deletion" naming the finalizer that holds a deleted group, whose actions are disabled and refused', async () => {
    await env.createUserGroup('leaving', { userGroupId: 'argo-leaving', name: 'Leaving' });
    await env.waitForReady('leaving');
    await env.patchUserGroup('leaving', { metadata: { finalizers: ['example.com/hold'] } });
    await env.deleteUserGroup('leaving');
    const leaving = await env.getUserGroup('leaving');
    expect(leaving.metadata.deletionTimestamp).toBeTruthy();
    // Argo CD v3.6 runs health.lua, then reports its own verdict (health.lua sets no deletionMessage).
    expect(await health(leaving)).toEqual({ status: 'Progressing', message: 'Pending deletion; blocked by finalizers: example.com/hold' });
    expect(await disabled(leaving)).toEqual({ rotate: true, sync: true });
    await expect(argo.run(leaving, 'rotate')).rejects.toThrow(/not rotated: the UserGroup is being deleted/);
    await expect(argo.run(leaving, 'sync')).rejects.toThrow(/not synced: the UserGroup is being deleted/);
    await env.patchUserGroup('leaving', { metadata: { finalizers: null } });
  });

  it("documented exception: nulls the apiserver keeps in spec.properties do not survive Argo CD's Lua conversion", async () => {
    await env.createUserGroup('nulls', { userGroupId: 'argo-nulls', name: 'Nulls', properties: { list: [1, null, 3], value: null, inList: [{}], kept: 'x' } });
    const live = await env.getUserGroup('nulls');
    expect(live.spec['properties']).toEqual({ list: [1, null, 3], value: null, inList: [{}], kept: 'x' });
    const patch = await argo.patch(live);
    expect(patch['spec']).toEqual({ properties: { list: [1, 3], value: null, inList: [[]] } });
  });

  it('is Degraded when a person must act: a missing UserGroupService, a request the service rejects', async () => {
    await env.createUserGroup('orphan', { userGroupId: 'argo-orphan', name: 'Orphan', serviceRef: { name: 'no-such-service' } });
    const orphan = await env.waitForReady('orphan', 'ConnectionNotFound', 'False', 60_000);
    const ready = orphan.status?.conditions?.find((c) => c.type === 'Ready');
    expect(await health(orphan)).toEqual({ status: 'Degraded', message: `ConnectionNotFound: ${ready?.message ?? ''}` });
    expect((await health(orphan)).message).toContain('no-such-service');
    save('connection-not-found', orphan);

    env.sim.setFaults({ successZeroRate: 1 });
    await env.createUserGroup('refused', { userGroupId: 'argo-refused', name: 'Refused' });
    const refused = await env.waitForReady('refused', 'Rejected');
    expect((await health(refused)).status).toBe('Degraded');
    expect((await health(refused)).message).toMatch(/^Rejected: PUT \/api\/user/);
    save('rejected', refused);
  });

  it('is Progressing while the controller retries ServiceUnavailable / RateLimited, then Healthy', async () => {
    env.sim.setFaults({ errorRate: 1 });
    await env.createUserGroup('flaky', { userGroupId: 'argo-flaky', name: 'Flaky' });
    const flaky = await env.waitForReady('flaky', 'ServiceUnavailable');
    expect((await health(flaky)).status).toBe('Progressing');
    expect((await health(flaky)).message).toMatch(/^ServiceUnavailable: PUT \/api\/user .*503/);
    save('service-unavailable', flaky);

    env.sim.setFaults({ rateLimitRate: 1, retryAfterSeconds: 1 });
    await env.createUserGroup('limited', { userGroupId: 'argo-limited', name: 'Limited' });
    // 429s are waited out (the account's limit is shared) until nothing else came back for 30 s.
    const limited = await env.waitForReady('limited', 'RateLimited', 'False', 60_000);
    expect((await health(limited)).status).toBe('Progressing');
    expect((await health(limited)).message).toMatch(/^RateLimited: .*429/);
    save('rate-limited', limited);

    env.sim.setFaults({});
    expect((await health(await env.waitForReady('flaky'))).status).toBe('Healthy');
    expect((await health(await env.waitForReady('limited'))).status).toBe('Healthy');
  });

  it('is Progressing until the controller observes a new spec or handles a rotation; the rotate action rotates the token', async () => {
    // Empty maps in the spec come back from Lua as [] and Argo CD restores them (cleanReturnedObj): the patch must still be the annotation alone.
    await env.createUserGroup('rot', { userGroupId: 'argo-rot', name: 'Rot', tokenSecret: { labels: {}, annotations: {} } });
    await env.waitForReady('rot');
    const tokenBefore = await env.secretToken('rot');
    expect(tokenBefore).toBeTruthy();

    // With no controller running, nothing the next steps ask for can be done yet.
    await operator?.stop();

    const renamed = await env.patchUserGroup('early', { spec: { name: 'Early Renamed' } });
    expect(renamed.metadata.generation).toBe(2);
    expect(renamed.status?.observedGeneration).toBe(1);
    expect(await health(renamed)).toEqual({ status: 'Progressing', message: 'Waiting for the controller to observe generation 2 (status describes 1)' });
    save('spec-not-observed', renamed);

    // The action as Argo CD runs it: on the live object, then a merge patch of the difference.
    const live = await env.getUserGroup('rot');
    expect(await disabled(live)).toEqual({ rotate: false, sync: false });
    const patch = await argo.patch(live);
    expect(patch).toEqual({ metadata: { annotations: { [ROTATE]: expect.stringMatching(TIMESTAMP) as unknown } } });
    const requested = valueIn(patch, ROTATE);
    await env.patchUserGroup('rot', patch);

    const pending = await env.getUserGroup('rot');
    expect(pending.metadata.annotations?.[ROTATE]).toBe(requested);
    expect(pending.metadata.generation).toBe(live.metadata.generation); // metadata only: no new generation
    expect(pending.spec).toEqual(live.spec);
    expect(await health(pending)).toEqual({
      status: 'Progressing',
      message: `Waiting for the controller to rotate the token (${ROTATE} = ${requested}, last handled: none)`,
    });
    save('rotation-pending', pending);

    operator = await startOperator();
    const handled = await eventually(
      `rotation request ${requested} to be handled`,
      async () => {
        const ug = await env.getUserGroup('rot');
        return ug.status?.rotation?.lastHandledRequest === requested ? ug : undefined;
      },
      60_000,
    );
    const tokenAfter = await env.secretToken('rot');
    expect(tokenAfter).toBeTruthy();
    expect(tokenAfter).not.toBe(tokenBefore);
    expect(await health(await env.waitForReady('rot'))).toEqual({ status: 'Healthy', message: 'Synced: user group synced; token in Secret rot' });
    expect(handled.metadata.annotations?.[ROTATE]).toBe(requested);
    expect((await health(await env.waitForReady('early'))).status).toBe('Healthy');
    save('rotated', await env.getUserGroup('rot'));

    // A second click: Argo CD reads the live object again, so the value is new (a later second, or the same
    // second with a counter) and the controller rotates once more.
    const again = await env.getUserGroup('rot');
    const second = await argo.patch(again);
    const secondValue = valueIn(second, ROTATE);
    expect(second).toEqual({ metadata: { annotations: { [ROTATE]: secondValue } } });
    expect(secondValue).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ(-\d+)?$/);
    expect(secondValue).not.toBe(requested);
    await env.patchUserGroup('rot', second);
    await eventually(
      `rotation request ${secondValue} to be handled`,
      async () => ((await env.getUserGroup('rot')).status?.rotation?.lastHandledRequest === secondValue ? true : undefined),
      60_000,
    );
    const tokenThird = await env.secretToken('rot');
    expect(tokenThird).toBeTruthy();
    expect(tokenThird).not.toBe(tokenAfter);
    expect(tokenThird).not.toBe(tokenBefore);
  });
});

/** A change made at the service behind the operator's back, by another client of the account (a PUT of its own). */
async function changeAtService(env: TestEnv, body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${env.sim.url}/api/user`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Token ${env.apiKey}` },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`PUT at the service failed: ${res.status}`);
}

/** PUT /api/user calls the simulator counted for this env's API key, whatever their outcome. */
const puts = (env: TestEnv): number => Object.values(env.calls().upsert).reduce((a, b) => a + b, 0);

// Its own namespace and API key, so that the service calls counted are this group's alone.
describe('Argo CD sync action on a real UserGroup', () => {
  let env: TestEnv;
  let operator: OperatorHandle | undefined;

  beforeAll(async () => {
    env = await TestEnv.create('argocd-sync');
    operator = await env.startOperator();
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail' && operator) console.error(`controller log (last 40 lines):\n${operator.logs.slice(-40).join('\n')}`);
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
  });

  it('the patch Argo CD computes for the sync action makes the controller PUT the group once and record the value', async () => {
    await env.createUserGroup('drift', { userGroupId: 'argo-drift', name: 'Drift', tokenSecret: { labels: {}, annotations: {} } });
    await env.waitForReady('drift');
    const token = await env.secretToken('drift');
    expect(token).toBeTruthy();
    // Changed at the service: the controller cannot know (the service has no read), so nothing puts it right before the resync.
    await changeAtService(env, { user_group_id: 'argo-drift', name: 'Changed Elsewhere' });
    expect(env.simGroup('argo-drift')?.name).toBe('Changed Elsewhere');

    // With no controller running, the request stays pending (a restart over a synced group makes no call).
    await operator?.stop();
    const live = await env.getUserGroup('drift');
    expect(await disabled(live)).toEqual({ rotate: false, sync: false });
    const patch = await argo.patch(live, 'sync');
    expect(patch).toEqual({ metadata: { annotations: { [SYNC]: expect.stringMatching(TIMESTAMP) as unknown } } });
    const requested = valueIn(patch, SYNC);
    await env.patchUserGroup('drift', patch);

    const pending = await env.getUserGroup('drift');
    expect(pending.metadata.annotations?.[SYNC]).toBe(requested);
    expect(pending.metadata.generation).toBe(live.metadata.generation); // metadata only: no new generation
    expect(await health(pending)).toEqual({
      status: 'Progressing',
      message: `Waiting for the controller to sync the group (${SYNC} = ${requested}, last handled: none)`,
    });
    saveFixture(env, 'sync-pending', pending);

    const putsBefore = puts(env);
    operator = await env.startOperator();
    const handled = await eventually(
      `sync request ${requested} to be handled`,
      async () => {
        const ug = await env.getUserGroup('drift');
        return ug.status?.lastHandledSyncRequest === requested ? ug : undefined;
      },
      60_000,
    );
    expect(puts(env)).toBe(putsBefore + 1);
    expect(env.simGroup('argo-drift')?.name).toBe('Drift'); // the spec again
    expect(env.calls().rotate.ok).toBe(0);
    expect(await env.secretToken('drift')).toBe(token); // the PUT returns the current token
    expect(handled.metadata.annotations?.[SYNC]).toBe(requested);
    expect(await health(handled)).toEqual({ status: 'Healthy', message: 'Synced: user group synced; token in Secret drift' });
    saveFixture(env, 'sync-handled', handled);

    // Handled once: no further call.
    await sleep(1_500);
    expect(puts(env)).toBe(putsBefore + 1);
  });
});

/**
 * "Manifests in Git written against v1alpha1 keep applying unchanged (Argo CD sync shows no diff loop)", judged by
 * Argo CD's own comparison (argocd-lua diff, devtools/argocd/diff.go: the application controller's cluster cache,
 * GetManagedLiveObjs with its version conversion, sync.Reconcile and argodiff.StateDiffs, default client-side
 * diff) against this apiserver, after the real controller synced the group. Applied the way Argo CD's sync
 * applies: client-side kubectl apply of the manifest plus Argo CD's tracking annotation.
 */
describe("Argo CD's diff of Git manifests written against usergroup.dev/v1alpha1 and v1", () => {
  const APP = 'usergroups';
  const DEPRECATED = 'usergroup.dev/v1alpha1 UserGroup is deprecated';
  let env: TestEnv;
  let dir: string;
  let operator: OperatorHandle | undefined;
  const binary = (): string => inject('argocdLua');

  beforeAll(async () => {
    env = await TestEnv.create('argocd-diff');
    operator = await env.startOperator();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-argocd-diff-'));
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail' && operator) console.error(`controller log (last 40 lines):\n${operator.logs.slice(-40).join('\n')}`);
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A manifest as it sits in Git. */
  function manifest(file: string, apiVersion: string, name: string, spec: Record<string, unknown>): string {
    const at = path.join(dir, file);
    fs.writeFileSync(at, stringifyYaml({ apiVersion, kind: 'UserGroup', metadata: { name, namespace: env.namespace }, spec }));
    return at;
  }
  async function applyAsArgoCd(file: string): Promise<CommandResult> {
    const target = await argoCdTarget(binary(), APP, env.namespace, file);
    return kubectl(['apply', '-f', '-'], { input: JSON.stringify(target) });
  }
  const diff = (file: string): Promise<ArgoCdDiff> => argoCdDiff(binary(), env.kubeconfigPath, APP, env.namespace, file);
  const shown = (d: ArgoCdDiff): string => `live: ${JSON.stringify(d.normalizedLive)}\npredicted: ${JSON.stringify(d.predictedLive)}`;

  it('a v1alpha1 manifest: synced by the controller, Argo CD compares it in v1alpha1 and finds no difference; applying it again warns and changes nothing', async () => {
    const file = manifest('legacy.yaml', 'usergroup.dev/v1alpha1', 'legacy', { userGroupId: 'argo-diff-legacy', name: 'Legacy' });
    const first = await applyAsArgoCd(file);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/usergroup\.usergroup\.dev\/legacy created/);
    expect(first.stderr).toContain(DEPRECATED);
    await env.waitForReady('legacy');
    expect(await env.secretToken('legacy')).toBeTruthy();

    const d = await diff(file);
    expect(d.cachedApiVersion).toBe('usergroup.dev/v1'); // the watch delivers v1; gitops-engine cannot convert a custom resource, so it GETs v1alpha1
    expect(d.liveApiVersion).toBe('usergroup.dev/v1alpha1');
    expect(d.modified, shown(d)).toBe(false);
    // The controller's writes are in the live object Argo CD compared: status (ignored by Argo CD's default) and
    // whatever else it sets; none of it is a difference.
    expect(d.normalizedLive).toBeDefined();

    const before = await env.getUserGroup('legacy');
    const callsBefore = structuredClone(env.calls());
    const again = await applyAsArgoCd(file);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/usergroup\.usergroup\.dev\/legacy unchanged/);
    expect(again.stderr).toContain(DEPRECATED);
    const after = await env.getUserGroup('legacy');
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.metadata.generation).toBe(before.metadata.generation);
    expect(env.calls()).toEqual(callsBefore); // no service call either
    expect((await diff(file)).modified).toBe(false);
  });

  it('a v1 manifest: no warning, compared in v1, no difference; moving the v1alpha1 manifest in Git to v1 is no difference either', async () => {
    const file = manifest('current.yaml', 'usergroup.dev/v1', 'current', { userGroupId: 'argo-diff-current', name: 'Current' });
    const applied = await applyAsArgoCd(file);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).not.toContain('deprecated');
    await env.waitForReady('current');
    const d = await diff(file);
    expect(d.cachedApiVersion).toBe('usergroup.dev/v1');
    expect(d.liveApiVersion).toBe('usergroup.dev/v1');
    expect(d.modified, shown(d)).toBe(false);

    // The deprecation warning's advice (change apiVersion only) for the group applied as v1alpha1 above.
    await env.waitForReady('legacy');
    const moved = manifest('legacy-v1.yaml', 'usergroup.dev/v1', 'legacy', { userGroupId: 'argo-diff-legacy', name: 'Legacy' });
    const m = await diff(moved);
    expect(m.liveApiVersion).toBe('usergroup.dev/v1');
    expect(m.modified, shown(m)).toBe(false);
  });

  it('a changed spec is a difference, in either version (the comparison can fail)', async () => {
    await env.waitForReady('legacy');
    for (const apiVersion of ['usergroup.dev/v1alpha1', 'usergroup.dev/v1']) {
      const renamed = manifest('renamed.yaml', apiVersion, 'legacy', { userGroupId: 'argo-diff-legacy', name: 'Legacy Renamed' });
      const d = await diff(renamed);
      expect(d.liveApiVersion).toBe(apiVersion);
      expect(d.modified, shown(d)).toBe(true);
      expect((d.normalizedLive?.['spec'] as Record<string, unknown>)['name']).toBe('Legacy');
      expect((d.predictedLive?.['spec'] as Record<string, unknown>)['name']).toBe('Legacy Renamed');
    }
  });
});
