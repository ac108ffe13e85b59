// mountedTokenRefresh on a real apiserver (issue 59): the controller, with nothing but the chart's ServiceAccount
// token, prompts exactly the Pods whose owner labelled them for the UserGroup, by one annotation; the chart's
// admission policy refuses every other write that token could make to a Pod; and nothing a tenant writes makes it
// prompt a Pod that did not consent, nor causes a service call beyond the rotation it asked for.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { ControlPlane } from '../../devtools/controlplane/controlplane.js';
import { killAllControllers, msgIs, signalAndWait, spawnController, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { adminKubeConfig, createNamespace, eventually, run, type CommandResult } from '../support/kube.js';
import { CHART_DIR } from '../../devtools/manifests.js';
import { TestEnv } from '../support/operator.js';
import { serviceAccountKubeconfig, type ServiceAccountAccess } from '../support/service-account.js';
import { annotateUserGroupAs, createUserGroupAs, tenantIdentity, type Tenant } from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

const RELEASE = 'ugp';
const SA = `${RELEASE}-usergroup-operator`;
const MARK = 'refreshed.usergroup.dev/acme';
/** The guard's own words: a refusal by RBAC (no such verb) would not carry them. */
const GUARD = /the usergroup-operator controller may/;

describe('mountedTokenRefresh: prompts only consenting Pods, by one annotation, and the guard refuses the rest', () => {
  let cp: ControlPlane;
  let env: TestEnv;
  let system: string;
  let other: string;
  let sa: ServiceAccountAccess;
  let tenant: Tenant;
  let controller: ControllerProcess | undefined;

  const admin = (args: readonly string[], input?: string): Promise<CommandResult> =>
    run(cp.binaries.kubectl, ['--kubeconfig', cp.kubeconfigPath, ...args], input === undefined ? {} : { input });
  const pod = (name: string, namespace: string, labels: Record<string, string>): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace, labels, annotations: { 'example.com/owner': 'team-a' } },
      spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
    });
  const annotationsOf = async (name: string, namespace = env.namespace): Promise<Record<string, string>> =>
    JSON.parse((await admin(['get', 'pod', name, '-n', namespace, '-o', 'jsonpath={.metadata.annotations}'])).stdout || '{}') as Record<string, string>;

  beforeAll(async () => {
    cp = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')] });
    env = await TestEnv.create('prompts', {}, cp.kubeconfigPath);
    const kc = adminKubeConfig(cp.kubeconfigPath);
    system = await createNamespace('ugp-system', kc);
    other = await createNamespace('prompts-other', kc);
    const installed = await run(
      cp.binaries.helm,
      [
        '--kubeconfig',
        cp.kubeconfigPath,
        'install',
        RELEASE,
        CHART_DIR,
        '--namespace',
        system,
        '--set',
        `watchNamespaces={${env.namespace},${other}}`,
        '--set',
        `connection.url=${env.sim.url},connection.apiKey.value=${env.apiKey}`,
        '--set',
        'mountedTokenRefresh.enabled=true',
      ],
      { timeoutMs: 120_000 },
    );
    expect(installed.code, installed.stderr).toBe(0);
    sa = await serviceAccountKubeconfig(cp, system, SA);
    // The tenant: a namespace editor's rights, Pods included (it runs its own workloads).
    tenant = await tenantIdentity(env.namespace, kc);
    const podRole = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'tenant-pods', namespace: env.namespace },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] }],
    };
    expect((await admin(['apply', '-f', '-'], JSON.stringify(podRole))).code).toBe(0);
    expect(
      (await admin(['create', 'rolebinding', 'tenant-pods', '-n', env.namespace, '--role=tenant-pods', `--serviceaccount=${env.namespace}:tenant`])).code,
    ).toBe(0);
    // Pods need no node here: the apiserver keeps them Pending, which is all a metadata write needs.
    expect((await admin(['apply', '-f', '-'], pod('consenting', env.namespace, { [`refresh.usergroup.dev/acme`]: 'true' }))).code).toBe(0);
    expect((await admin(['apply', '-f', '-'], pod('bystander', env.namespace, { app: 'bystander' }))).code).toBe(0);
    expect((await admin(['apply', '-f', '-'], pod('for-another-group', env.namespace, { [`refresh.usergroup.dev/initech`]: 'true' }))).code).toBe(0);
    expect((await admin(['apply', '-f', '-'], pod('elsewhere', other, { [`refresh.usergroup.dev/acme`]: 'true' }))).code).toBe(0);
    controller = spawnController({
      kubeconfigPath: sa.path,
      namespace: `${env.namespace},${other}`,
      defaultService: SA,
      args: ['--leader-elect', '--leader-election-namespace', system, '--leader-election-id', SA, '--mounted-token-refreshes-per-minute', '600'],
    });
    await waitLog(controller, 'workers started', msgIs('workers started'));
  }, 180_000);

  afterAll(async () => {
    if (process.env['DEBUG_PP'])
      console.log((controller?.output ?? []).slice(-60).join('\n'), JSON.stringify((await env.getUserGroup('acme')).status, null, 1));
    if (controller) await signalAndWait(controller, 'SIGTERM');
    await killAllControllers();
    await ifAssigned(env)?.close();
    await ifAssigned(cp)?.stop();
  });

  it("the tenant's rotation prompts its consenting Pod once, and no other; one POST, and no call for the prompt", async () => {
    await createUserGroupAs(tenant, 'acme', { userGroupId: 'acme', name: 'Acme' });
    await env.waitForReady('acme');
    // First sync: the Pods start with this token, nothing to prompt.
    expect(await annotationsOf('consenting')).not.toHaveProperty(MARK);
    const before = env.calls();
    await annotateUserGroupAs(tenant, 'acme', { 'usergroup.dev/rotate-requested-at': 'prompt-1' });
    const ug = await eventually('rotation handled and the Pods prompted', async () => {
      const view = await env.getUserGroup('acme');
      return view.status?.rotation?.lastHandledRequest === 'prompt-1' && view.status.podPrompts?.pods === 1 ? view : undefined;
    });
    const issued = ug.status?.podPrompts?.tokenIssuedTime;
    expect(issued).toBe(ug.status?.rotation?.tokenIssuedTime);
    expect((await annotationsOf('consenting'))[MARK]).toBe(issued);
    for (const name of ['bystander', 'for-another-group']) expect(await annotationsOf(name), name).not.toHaveProperty(MARK);
    expect(await annotationsOf('elsewhere', other)).not.toHaveProperty(MARK);
    expect(env.calls().rotate.ok - before.rotate.ok).toBe(1);
    expect((await env.eventsFor('acme')).map((e) => e.reason)).toContain('PodsPrompted');
    // The owner's other annotation is left as it was.
    expect((await annotationsOf('consenting'))['example.com/owner']).toBe('team-a');
  });

  it("as the operator's ServiceAccount: the prompt annotation is allowed; a Pod's image, labels, owners, finalizers, another annotation, its subresources, creating or deleting one are refused", async () => {
    // PATCH requests as the controller sends them (kubectl patch would GET the Pod first, which RBAC refuses).
    const core = adminKubeConfig(sa.path).makeApiClient(CoreV1Api);
    const patch = (body: object, strategy: PatchStrategy = PatchStrategy.MergePatch): Promise<{ code: number; body: string }> =>
      core.patchNamespacedPod({ namespace: env.namespace, name: 'bystander', body }, setHeaderOptions('Content-Type', strategy)).then(
        () => ({ code: 200, body: '' }),
        (err: unknown) => (err instanceof ApiException ? { code: err.code, body: String(err.body) } : { code: 0, body: String(err) }),
      );
    expect(await patch({ metadata: { annotations: { 'refreshed.usergroup.dev/anything': 'x' } } })).toEqual({ code: 200, body: '' });
    // The one change of a running Pod's spec the apiserver itself allows (a strategic merge keeps the rest of the container).
    const image = await patch({ spec: { containers: [{ name: 'app', image: 'registry.invalid/evil:1' }] } }, PatchStrategy.StrategicMergePatch);
    expect(image.code, 'an image change should be refused').toBe(403);
    expect(image.body).toMatch(GUARD);
    const refused: Record<string, object> = {
      label: { metadata: { labels: { app: 'hijacked' } } },
      'a new label': { metadata: { labels: { 'refresh.usergroup.dev/acme': 'true' } } },
      'an owner reference': {
        metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: '00000000-0000-0000-0000-000000000001' }] },
      },
      'a finalizer': { metadata: { finalizers: ['example.com/hold'] } },
      'another annotation': { metadata: { annotations: { 'example.com/evil': 'x' } } },
      "the owner's annotation changed": { metadata: { annotations: { 'example.com/owner': 'mallory' } } },
      "the owner's annotation removed": { metadata: { annotations: { 'example.com/owner': null } } },
    };
    for (const [what, body] of Object.entries(refused)) {
      const res = await patch(body);
      expect(res.code, `${what} should be refused`).toBe(403);
      expect(res.body, what).toMatch(GUARD);
    }
    // Not granted at all (RBAC): reading one Pod, its spec and environment; deleting, creating, the status and exec.
    for (const args of [
      ['get', 'pod', 'bystander', '-n', env.namespace],
      ['delete', 'pod', 'bystander', '-n', env.namespace],
      ['patch', 'pod', 'bystander', '-n', env.namespace, '--subresource=status', '--type=merge', '-p', '{"status":{"phase":"Failed"}}'],
      ['get', 'pods', '-n', system],
    ]) {
      const res = await sa.as(args);
      expect(res.code, `kubectl ${args.join(' ')}`).not.toBe(0);
      expect(res.stderr, `kubectl ${args.join(' ')}`).toMatch(/forbidden/i);
    }
    expect((await sa.as(['auth', 'can-i', 'create', 'pods', '-n', env.namespace])).stdout.trim()).toBe('no');
    expect((await sa.as(['auth', 'can-i', 'create', 'pods/exec', '-n', env.namespace])).stdout.trim()).toBe('no');
    // What the guard kept: the Pod as its owner left it.
    const bystander = JSON.parse((await admin(['get', 'pod', 'bystander', '-n', env.namespace, '-o', 'json'])).stdout) as {
      metadata: { labels: Record<string, string>; annotations: Record<string, string>; finalizers?: string[]; ownerReferences?: unknown[] };
      spec: { containers: { image: string }[] };
    };
    expect(bystander.metadata.labels).toEqual({ app: 'bystander' });
    expect(bystander.metadata.annotations).toEqual({
      'example.com/owner': 'team-a',
      'kubectl.kubernetes.io/last-applied-configuration': expect.any(String) as unknown,
      'refreshed.usergroup.dev/anything': 'x',
    });
    expect(bystander.metadata.finalizers).toBeUndefined();
    expect(bystander.metadata.ownerReferences).toBeUndefined();
    expect(bystander.spec.containers.map((c) => c.image)).toEqual(['registry.invalid/app:1']);
  });

  it('what a tenant writes prompts no Pod that did not consent: its UserGroup aimed at a bystander, a UserGroup of another name, a namespace it does not own', async () => {
    const before = env.calls();
    const marks = async (): Promise<Record<string, string | undefined>> => ({
      bystander: (await annotationsOf('bystander'))[MARK],
      'for-another-group': (await annotationsOf('for-another-group'))[MARK],
      elsewhere: (await annotationsOf('elsewhere', other))[MARK],
    });
    const unchanged = await marks();
    // Its UserGroup's labels and annotations name the consent label; a second UserGroup's Secret is the one the
    // bystander would mount; neither makes a Pod consent.
    await annotateUserGroupAs(tenant, 'acme', { 'refresh.usergroup.dev/bystander': 'true' }, { 'refresh.usergroup.dev/acme': 'true' });
    await createUserGroupAs(tenant, 'bystander', { userGroupId: 'bystander', name: 'Bystander' });
    await env.waitForReady('bystander');
    await annotateUserGroupAs(tenant, 'bystander', { 'usergroup.dev/rotate-requested-at': 'prompt-2' });
    await eventually('bystander rotated', async () =>
      (await env.getUserGroup('bystander')).status?.rotation?.lastHandledRequest === 'prompt-2' ? true : undefined,
    );
    // A tenant cannot write UserGroups in a namespace it does not own; and its own Pods' labels are its own consent.
    const elsewhere = await tenant.custom
      .createNamespacedCustomObject({
        group: 'usergroup.dev',
        version: 'v1',
        namespace: other,
        plural: 'usergroups',
        body: { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', metadata: { name: 'acme' }, spec: { userGroupId: 'acme-2', name: 'Acme' } },
      })
      .then(
        () => 'created',
        (err: unknown) => String((err as { code?: number }).code),
      );
    expect(elsewhere).toBe('403');
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await marks()).toEqual(unchanged);
    const after = env.calls();
    expect(after.rotate.ok - before.rotate.ok).toBe(1);
    const bystanderGroup = await env.getUserGroup('bystander');
    expect(bystanderGroup.status?.podPrompts).toEqual({ tokenIssuedTime: bystanderGroup.status?.rotation?.tokenIssuedTime });
  });
});
