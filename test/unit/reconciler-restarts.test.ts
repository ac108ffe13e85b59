import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import type { UserGroupStatus } from '../../src/api/usergroup.js';
import type { ObservedWorkload, RestartTarget } from '../../src/api/workload.js';
import { ApiError } from '../../src/kube/api-error.js';
import { REQUESTED_ROTATION, sealedSecret, syncedHarness, syncedStatus, userGroup, type Harness, type World } from '../support/reconciler-harness.js';

/**
 * spec.rolloutRestartTargets through the reconciler's ports: a workload is restarted once per new token, after
 * that token is stored, only if its owner named the UserGroup; never for a sync that kept the token. No I/O.
 */

const ISSUED = '2026-11-20T00:00:00.000Z';
const NOW = Date.parse('2026-11-22T01:00:00.250Z');
const NEW_ISSUED = new Date(NOW).toISOString();
const WEB: RestartTarget = { kind: 'Deployment', name: 'web' };
const DB: RestartTarget = { kind: 'StatefulSet', name: 'db' };

const workload = (over: Partial<ObservedWorkload> = {}): ObservedWorkload => ({ resourceVersion: '7', consentsTo: ['acme'], restartedFor: {}, ...over });

async function world(
  init: {
    rotate?: boolean;
    restartedFor?: string | undefined;
    targets?: RestartTarget[];
    workloads?: Record<string, ObservedWorkload>;
    status?: Partial<UserGroupStatus>;
  } & Partial<Omit<World, 'workloads'>> = {},
): Promise<Harness & { readonly workloads: Map<string, ObservedWorkload> }> {
  const { rotate, targets, workloads: initial, status, ...rest } = init;
  const workloads = new Map(Object.entries(initial ?? { 'Deployment/web': workload() }));
  const synced = await syncedStatus();
  const restartedFor = 'restartedFor' in init ? init.restartedFor : ISSUED;
  const ug = userGroup({
    rolloutRestartTargets: targets ?? [WEB],
    status: { ...synced, ...(restartedFor !== undefined ? { rolloutRestarts: { tokenIssuedTime: restartedFor } } : {}), ...status },
    ...(rotate === false ? {} : { annotations: { [ROTATE_ANNOTATION]: 'r1' } }),
  });
  return Object.assign(syncedHarness(ug, ISSUED, NOW, { workloads, ...rest }), { workloads });
}

/** Each workload's resourceVersion (a restart moves it on by one) and the tokens it was restarted for. */
const marks = (h: { readonly workloads: Map<string, ObservedWorkload> }): Record<string, Pick<ObservedWorkload, 'resourceVersion' | 'restartedFor'>> =>
  Object.fromEntries([...h.workloads].map(([key, w]) => [key, { resourceVersion: w.resourceVersion, restartedFor: w.restartedFor }]));

describe('restart targets: once per new token, through the ports', () => {
  it('a rotation: the new token is stored first, then each target restarted once, and status remembers the token', async () => {
    const h = await world({ targets: [WEB, DB], workloads: { 'Deployment/web': workload(), 'StatefulSet/db': workload() } });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({ ...REQUESTED_ROTATION, events: { ...REQUESTED_ROTATION.events, 'Normal RolloutRestarted': 2 } });
    expect(marks(h)).toEqual({
      'Deployment/web': { resourceVersion: '8', restartedFor: { acme: NEW_ISSUED } },
      'StatefulSet/db': { resourceVersion: '8', restartedFor: { acme: NEW_ISSUED } },
    });
    // Protocol: each target is restarted only after the new token is stored (pods restarted before would start with the old one).
    for (const restart of ['restart Deployment/web', 'restart StatefulSet/db']) {
      expect(h.order('replace Secret', restart)).toEqual(['replace Secret', 'replace Secret', restart]);
    }
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: NEW_ISSUED, lastRestartTime: '2026-11-22T01:00:00Z' });
  });

  it('a spec-only sync (a PUT that keeps the token) restarts nothing and reads no workload', async () => {
    const h = await world({ rotate: false, status: { syncedHash: 'an older spec' } });
    await h.reconcile();
    expect(h.calls).toContain('PUT');
    expect(h.calls.filter((c) => c.includes('Deployment') || c.includes('restart'))).toEqual([]);
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('targets listed for the first time: nothing restarted, the current token recorded', async () => {
    const h = await world({ rotate: false, restartedFor: undefined });
    await h.reconcile();
    expect(h.outcome()).toEqual({ service: {}, secret: 'tok-1', events: {}, ready: 'Synced' });
    expect(marks(h)).toEqual({ 'Deployment/web': { resourceVersion: '7', restartedFor: {} } });
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('a restart done before a crash (the workload carries the new token mark) is not repeated', async () => {
    // The world after a run that restarted web and died: the Secret holds the new token; status still names the old one (the crash).
    const stored = sealedSecret('tok-r1', { issuedAt: NEW_ISSUED });
    const again = await world({
      rotate: false,
      targets: [WEB, DB],
      workloads: {
        'Deployment/web': workload({ restartedFor: { acme: NEW_ISSUED } }),
        'StatefulSet/db': workload(),
      },
      cached: stored,
      live: stored,
      serviceToken: 'tok-r1',
    });
    await again.reconcile();
    expect(again.calls.filter((c) => c.startsWith('restart ') && c !== 'restart cap')).toEqual(['restart StatefulSet/db']);
    expect(again.calls).not.toContain('POST');
    expect(again.statuses.at(-1)?.rolloutRestarts?.tokenIssuedTime).toBe(NEW_ISSUED);
  });

  it("a workload whose owner did not consent, or that does not exist: a Warning, no patch, and the token's restarts are done", async () => {
    const h = await world({ targets: [WEB, DB], workloads: { 'Deployment/web': workload({ consentsTo: ['someone-else'] }) } });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.outcome()).toEqual({
      ...REQUESTED_ROTATION,
      events: { ...REQUESTED_ROTATION.events, 'Warning RestartTargetNotAllowed': 1, 'Warning RestartTargetNotFound': 1 },
    });
    expect(marks(h)).toEqual({ 'Deployment/web': { resourceVersion: '7', restartedFor: {} } });
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: NEW_ISSUED });
  });

  it('the global cap says wait: the token is stored and Ready, the restart comes back when a slot is free', async () => {
    const h = await world({ restartCapWaitMs: 4_000 });
    expect(h.requeue(await h.reconcile())).toEqual([['forget'], ['addAfter', 4_000]]);
    expect(h.calls).not.toContain('restart Deployment/web');
    expect(h.writes.at(-1)?.token).toBe('tok-r1');
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('the apiserver refuses the patch (no RBAC): a Warning, a retry with backoff, the old token still owed its restarts', async () => {
    const h = await world({
      restartRefusal: new ApiError('PATCH', '/apis/apps/v1/namespaces/ns/deployments/web', 403, 'Forbidden', 'deployments.apps "web" is forbidden'),
    });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'restart-refused' });
    expect(h.calls).toContain('Event Warning RestartFailed');
    expect(h.statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('the workload changed between the read and the patch (its consent, perhaps): decided again, not forced', async () => {
    const h = await world({ workloadChangesAfterRead: true });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'lost-race' });
    expect(h.calls).toContain('restart Deployment/web');
    expect(h.calls).not.toContain('Event Normal RolloutRestarted');
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('restarts off in this operator: one Warning per new token, no workload read', async () => {
    const h = await world({ workloadRestarts: false });
    await h.reconcile();
    expect(h.calls.filter((c) => c.includes('Deployment'))).toEqual([]);
    expect(h.calls).toContain('Event Warning RolloutRestartDisabled');
    expect(h.statuses.at(-1)?.rolloutRestarts).toEqual({ tokenIssuedTime: NEW_ISSUED });
  });
});
