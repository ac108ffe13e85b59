import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, kubectl } from '../support/kube.js';
import { group, plural, TestEnv, version, type OperatorHandle, type UserGroupObject } from '../support/operator.js';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.js';
import { ifAssigned } from '../support/teardown.js';
import { tenantIdentity, type Tenant } from '../support/tenancy.js';

const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'usergroup-operator' };

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function ready(ug: UserGroupObject): { status: string; reason: string; message: string } | undefined {
  return ug.status?.conditions?.find((c) => c.type === 'Ready');
}

function totalCalls(ops: ReturnType<TestEnv['calls']>): { upsert: number; rotate: number } {
  const sum = (o: Record<string, number>): number => Object.values(o).reduce((a, b) => a + b, 0);
  return { upsert: sum(ops.upsert), rotate: sum(ops.rotate) };
}

describe('sync to the service (default connection through a recording proxy)', () => {
  let env: TestEnv;
  let proxy: RecordingProxy;
  let operator: OperatorHandle;
  /** Every UserGroup version seen by a watch over the whole file, to prove no finalizer is ever set. */
  const finalizersSeen: { name: string; type: string; finalizers: string[] }[] = [];
  const watchedEvents: { type: string; name: string }[] = [];
  let watchAbort: AbortController | undefined;

  beforeAll(async () => {
    env = await TestEnv.create('sync');
    proxy = await startRecordingProxy(env.sim.url);
    watchAbort = await new Watch(env.kc).watch(
      `/apis/${group}/${version}/namespaces/${env.namespace}/${plural}`,
      {},
      (type, obj: { metadata?: { name?: string; finalizers?: string[] } }) => {
        const name = obj.metadata?.name ?? '';
        watchedEvents.push({ type, name });
        if ((obj.metadata?.finalizers ?? []).length > 0) finalizersSeen.push({ name, type, finalizers: obj.metadata?.finalizers ?? [] });
      },
      () => undefined,
    );
    operator = await env.startOperator({ serviceUrl: proxy.url });
  });

  afterAll(async () => {
    watchAbort?.abort();
    await ifAssigned(env)?.close();
    await ifAssigned(proxy)?.stop();
  });

  it('PUTs exactly {user_group_id, name} for a spec without optional fields, with Authorization: Token <key>', async () => {
    await env.createUserGroup('plain', { userGroupId: 'plain-1', name: 'Plain Co' });
    await env.waitForReady('plain');

    const puts = proxy.putsFor('plain-1');
    expect(puts).toHaveLength(1);
    const put = puts[0]!;
    expect(put.path).toBe('/api/user');
    expect(put.body).toBe('{"user_group_id":"plain-1","name":"Plain Co"}');
    const parsed = JSON.parse(put.body) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['user_group_id', 'name']);
    expect(parsed).not.toHaveProperty('mapping');
    expect(parsed).not.toHaveProperty('properties');
    expect(put.headers.authorization).toBe(`Token ${env.apiKey}`);
    expect(put.headers['content-type']).toMatch(/^application\/json\b/);
    expect(put.status).toBe(200);
  });

  it('PUTs mapping and properties (nested objects, numbers, booleans, arrays) exactly as declared', async () => {
    const mapping = { '1': 'warehouse-eu', analytics: 'ds-analytics-7' };
    const properties = {
      plan: 'gold',
      seats: 25,
      ratio: 0.75,
      trial: false,
      active: true,
      nested: { region: 'eu-west', limits: { dashboards: 10, export: true }, tiers: [1, 2, 3] },
    };
    await env.createUserGroup('full', { userGroupId: 'full-1', name: 'Full Co', mapping, properties });
    await env.waitForReady('full');

    const puts = proxy.putsFor('full-1');
    expect(puts).toHaveLength(1);
    const put = puts[0]!;
    expect(JSON.parse(put.body)).toStrictEqual({ user_group_id: 'full-1', name: 'Full Co', mapping, properties });
    expect(put.headers.authorization).toBe(`Token ${env.apiKey}`);
    expect(put.headers['content-type']).toMatch(/^application\/json\b/);
    // The service stored what was sent.
    expect(env.simGroup('full-1')).toMatchObject({ name: 'Full Co', mapping, properties });
    // Every request to the service carried the API key.
    expect(proxy.requests.length).toBeGreaterThan(0);
    for (const r of proxy.requests) expect(r.headers.authorization).toBe(`Token ${env.apiKey}`);
  });

  it('an update of name and mapping sends a new PUT with the new values and keeps the token', async () => {
    await env.createUserGroup('upd', { userGroupId: 'upd-1', name: 'Before', mapping: { a: 'ds-1' } });
    const first = await env.waitForReady('upd');
    expect(first.metadata.generation).toBe(1);
    expect(first.status?.observedGeneration).toBe(1);
    const tokenBefore = await env.secretToken('upd');
    expect(tokenBefore).toMatch(/^[A-Za-z0-9]{64}$/);
    const hashBefore = first.status?.syncedHash;

    await env.patchUserGroup('upd', { spec: { name: 'After', mapping: { a: 'ds-2', b: 'ds-3' } } });
    const updated = await env.waitForReady('upd');
    expect(updated.metadata.generation).toBe(2);
    expect(updated.status?.observedGeneration).toBe(2);
    expect(updated.status?.syncedHash).toBeDefined();
    expect(updated.status?.syncedHash).not.toBe(hashBefore);

    const puts = proxy.putsFor('upd-1');
    expect(puts).toHaveLength(2);
    expect(JSON.parse(puts[1]!.body)).toStrictEqual({ user_group_id: 'upd-1', name: 'After', mapping: { a: 'ds-2', b: 'ds-3' } });
    expect(env.simGroup('upd-1')).toMatchObject({ name: 'After', mapping: { a: 'ds-2', b: 'ds-3' }, rotations: 0 });

    const tokenAfter = await env.secretToken('upd');
    expect(tokenAfter).toBe(tokenBefore);
    expect(env.simGroup('upd-1')?.tokenSha256).toBe(sha256(tokenAfter ?? ''));
  });

  it('a restarted controller makes zero service calls for groups already synced', async () => {
    const names = Array.from({ length: 5 }, (_, i) => `restart-${i}`);
    for (const name of names) await env.createUserGroup(name, { userGroupId: `${name}-id`, name: `Restart ${name}`, properties: { n: 1 } });
    for (const name of names) await env.waitForReady(name);
    const secretVersions = new Map<string, string | undefined>();
    for (const name of names) secretVersions.set(name, (await env.getSecret(name))?.metadata?.resourceVersion);

    await operator.stop();
    const before = totalCalls(env.calls());
    const requestsBefore = proxy.requests.length;

    operator = await env.startOperator({ serviceUrl: proxy.url });
    expect(operator.logs.some((l) => l.includes('"workers started"'))).toBe(true);
    // Absence of calls can only be observed over time: give the new controller's workers time to go through its queue.
    await sleep(4_000);
    expect(totalCalls(env.calls())).toEqual(before);
    expect(proxy.requests.slice(requestsBefore)).toEqual([]);

    // Positive proof the new controller is working its queue: a group created now is synced...
    await env.createUserGroup('restart-probe', { userGroupId: 'restart-probe-id', name: 'Probe' });
    await env.waitForReady('restart-probe');
    await sleep(1_000);
    // ...and still the only calls since the restart are the probe's one create.
    const after = env.calls();
    expect(totalCalls(after)).toEqual({ upsert: before.upsert + 1, rotate: before.rotate });
    expect(proxy.requests.slice(requestsBefore).map((r) => `${r.method} ${(JSON.parse(r.body) as { user_group_id: string }).user_group_id}`)).toEqual([
      'PUT restart-probe-id',
    ]);
    for (const name of names) {
      const ug = await env.getUserGroup(name);
      expect(ready(ug)).toMatchObject({ status: 'True', reason: 'Synced' });
      expect((await env.getSecret(name))?.metadata?.resourceVersion).toBe(secretVersions.get(name));
    }
  });

  it('a deleted Secret is recreated with the same token, owned and labelled', async () => {
    const ug = await env.createUserGroup('gone', { userGroupId: 'gone-1', name: 'Gone' }).then(() => env.waitForReady('gone'));
    const original = await env.getSecret('gone');
    const token = await env.secretToken('gone');
    expect(token).toBeDefined();
    const putsBefore = proxy.putsFor('gone-1').length;

    await env.core.deleteNamespacedSecret({ namespace: env.namespace, name: 'gone' });
    const recreated = await eventually('Secret gone to be recreated', async () => {
      const s = await env.getSecret('gone');
      return s && s.metadata?.uid !== original?.metadata?.uid ? s : undefined;
    });
    expect(Buffer.from(recreated.data?.['token'] ?? '', 'base64').toString('utf8')).toBe(token);
    expect(recreated.type).toBe('Opaque');
    // Controlled by its UserGroup; the namespace a second owner, which keeps it when the UserGroup goes (deletionPolicy Retain).
    expect(recreated.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ apiVersion: `${group}/${version}`, kind: 'UserGroup', name: 'gone', uid: ug.metadata.uid, controller: true }),
      expect.objectContaining({ apiVersion: 'v1', kind: 'Namespace', name: env.namespace }),
    ]);
    expect(recreated.metadata?.labels).toMatchObject({ ...MANAGED_BY, 'usergroup.dev/usergroup': 'gone' });
    expect(env.simGroup('gone-1')?.tokenSha256).toBe(sha256(token ?? ''));
    expect(env.simGroup('gone-1')?.rotations).toBe(0);
    // Recovered with one PUT (the service has no read), never a rotation.
    expect(proxy.putsFor('gone-1').length).toBe(putsBefore + 1);
    await env.waitForReady('gone');
  });

  it('a token edited by hand in the Secret is restored to the service token', async () => {
    await env.createUserGroup('edited', { userGroupId: 'edited-1', name: 'Edited' });
    await env.waitForReady('edited');
    const token = await env.secretToken('edited');
    expect(token).toMatch(/^[A-Za-z0-9]{64}$/);

    await env.core.patchNamespacedSecret(
      { namespace: env.namespace, name: 'edited', body: { data: { token: Buffer.from('tampered-by-hand').toString('base64') } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually('the hand-edited token to be restored', async () => ((await env.secretToken('edited')) === token ? true : undefined));
    expect(env.simGroup('edited-1')?.tokenSha256).toBe(sha256(token ?? ''));
    expect(env.simGroup('edited-1')?.rotations).toBe(0);
    await env.waitForReady('edited');
  });

  // The second carries our managed-by label, which anyone who may write a Secret can put on it: a label makes
  // no Secret ours (only a UserGroup as its controller does), and it is then known by name like any other. The
  // Secrets are the namespace's tenant's (a ServiceAccount under a namespace editor's Role).
  let tenant: Promise<Tenant> | undefined;
  for (const [name, labels] of [
    ['taken', { owner: 'someone-else' }],
    ['taken-labelled', { 'app.kubernetes.io/managed-by': 'usergroup-operator' }],
  ] as const) {
    it(`never touches a pre-existing Secret it does not own (labels ${JSON.stringify(labels)}): Ready=False SecretConflict, a Warning Event, no service call`, async () => {
      tenant ??= tenantIdentity(env.namespace, env.kc);
      const foreign = await (
        await tenant
      ).core.createNamespacedSecret({
        namespace: env.namespace,
        body: { metadata: { name, labels }, type: 'Opaque', data: { token: Buffer.from('not-yours').toString('base64') } },
      });
      await env.createUserGroup(name, { userGroupId: `${name}-1`, name: 'Taken' });
      const ug = await env.waitForReady(name, 'SecretConflict');
      expect(ready(ug)?.message).toContain(name);

      const warning = await eventually('a SecretConflict Warning Event', async () =>
        (await env.eventsFor(name)).find((e) => e.type === 'Warning' && e.reason === 'SecretConflict'),
      );
      expect(warning.regarding?.kind).toBe('UserGroup');

      const now = await env.getSecret(name);
      expect(now?.metadata?.resourceVersion).toBe(foreign.metadata?.resourceVersion);
      expect(now?.data).toEqual(foreign.data);
      expect(now?.metadata?.labels).toEqual(labels);
      expect(now?.metadata?.ownerReferences ?? []).toEqual([]);
      expect(proxy.putsFor(`${name}-1`)).toEqual([]);
      expect(env.simGroup(`${name}-1`)).toBeUndefined();
    });
  }

  it('honours spec.tokenSecret name, key, labels and annotations', async () => {
    await env.createUserGroup('custom', {
      userGroupId: 'custom-1',
      name: 'Custom',
      tokenSecret: {
        name: 'custom-token-secret',
        key: 'apiToken',
        labels: { team: 'payments', tier: 'gold' },
        annotations: { 'example.com/owner': 'payments-team' },
      },
    });
    const ug = await env.waitForReady('custom');
    expect(ug.status?.tokenSecretName).toBe('custom-token-secret');

    const secret = await env.getSecret('custom-token-secret');
    expect(secret).toBeDefined();
    expect(secret?.type).toBe('Opaque');
    expect(secret?.metadata?.labels).toMatchObject({ team: 'payments', tier: 'gold', ...MANAGED_BY, 'usergroup.dev/usergroup': 'custom' });
    expect(secret?.metadata?.annotations).toMatchObject({ 'example.com/owner': 'payments-team' });
    expect(Object.keys(secret?.data ?? {})).toEqual(['apiToken']);
    const token = await env.secretToken('custom-token-secret', 'apiToken');
    expect(env.simGroup('custom-1')?.tokenSha256).toBe(sha256(token ?? ''));
    expect(secret?.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'UserGroup', name: 'custom', uid: ug.metadata.uid, controller: true }),
      expect.objectContaining({ kind: 'Namespace', name: env.namespace }),
    ]);
    // No Secret under the default name.
    expect(await env.getSecret('custom')).toBeUndefined();
  });

  it('suspend: no call while spec.suspend is true, synced once it is false', async () => {
    await env.createUserGroup('paused', { userGroupId: 'paused-1', name: 'Paused', suspend: true });
    await env.waitForReady('paused', 'Suspended');
    expect(proxy.putsFor('paused-1')).toEqual([]);
    expect(proxy.requests.filter((r) => r.body.includes('paused-1'))).toEqual([]);
    expect(env.simGroup('paused-1')).toBeUndefined();
    expect(await env.getSecret('paused')).toBeUndefined();

    await env.patchUserGroup('paused', { spec: { suspend: false } });
    const ug = await env.waitForReady('paused');
    expect(ug.metadata.generation).toBe(2);
    expect(proxy.putsFor('paused-1')).toHaveLength(1);
    const token = await env.secretToken('paused');
    expect(env.simGroup('paused-1')?.tokenSha256).toBe(sha256(token ?? ''));
  });

  it('deletion (Retain): the Secret is kept, the group stays at the service, a Deleted Event, no finalizer ever', async () => {
    await env.createUserGroup('doomed', { userGroupId: 'doomed-1', name: 'Doomed' });
    const ug = await env.waitForReady('doomed');
    expect(ug.metadata).not.toHaveProperty('finalizers');
    expect(await env.getSecret('doomed')).toBeDefined();
    const simBefore = env.simGroup('doomed-1');
    expect(simBefore).toBeDefined();

    await env.deleteUserGroup('doomed');
    await eventually('UserGroup doomed to be gone', async () => {
      try {
        await env.getUserGroup('doomed');
        return undefined;
      } catch (err) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
    // The garbage collector drops the UserGroup's reference; the namespace's keeps the Secret and its token.
    await eventually('Secret doomed kept, owned by its namespace alone', async () => {
      const owners = (await env.getSecret('doomed'))?.metadata?.ownerReferences?.map((o) => o.kind);
      return owners?.join() === 'Namespace' ? true : undefined;
    });
    const deleted = await eventually('a Deleted Event about doomed', async () => (await env.eventsFor('doomed')).find((e) => e.reason === 'Deleted'));
    expect(deleted.type).toBe('Normal');
    expect(deleted.regarding?.kind).toBe('UserGroup');
    expect(deleted.regarding?.uid).toBe(ug.metadata.uid);

    expect(env.simGroup('doomed-1')).toMatchObject({ userGroupId: 'doomed-1', tokenSha256: simBefore?.tokenSha256 });
    // The watch over the whole file saw this object come and go, never with a finalizer.
    await eventually('the watch to see doomed deleted', async () =>
      watchedEvents.some((e) => e.type === 'DELETED' && e.name === 'doomed') ? true : undefined,
    );
    expect(watchedEvents.filter((e) => e.name === 'doomed').length).toBeGreaterThanOrEqual(2);
    expect(finalizersSeen).toEqual([]);
  });

  it('duplicates: the older UserGroup wins, the newer is DuplicateUserGroupId and makes no call until the older goes', async () => {
    await env.createUserGroup('dup-a', { userGroupId: 'dup-1', name: 'Dup Older' });
    const older = await env.waitForReady('dup-a');
    // creationTimestamp has one-second resolution: make sure the newer one is strictly newer.
    await eventually('a new second', async () => (Date.now() - Date.parse(older.metadata.creationTimestamp ?? '') > 1_100 ? true : undefined));
    expect(proxy.putsFor('dup-1')).toHaveLength(1);

    await env.createUserGroup('dup-b', { userGroupId: 'dup-1', name: 'Dup Newer' });
    const newer = await env.waitForReady('dup-b', 'DuplicateUserGroupId');
    expect(ready(newer)?.message).toContain('dup-a');
    expect(proxy.putsFor('dup-1')).toHaveLength(1);
    expect(JSON.parse(proxy.putsFor('dup-1')[0]!.body)).toMatchObject({ name: 'Dup Older' });
    expect(await env.getSecret('dup-b')).toBeUndefined();
    expect(ready(await env.getUserGroup('dup-a'))).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(env.simGroup('dup-1')?.name).toBe('Dup Older');

    await env.deleteUserGroup('dup-a');
    await env.waitForReady('dup-b');
    const puts = proxy.putsFor('dup-1');
    expect(puts).toHaveLength(2);
    expect(JSON.parse(puts[1]!.body)).toStrictEqual({ user_group_id: 'dup-1', name: 'Dup Newer' });
    expect(env.simGroup('dup-1')?.name).toBe('Dup Newer');
    const token = await env.secretToken('dup-b');
    expect(env.simGroup('dup-1')?.tokenSha256).toBe(sha256(token ?? ''));
  });

  it('reports teamId, providedId, environmentTag, tokenSecretName, lastSyncTime, syncedHash; kubectl shows the printer columns', async () => {
    const startedAt = Date.now();
    await env.createUserGroup('columns', { userGroupId: 'columns-1', name: 'Columns', tokenSecret: { name: 'columns-secret' } });
    const ug = await env.waitForReady('columns');
    const sim = env.simGroup('columns-1');
    expect(sim).toBeDefined();
    expect(ug.status).toMatchObject({
      observedGeneration: 1,
      teamId: sim?.teamId,
      providedId: 'columns-1',
      environmentTag: 'Customer',
      tokenSecretName: 'columns-secret',
    });
    expect(typeof ug.status?.teamId).toBe('number');
    expect(ug.status?.syncedHash).toMatch(/^sha256:[0-9a-f]{64}$/);
    const lastSync = Date.parse(ug.status?.lastSyncTime ?? '');
    expect(Number.isNaN(lastSync)).toBe(false);
    expect(lastSync).toBeGreaterThanOrEqual(Math.floor(startedAt / 1000) * 1000);
    expect(lastSync).toBeLessThanOrEqual(Date.now());

    const out = await kubectl(['get', 'usergroups', '-n', env.namespace]);
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines[0]?.trim().split(/\s+/)).toEqual(['NAME', 'USERGROUPID', 'READY', 'REASON', 'SECRET', 'AGE']);
    const row = lines
      .find((l) => l.startsWith('columns '))
      ?.trim()
      .split(/\s+/);
    expect(row?.slice(0, 5)).toEqual(['columns', 'columns-1', 'True', 'Synced', 'columns-secret']);
    expect(row?.[5]).toMatch(/^\d+[smhd]/);
  });
});

describe('a token rotated outside the operator (resync period 3s)', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('sync-resync');
    await env.startOperator({ args: ['--resync-period', '3s'] });
  });
  afterAll(async () => ifAssigned(env)?.close());

  it('is followed: after the next resync the Secret holds the service token', async () => {
    await env.createUserGroup('drift', { userGroupId: 'drift-1', name: 'Drift' });
    await env.waitForReady('drift');
    const held = await env.secretToken('drift');
    expect(held).toMatch(/^[A-Za-z0-9]{64}$/);

    const res = await fetch(`${env.sim.url}/api/user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Token ${env.apiKey}` },
      body: JSON.stringify({ current_token: held }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { success: number; user_group: { token: string; provided_id: string } };
    expect(body.success).toBe(1);
    expect(body.user_group.provided_id).toBe('drift-1');
    const rotated = body.user_group.token;
    expect(rotated).not.toBe(held);
    expect(env.simGroup('drift-1')?.tokenSha256).toBe(sha256(rotated));

    await eventually('the Secret to follow the token rotated elsewhere', async () => ((await env.secretToken('drift')) === rotated ? true : undefined));
    const ug = await env.waitForReady('drift');
    expect(ug.status?.providedId).toBe('drift-1');
    // Followed by re-syncing (PUT), never by rotating again.
    expect(env.simGroup('drift-1')?.rotations).toBe(1);
    expect(env.calls().rotate.ok).toBe(1);
    expect(env.calls().upsert.updated).toBeGreaterThanOrEqual(1);
  });
});
