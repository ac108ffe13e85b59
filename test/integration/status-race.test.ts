import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.js';
import { ifAssigned } from '../support/teardown.js';
import { startWatchDelayProxy, type WatchDelayProxy } from '../support/watch-delay-proxy.js';

/**
 * A spec change that lands while a reconcile is at the service, and that the watch brings only after the
 * reconcile's own status write was answered: the answer (newer) is in the cache first, so the watch event
 * (older) looks like nothing new. The controller must notice from its own write's answer, or the change waits
 * for the next resync (10 h).
 */
const SERVICE_LATENCY_MS = 2_000;
/** Longer than from the spec change to the status write's answer (about SERVICE_LATENCY_MS). */
const WATCH_DELAY_MS = 5_000;

describe('a spec change racing the status write', () => {
  let env: TestEnv;
  let service: RecordingProxy;
  let apiserver: WatchDelayProxy;
  beforeAll(async () => {
    env = await TestEnv.create('race', { faults: { latencyMs: SERVICE_LATENCY_MS } });
    service = await startRecordingProxy(env.sim.url);
    await env.putClusterService(env.defaultService, { url: service.url });
    apiserver = await startWatchDelayProxy(env.kc, WATCH_DELAY_MS);
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
    await ifAssigned(apiserver)?.close();
    await ifAssigned(service)?.stop();
  });

  it('is synced too: the status write that answers with a newer generation requeues the UserGroup', async () => {
    await env.startOperator({ kc: apiserver.kc });
    await env.createUserGroup('raced', { userGroupId: 'race-1', name: 'Before' });
    // The first reconcile is at the service: change the spec under it.
    await eventually('the first PUT at the service', async () => (service.putsFor('race-1').length === 1 ? true : undefined), WATCH_DELAY_MS + 20_000, 20);
    await env.patchUserGroup('raced', { spec: { name: 'After' } });
    const synced = await env.waitForReady('raced', 'Synced', 'True', 4 * WATCH_DELAY_MS + 4 * SERVICE_LATENCY_MS);
    expect(synced.metadata.generation).toBe(2);
    expect(env.simGroup('race-1')?.name).toBe('After');
    expect(service.putsFor('race-1').length).toBe(2);
  });

  it('a Rotate UserGroup is synced once: its finalizer, written before the PUT, leaves the status in the cache', async () => {
    // A reconcile adds the rotate-on-delete finalizer (metadata only) before the first PUT; the next writes the
    // status. The watch events come WATCH_DELAY_MS late, and the token Secret's creation wakes the UserGroup
    // meanwhile: the cache must hold the status it wrote, not an object from before it (never synced: a 2nd PUT).
    await env.createUserGroup('rotating', { userGroupId: 'race-2', name: 'Rotating', deletionPolicy: 'Rotate' });
    const ready = await env.waitForReady('rotating', 'Synced', 'True', 4 * WATCH_DELAY_MS + 4 * SERVICE_LATENCY_MS);
    await eventually(
      'the finalizer on',
      async () => ((await env.getUserGroup('rotating')).metadata.finalizers?.includes('usergroup.dev/rotate-on-delete') ? true : undefined),
      4 * WATCH_DELAY_MS,
    );
    // Every delayed event delivered and every reconcile it woke done.
    await sleep(2 * WATCH_DELAY_MS + 2 * SERVICE_LATENCY_MS);
    expect(service.putsFor('race-2').length).toBe(1);
    expect((await env.getUserGroup('rotating')).status?.lastSyncTime).toBe(ready.status?.lastSyncTime);
  });
});
