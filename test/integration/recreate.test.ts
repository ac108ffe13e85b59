import type { V1Secret } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { claimVersion, group, TestEnv, version, type OperatorHandle, type UserGroupObject } from '../support/operator.js';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.js';
import { createUserGroupAs, readSecretAs, secretIn as secretInAsAdmin, sha256, tenantIdentity, userGroupIn, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * Issue 42, item 1: a UserGroup deleted under deletionPolicy Retain and applied again in the same namespace (a GitOps
 * prune and re-sync, a replace, a manifest moved between Applications) converges with no POST and the same token:
 * the namespace keeps the token Secret (its second owner), and the UserGroup applied again takes it back by its
 * sealed record. With the controller running, across a restart, and with no controller running at the time. Then
 * what tenants (real ServiceAccounts under an editor's Role) can make of it: another namespace re-creating the id,
 * a forged kept Secret, a group last held by another namespace. Real apiserver, real garbage collector
 * (kube-controller-manager); every service call counted at a proxy in front of the simulator.
 */

describe('a UserGroup deleted under Retain and applied again', () => {
  let env: TestEnv;
  let proxy: RecordingProxy;
  let operator: OperatorHandle;
  let a: Tenant;
  let b: Tenant;
  const namespaces: string[] = [];
  const args = (): string[] => ['--namespaces', namespaces.join(',')];

  beforeAll(async () => {
    env = await TestEnv.create('rec');
    proxy = await startRecordingProxy(env.sim.url);
    for (const prefix of ['rec-a', 'rec-b']) namespaces.push(await createNamespace(prefix, env.kc));
    [a, b] = (await Promise.all(namespaces.map((ns) => tenantIdentity(ns, env.kc)))) as [Tenant, Tenant];
    // Adoption Rotate (the default): an adoption shows as a POST, a take-back as none.
    await env.putClusterService(env.defaultService, {
      url: proxy.url,
      tenants: [
        { namespaces: [...namespaces], userGroupIds: { prefix: '{namespace}.' }, adoption: 'Rotate' },
        { namespaces: [...namespaces], userGroupIds: { prefix: 'shared.' }, adoption: 'Rotate' },
      ],
    });
    operator = await env.startOperator({ args: args() });
  }, 120_000);

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail')
      console.error(
        ifAssigned(operator)
          ?.logs.filter((l) => /kept|took back|adopt|Secret|claim/i.test(l))
          .slice(-40)
          .join('\n'),
      );
  });

  afterAll(async () => {
    await ifAssigned(operator)?.stop();
    await ifAssigned(env)?.close();
    await ifAssigned(proxy)?.stop();
    for (const ns of namespaces) await deleteNamespace(ns, ifAssigned(env)?.kc).catch(() => undefined);
  });

  // --- What the test sees, as the admin --------------------------------------------------------------

  const ugIn = (ns: string, name: string): Promise<UserGroupObject | undefined> => userGroupIn({ env }, ns, name);
  const secretIn = (ns: string, name: string): Promise<V1Secret | undefined> => secretInAsAdmin({ env }, ns, name);

  const tokenOf = (s: V1Secret | undefined): string | undefined => {
    const data = s?.data?.['token'];
    return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
  };

  /** Ready=True Synced for its generation, and its token Secret controlled by it (this uid). */
  async function waitSynced(ns: string, name: string, timeoutMs = 60_000): Promise<{ ug: UserGroupObject; secret: V1Secret }> {
    return eventually(
      `${ns}/${name} synced, its Secret its own`,
      async () => {
        const ug = await ugIn(ns, name);
        const ready = ug?.status?.conditions?.find((c) => c.type === 'Ready');
        if (!ug || ready?.reason !== 'Synced' || ug.status?.observedGeneration !== ug.metadata.generation) return undefined;
        const secret = await secretIn(ns, name);
        const controller = secret?.metadata?.ownerReferences?.find((o) => o.controller);
        return secret && controller?.uid === ug.metadata.uid ? { ug, secret } : undefined;
      },
      timeoutMs,
      50,
    );
  }

  async function waitReason(ns: string, name: string, reason: string): Promise<UserGroupObject> {
    return eventually(
      `${ns}/${name} ${reason}`,
      async () => {
        const ug = await ugIn(ns, name);
        return ug?.status?.conditions?.find((c) => c.type === 'Ready')?.reason === reason ? ug : undefined;
      },
      60_000,
    );
  }

  /** Deletes as the tenant, the way Argo CD prunes (foreground propagation by default), and waits until it is gone. */
  async function pruneAs(t: Tenant, name: string, propagationPolicy: 'Foreground' | 'Background' = 'Foreground'): Promise<void> {
    await t.custom.deleteNamespacedCustomObject({ group, version, namespace: t.namespace, plural: 'usergroups', name, body: { propagationPolicy } });
    await eventually(`${t.namespace}/${name} gone`, async () => ((await ugIn(t.namespace, name)) ? undefined : true), 60_000, 50);
  }

  /** The tenant reads its token Secret every 20 ms until stopped: how often it was not there. */
  function watchReadable(t: Tenant, name: string): { stop: () => Promise<{ reads: number; missing: number }> } {
    const state = { stopped: false };
    let reads = 0;
    let missing = 0;
    const loop = (async () => {
      while (!state.stopped) {
        reads++;
        if (!(await readSecretAs(t, name))) missing++;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    return {
      stop: async () => {
        state.stopped = true;
        await loop;
        return { reads, missing };
      },
    };
  }

  const calls = (): { puts: number; posts: number; total: number } => ({
    puts: proxy.requests.filter((r) => r.method === 'PUT').length,
    posts: proxy.requests.filter((r) => r.method === 'POST').length,
    total: proxy.requests.length,
  });
  const since = (before: ReturnType<typeof calls>): ReturnType<typeof calls> => {
    const now = calls();
    return { puts: now.puts - before.puts, posts: now.posts - before.posts, total: now.total - before.total };
  };
  const valid = (userGroupId: string, token: string | undefined): boolean =>
    token !== undefined && env.sim.groups(env.apiKey).find((g) => g.userGroupId === userGroupId)?.tokenSha256 === sha256(token);
  const reasons = async (ns: string, uid: string | undefined): Promise<string[]> =>
    (await env.events.listNamespacedEvent({ namespace: ns })).items.filter((e) => e.regarding?.uid === uid).map((e) => `${e.type} ${e.reason}`);

  /**
   * The three timings of the issue: create and sync as the tenant, delete as the tenant (Argo CD's prune), apply the
   * same manifest again; `between` runs between the deletion and the re-apply (a controller restart, say). Returns
   * what it cost and whether the tenant could always read its Secret.
   */
  async function recreate(
    name: string,
    steps: { beforeDelete?: () => Promise<void>; beforeApply?: () => Promise<void>; afterApply?: () => Promise<void> } = {},
  ): Promise<{ calls: ReturnType<typeof calls>; sameToken: boolean; sameSecret: boolean; missing: number; reads: number; tookMs: number; events: string[] }> {
    const id = `${a.namespace}.${name}`;
    await createUserGroupAs(a, name, { userGroupId: id, name });
    const first = await waitSynced(a.namespace, name);
    const token = tokenOf(first.secret);
    const before = calls();
    const reader = watchReadable(a, name);
    await steps.beforeDelete?.();
    await pruneAs(a, name);
    // The Secret stays, and the garbage collector leaves it the namespace as its one owner.
    await eventually(
      'the kept Secret owned by its namespace alone',
      async () => {
        const owners = (await secretIn(a.namespace, name))?.metadata?.ownerReferences?.map((o) => o.kind);
        return owners?.length === 1 && owners[0] === 'Namespace' ? true : undefined;
      },
      60_000,
    );
    await steps.beforeApply?.();
    const applied = Date.now();
    await createUserGroupAs(a, name, { userGroupId: id, name });
    await steps.afterApply?.();
    const again = await waitSynced(a.namespace, name, 120_000);
    const tookMs = Date.now() - applied;
    const readable = await reader.stop();
    return {
      calls: since(before),
      sameToken: tokenOf(again.secret) === token && valid(id, token),
      sameSecret: again.secret.metadata?.uid === first.secret.metadata?.uid,
      ...readable,
      tookMs,
      events: await eventually('the Event', async () => {
        const seen = await reasons(a.namespace, again.ug.metadata.uid);
        return seen.includes('Normal TokenSecretReclaimed') ? seen : undefined;
      }),
    };
  }

  it('with the controller running: no POST, one PUT, the same token, the same Secret, readable throughout', async () => {
    const r = await recreate('running');
    console.log(`re-create, controller running: ${JSON.stringify(r)}`);
    expect(r.calls).toEqual({ puts: 1, posts: 0, total: 1 });
    expect(r).toMatchObject({ sameToken: true, sameSecret: true, missing: 0 });
    expect(r.events).not.toContain('Normal Adopted');
  });

  it('after a controller restart (deleted while it ran, applied again under a new process): the same', async () => {
    const r = await recreate('restart', {
      beforeApply: async () => {
        await operator.stop();
        operator = await env.startOperator({ args: args() });
      },
    });
    console.log(`re-create, after a controller restart: ${JSON.stringify(r)}`);
    expect(r.calls).toEqual({ puts: 1, posts: 0, total: 1 });
    expect(r).toMatchObject({ sameToken: true, sameSecret: true, missing: 0 });
  });

  it('deleted and applied again while no controller runs: the same once one starts', async () => {
    const r = await recreate('stopped', {
      beforeDelete: () => operator.stop(),
      afterApply: async () => {
        operator = await env.startOperator({ args: args() });
      },
    });
    console.log(`re-create, no controller running meanwhile: ${JSON.stringify(r)}`);
    expect(r.calls).toEqual({ puts: 1, posts: 0, total: 1 });
    expect(r).toMatchObject({ sameToken: true, sameSecret: true, missing: 0 });
  });

  // --- What a tenant can make of it ---------------------------------------------------------------

  it("attack: another namespace creates the id after the holder's deletion: UserGroupIdClaimed, no call, the kept Secret untouched", async () => {
    const id = 'shared.kept';
    await createUserGroupAs(a, 'held', { userGroupId: id, name: 'Held' });
    const { secret } = await waitSynced(a.namespace, 'held');
    await pruneAs(a, 'held');
    const before = calls();
    await createUserGroupAs(b, 'taker', { userGroupId: id, name: 'Taker' });
    await waitReason(b.namespace, 'taker', 'UserGroupIdClaimed');
    // A while longer: nothing is retried into a call.
    await new Promise((r) => setTimeout(r, 2_000));
    const caused = since(before);
    console.log(`attack (another namespace re-creates the id): ${caused.total} service calls caused`);
    expect(caused.total).toBe(0);
    expect(await readSecretAs(b, 'taker')).toBeUndefined();
    const kept = await secretIn(a.namespace, 'held');
    expect({ uid: kept?.metadata?.uid, token: tokenOf(kept) }).toEqual({ uid: secret.metadata?.uid, token: tokenOf(secret) });
    expect(valid(id, tokenOf(secret))).toBe(true);
  });

  it('attack: a forged kept Secret (our labels, a copied record) for a group made outside the cluster: SecretConflict, no call, nothing taken', async () => {
    // The tenant's own kept Secret, of another id: a genuine record to copy.
    await createUserGroupAs(a, 'donor', { userGroupId: `${a.namespace}.donor`, name: 'Donor' });
    await waitSynced(a.namespace, 'donor');
    await pruneAs(a, 'donor');
    const donor = await readSecretAs(a, 'donor');
    // A group the company's backend made, never held by the cluster: adopting it must rotate it.
    const outsideId = `${a.namespace}.outside`;
    const outsideToken = await backendPut(outsideId);
    // The donor's labels and annotations verbatim (a genuine record, for the donor's id, name and Secret) at the name
    // the new UserGroup will use; no owner. The tenant cannot seal a record of its own (that needs the API key).
    const forged: V1Secret = {
      metadata: { name: 'outside', labels: donor?.metadata?.labels ?? {}, annotations: donor?.metadata?.annotations ?? {} },
      data: { token: Buffer.from('guessed').toString('base64') },
    };
    await a.core.createNamespacedSecret({ namespace: a.namespace, body: forged });
    const before = calls();
    await createUserGroupAs(a, 'outside', { userGroupId: outsideId, name: 'Outside' });
    await waitReason(a.namespace, 'outside', 'SecretConflict');
    await new Promise((r) => setTimeout(r, 2_000));
    const caused = since(before);
    console.log(`attack (forged kept Secret): ${caused.total} service calls caused`);
    expect(caused.total).toBe(0);
    expect(tokenOf(await readSecretAs(a, 'outside'))).toBe('guessed');
    expect(valid(outsideId, outsideToken)).toBe(true);
    expect(env.sim.groups(env.apiKey).find((g) => g.userGroupId === outsideId)?.tokenSha256).toBe(sha256(outsideToken));
  });

  it('a group last held by another namespace (the admin released the id twice): adopted under the policy, no namespace gets the other’s token', async () => {
    const id = 'shared.moved';
    const deleteClaim = async (): Promise<void> => {
      const claim = (await env.claims(namespaces)).find((c) => c.spec.userGroupId === id);
      if (!claim) throw new Error('no claim');
      await env.custom.deleteClusterCustomObject({ group, version: claimVersion, plural: 'usergroupclaims', name: claim.metadata.name });
    };
    await createUserGroupAs(a, 'moved', { userGroupId: id, name: 'Moved' });
    const first = tokenOf((await waitSynced(a.namespace, 'moved')).secret);
    await pruneAs(a, 'moved');
    await deleteClaim();
    // b adopts it (rotating it: a's kept token dies), and lets it go too.
    let before = calls();
    await createUserGroupAs(b, 'moved', { userGroupId: id, name: 'Moved' });
    const second = tokenOf((await waitSynced(b.namespace, 'moved')).secret);
    expect(since(before).posts).toBe(1);
    expect(valid(id, first)).toBe(false);
    await pruneAs(b, 'moved');
    await deleteClaim();
    // a applies its manifest again: its kept Secret's token is not the group's any more, so this is an adoption.
    before = calls();
    await createUserGroupAs(a, 'moved', { userGroupId: id, name: 'Moved' });
    const { ug, secret } = await waitSynced(a.namespace, 'moved');
    const third = tokenOf(secret);
    const caused = since(before);
    console.log(`last held by another namespace: ${JSON.stringify(caused)}`);
    expect(caused).toEqual({ puts: 1, posts: 1, total: 2 });
    expect(third).not.toBe(second);
    expect(valid(id, second)).toBe(false);
    expect(valid(id, third)).toBe(true);
    expect(await reasons(a.namespace, ug.metadata.uid)).toContain('Normal Adopted');
  });

  /** Creates a group at the service directly, as the company's backend would (not through the operator). */
  async function backendPut(userGroupId: string): Promise<string> {
    const res = await fetch(`${env.sim.url}/api/user`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Token ${env.apiKey}` },
      body: JSON.stringify({ user_group_id: userGroupId, name: userGroupId }),
    });
    const token = ((await res.json()) as { user_group?: { token?: string } }).user_group?.token;
    if (!res.ok || !token) throw new Error(`backend PUT failed: ${res.status}`);
    return token;
  }
});
