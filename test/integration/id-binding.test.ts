import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { createNamespace, eventually } from '../support/kube.js';
import { TestEnv, type OperatorHandle } from '../support/operator.js';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.js';
import { createUserGroupAs, readSecretAs, secretTokenAs, sha256, tenantIdentity, userGroupIn, readyOf, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * An id the admins' rules give to one namespace only is held by the rules, without a UserGroupClaim (one write and
 * one watch event less per group), in a controller that sees every namespace, as the chart runs it. The shortcut is
 * wrong if an admin's later rule lets another namespace take such an id: the attack below is that, with the worst
 * adoption policy (Keep would hand the thief the holder's token). Tenants act as their own ServiceAccounts under a
 * namespace editor's Role; every service call is counted at a proxy. A private control plane: the controller watches
 * every namespace, which on the shared one would be every other test's.
 */

describe('ids bound to a namespace by the rules: no claim, and no way in when the rules widen', () => {
  let cp: ControlPlane;
  let env: TestEnv;
  let proxy: RecordingProxy;
  let a: Tenant;
  let b: Tenant;
  let operator: OperatorHandle;

  const reason = async (t: Tenant, name: string): Promise<string | undefined> => readyOf(await userGroupIn({ env }, t.namespace, name))?.reason;
  const waitReason = (t: Tenant, name: string, want: string): Promise<unknown> =>
    eventually(`${t.namespace}/${name} ${want}`, async () => ((await reason(t, name)) === want ? true : undefined), 60_000, 200);
  const serviceCalls = (): number => proxy.requests.filter((r) => r.path.split('?')[0] === '/api/user').length;

  beforeAll(async () => {
    cp = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')] });
    env = await TestEnv.create('bind', {}, cp.kubeconfigPath);
    proxy = await startRecordingProxy(env.sim.url);
    a = await tenantIdentity(await createNamespace('bind-a', env.kc), env.kc);
    b = await tenantIdentity(await createNamespace('bind-b', env.kc), env.kc);
    // The benchmark's kind of rule: one namespace by name, any id. It binds every id to namespace a.
    await env.putClusterService(env.defaultService, {
      url: proxy.url,
      tenants: [{ namespaces: [a.namespace], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
    operator = await env.startOperator({ allNamespaces: true });
  }, 120_000);

  afterAll(async () => {
    await ifAssigned(env)?.close();
    await ifAssigned(proxy)?.stop();
    await ifAssigned(cp)?.stop();
  });

  it('the legitimate tenant syncs with one PUT and no claim; its duplicate makes no call', async () => {
    await createUserGroupAs(a, 'acme', { userGroupId: 'acme-1', name: 'Acme' });
    await waitReason(a, 'acme', 'Synced');
    expect(proxy.putsFor('acme-1')).toHaveLength(1);
    expect(serviceCalls()).toBe(1);
    expect(await env.claims([a.namespace, b.namespace])).toEqual([]);
    expect(env.simGroup('acme-1')?.tokenSha256).toBe(sha256((await secretTokenAs(a, 'acme')) ?? ''));

    await createUserGroupAs(a, 'acme-copy', { userGroupId: 'acme-1', name: 'Acme again', tokenSecret: { name: 'acme-copy' } });
    await waitReason(a, 'acme-copy', 'DuplicateUserGroupId');
    expect(serviceCalls()).toBe(1);
    expect(await env.claims([a.namespace, b.namespace])).toEqual([]);
  });

  it('an admin widens the rules (another ClusterUserGroupService gives namespace b any id, adoption Keep): b asking for the id gets UserGroupIdClaimed, no call, the claim names the holder', async () => {
    const held = await secretTokenAs(a, 'acme');
    const before = serviceCalls();
    await env.putClusterService(`${env.namespace}-wide`, {
      url: proxy.url,
      tenants: [{ namespaces: [b.namespace], userGroupIds: { prefix: '' }, adoption: 'Keep' }],
    });
    await createUserGroupAs(b, 'thief', {
      userGroupId: 'acme-1',
      name: 'Mine now',
      serviceRef: { kind: 'ClusterUserGroupService', name: `${env.namespace}-wide` },
    });
    await waitReason(b, 'thief', 'UserGroupIdClaimed');

    // What the attack achieved: nothing. No call, no Secret in b, a's token still the group's, the id claimed for a.
    expect(serviceCalls() - before).toBe(0);
    expect(proxy.putsFor('acme-1')).toHaveLength(1);
    expect(await readSecretAs(b, 'thief')).toBeUndefined();
    expect(await secretTokenAs(a, 'acme')).toBe(held);
    expect(env.simGroup('acme-1')?.tokenSha256).toBe(sha256(held ?? ''));
    expect(env.simGroup('acme-1')?.name).toBe('Acme');
    const claims = await env.claims([a.namespace, b.namespace]);
    expect(claims.map((c) => [c.spec.namespace, c.spec.userGroup.name, c.spec.userGroupId])).toEqual([[a.namespace, 'acme', 'acme-1']]);
  });

  it('a restart changes nothing: the holder stays Synced with its claim, the thief refused, no call', async () => {
    const before = serviceCalls();
    await operator.stop();
    operator = await env.startOperator({ allNamespaces: true });
    // The restarted controller reconciles both; neither decision needs a call.
    await eventually('both reconciled after the restart', async () => {
      const [ours, theirs] = await Promise.all([userGroupIn({ env }, a.namespace, 'acme'), userGroupIn({ env }, b.namespace, 'thief')]);
      return readyOf(ours)?.reason === 'Synced' && readyOf(theirs)?.reason === 'UserGroupIdClaimed' ? true : undefined;
    });
    await new Promise((r) => setTimeout(r, 2_000));
    expect(serviceCalls() - before).toBe(0);
    expect(await readSecretAs(b, 'thief')).toBeUndefined();
    expect(await env.claims([a.namespace, b.namespace])).toHaveLength(1);
  });
});
