import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { objectKey } from '../../src/api/meta.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import { parseUserGroup, type UserGroup, type UserGroupStatus } from '../../src/api/usergroup.js';
import type { Connection } from '../../src/controller/connections.js';
import { Reconciler, type ReconcilerPorts } from '../../src/controller/reconciler.js';
import type { desiredSecret } from '../../src/controller/token-secret.js';
import type { SecretWriteResult } from '../../src/kube/secret-writer.js';
import { SecretValue } from '../../src/service/secret-value.js';
import type { ServiceResult } from '../../src/service/types.js';

/**
 * The create-first Secret write: a UserGroup whose token Secret is in neither cache is written without a read,
 * and a create that meets AlreadyExists (a watch lagging behind a creation) is decided again from a live read —
 * before any rotation, and never touching a Secret that is not ours. Pure reconcile logic: fake ports, no I/O.
 */

const UID = 'uid-ug-1';

function userGroup(annotations: Record<string, string> = {}, status: UserGroupStatus = {}): UserGroup {
  const parsed = parseUserGroup({
    apiVersion: 'usergroup.dev/v1alpha1',
    kind: 'UserGroup',
    metadata: { name: 'acme', namespace: 'ns', uid: UID, resourceVersion: '10', generation: 1, creationTimestamp: '2026-11-22T00:00:00Z', annotations },
    spec: { userGroupId: 'acme-1', name: 'Acme' },
    status,
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

function secret(owner: string | undefined, token: string): ObservedSecret {
  const parsed = parseSecret({
    metadata: {
      name: 'acme', namespace: 'ns', uid: 'uid-secret', resourceVersion: '20',
      ...(owner ? { ownerReferences: [{ apiVersion: 'usergroup.dev/v1alpha1', kind: 'UserGroup', name: 'acme', uid: owner, controller: true }] } : {}),
    },
    type: 'Opaque',
    data: { token: Buffer.from(token).toString('base64') },
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

interface World {
  ug: UserGroup;
  /** What the owned-Secret cache holds. */
  cached: ObservedSecret | undefined;
  /** Whether the name-only cache of other Secrets knows the name. */
  otherKnown: boolean;
  /** What the apiserver really has. */
  live: ObservedSecret | undefined;
  /** The Secret is deleted and re-created around every read: reads find nothing, creates meet it. */
  vanishesOnRead?: boolean;
}

function harness(world: World) {
  const calls: string[] = [];
  let token = 'tok-1';
  const connection: Connection = {
    id: 'default',
    description: 'the default connection',
    upsert: async (): Promise<ServiceResult> => {
      calls.push('PUT');
      return { ok: true, group: { teamId: 7, token: new SecretValue(token), name: 'Acme', providedId: 'acme-1', created: true, environmentTag: 'Customer' } };
    },
    rotate: async (): Promise<ServiceResult> => {
      calls.push('POST');
      token = `${token}-r`;
      return { ok: true, group: { teamId: 7, token: new SecretValue(token), name: 'Acme', providedId: 'acme-1', created: false, environmentTag: 'Customer' } };
    },
  };
  const writes: { resourceVersion: string | undefined; annotations: Record<string, string> }[] = [];
  const ports: ReconcilerPorts = {
    userGroup: (key) => (key === objectKey(world.ug.metadata) ? world.ug : undefined),
    userGroupsWithId: () => [world.ug],
    cachedSecret: () => world.cached,
    otherSecretExists: () => world.otherKnown,
    readSecret: async () => {
      calls.push('GET Secret');
      return world.vanishesOnRead ? undefined : world.live;
    },
    writeSecret: async (desired: ReturnType<typeof desiredSecret>, resourceVersion): Promise<SecretWriteResult> => {
      calls.push(resourceVersion === undefined ? 'create Secret' : 'replace Secret');
      writes.push({ resourceVersion, annotations: { ...(desired.metadata?.annotations ?? {}) } });
      if (resourceVersion === undefined && world.live) return { ok: false, conflict: 'exists', message: 'already exists' };
      const parsed = parseSecret({ ...desired, metadata: { ...desired.metadata, uid: 'uid-secret', resourceVersion: String(30 + writes.length) } });
      if (!parsed.ok) throw new Error(parsed.error);
      world.live = parsed.value;
      return { ok: true, secret: parsed.value };
    },
    staleSecrets: () => [],
    deleteSecret: async () => undefined,
    patchStatus: async (_ug, status) => {
      calls.push(`status ${status.conditions?.find((c) => c.type === 'Ready')?.reason ?? '?'}`);
    },
    resolveConnection: async () => ({ ok: true, connection }),
    invalidateConnection: () => undefined,
    event: (_ug, type, reason) => calls.push(`Event ${type} ${reason}`),
    tokenRotated: () => undefined,
    now: () => Date.parse('2026-11-22T01:00:00Z'),
  };
  const reconciler = new Reconciler(ports, { resyncPeriodMs: 3_600_000, log: pino({ level: 'silent' }) });
  return { calls, writes, reconcile: () => reconciler.reconcile('ns/acme', 'r1') };
}

describe('token Secret: create first, read only when a name is known to be taken', () => {
  it('a new UserGroup whose Secret name no cache knows: PUT, create, status — no read', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: undefined });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.calls).toEqual(['PUT', 'create Secret', 'Event Normal Synced', 'status Synced']);
  });

  it('a name the other-Secrets cache knows is read first; not ours → SecretConflict with no service call', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: true, live: secret(undefined, 'someone-elses') });
    expect(await h.reconcile()).toMatchObject({ kind: 'retry', minDelayMs: 30_000 });
    expect(h.calls).toEqual(['GET Secret', 'status SecretConflict', 'Event Warning SecretConflict']);
    expect(h.writes).toEqual([]);
  });

  it('a foreign Secret no cache has seen yet: the create fails, a live read decides SecretConflict, nothing written', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(undefined, 'someone-elses') });
    expect(await h.reconcile()).toMatchObject({ kind: 'retry', minDelayMs: 30_000 });
    expect(h.calls).toEqual(['PUT', 'create Secret', 'GET Secret', 'status SecretConflict', 'Event Warning SecretConflict']);
  });

  it('our own Secret no cache has seen yet (unlabelled, or a lagging watch): decided again from the live read and replaced', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token') });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(h.calls).toEqual(['PUT', 'create Secret', 'GET Secret', 'PUT', 'replace Secret', 'Event Normal Synced', 'status Synced']);
    expect(h.writes[1]?.resourceVersion).toBe('20');
  });

  it('a rotation whose intent write meets an unseen Secret rotates only after the live read, exactly once', async () => {
    const h = harness({ ug: userGroup({ [ROTATE_ANNOTATION]: 'r1' }), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token') });
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    // The first pass's intent write is the create that fails: no POST happens before the Secret is known.
    expect(h.calls.slice(0, 3)).toEqual(['PUT', 'create Secret', 'GET Secret']);
    expect(h.calls.filter((c) => c === 'POST')).toHaveLength(1);
    expect(h.calls.indexOf('POST')).toBeGreaterThan(h.calls.indexOf('GET Secret'));
    expect(h.writes.at(-1)?.annotations['usergroup.dev/rotation-handled']).toBe('r1');
  });

  it('a Secret that keeps appearing and vanishing gives up this round and retries with backoff', async () => {
    const h = harness({ ug: userGroup(), cached: undefined, otherKnown: false, live: secret(UID, 'stale-token'), vanishesOnRead: true });
    expect(await h.reconcile()).toEqual({ kind: 'retry' });
    expect(h.calls.filter((c) => c === 'create Secret')).toHaveLength(2);
  });
});
