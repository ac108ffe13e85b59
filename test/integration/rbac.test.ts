import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { ControlPlane, freePorts } from '../../devtools/controlplane/controlplane.js';
import { killAllControllers, msgIs, signalAndWait, spawnController, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { httpGet, type HttpAnswer } from '../../devtools/http-get.js';
import { adminKubeConfig, createNamespace, eventually, run, type CommandResult } from '../support/kube.js';
import { CHART_DIR } from '../../devtools/manifests.js';
import { TestEnv } from '../support/operator.js';
import { serviceAccountKubeconfig as serviceAccountAccess, type ServiceAccountAccess } from '../support/service-account.js';
import { ifAssigned } from '../support/teardown.js';

const ROTATE_ON_DELETE = 'usergroup.dev/rotate-on-delete';

/** GET /metrics on loopback, with a bearer token or none. */
const scrape = (port: number, token: string | undefined): Promise<HttpAnswer> =>
  httpGet(port, '/metrics', { authorization: token === undefined ? undefined : `Bearer ${token}` });

/** Tokens are compared by hash, so a failing assertion never prints one. */
const sha256 = (value: string | undefined): string =>
  createHash('sha256')
    .update(value ?? '')
    .digest('hex');

// A private control plane: the cluster-wide install's controller must not touch other test files' objects.
describe("RBAC: the chart's ServiceAccount token is enough, and no more", () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    cp = await ControlPlane.start({ crds: [path.join(repoRoot, 'crds')] });
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(cp)?.stop();
  });

  const admin = (args: readonly string[], input?: string): Promise<CommandResult> =>
    run(cp.binaries.kubectl, ['--kubeconfig', cp.kubeconfigPath, ...args], input === undefined ? {} : { input });
  const helm = (args: readonly string[]): Promise<CommandResult> => run(cp.binaries.helm, ['--kubeconfig', cp.kubeconfigPath, ...args], { timeoutMs: 120_000 });

  /** A kubeconfig holding nothing but a token for the ServiceAccount, issued through the TokenRequest API. */
  const serviceAccountKubeconfig = (namespace: string, serviceAccount: string): Promise<ServiceAccountAccess> =>
    serviceAccountAccess(cp, namespace, serviceAccount);

  async function expectForbidden(
    as: (args: readonly string[], input?: string) => Promise<CommandResult>,
    args: readonly string[],
    input?: string,
  ): Promise<void> {
    const res = await as(args, input);
    expect(res.code, `kubectl ${args.join(' ')} should be refused`).not.toBe(0);
    expect(res.stderr, `kubectl ${args.join(' ')}`).toMatch(/forbidden/i);
  }

  /**
   * /metrics of a controller running with nothing but the chart's ServiceAccount token (--metrics-auth, the default):
   * the chart lets it review scrapers' tokens, and its ClusterRole <release>-metrics-reader is all a scraper needs.
   */
  async function expectMetricsGuarded(namespace: string, readerRole: string, port: number): Promise<void> {
    for (const sa of ['prometheus', 'stranger']) expect((await admin(['create', 'serviceaccount', sa, '-n', namespace])).code).toBe(0);
    const bound = await admin([
      'create',
      'clusterrolebinding',
      `${readerRole}-prometheus`,
      `--clusterrole=${readerRole}`,
      `--serviceaccount=${namespace}:prometheus`,
    ]);
    expect(bound.code, bound.stderr).toBe(0);
    const token = async (sa: string): Promise<string> => (await admin(['create', 'token', sa, '-n', namespace])).stdout.trim();
    try {
      const allowed = await scrape(port, await token('prometheus'));
      expect(allowed.status).toBe(200);
      expect(allowed.body).toMatch(/^usergroup_leader 1$/m);
      const refused = await scrape(port, await token('stranger'));
      expect(refused.status).toBe(403);
      expect(refused.body).toContain(`system:serviceaccount:${namespace}:stranger`);
      expect((await scrape(port, undefined)).status).toBe(401);
    } finally {
      await admin(['delete', 'clusterrolebinding', `${readerRole}-prometheus`]);
    }
  }

  /** Namespaces an earlier test deleted: writing there is refused (403) while they terminate, whatever RBAC says. */
  const terminating: string[] = [];
  const noAuthorizationTrouble = (c: ControllerProcess): string[] =>
    c.output.filter((line) => /forbidden|\b403\b/i.test(line) && !terminating.some((ns) => line.includes(`/namespaces/${ns}/`)));

  it('namespaced install (watchNamespaces): reconciles and rotates end to end with only that token; everything else is denied', async () => {
    const env = await TestEnv.create('team-a', {}, cp.kubeconfigPath);
    const kc = adminKubeConfig(cp.kubeconfigPath);
    const system = await createNamespace('ugo-system', kc);
    const other = await createNamespace('team-b', kc);
    let c: ControllerProcess | undefined;
    try {
      // A single-team install as the README gives it: the service, its key, and the team's namespace.
      const installed = await helm([
        'install',
        'ugo',
        CHART_DIR,
        '--namespace',
        system,
        '--set',
        `watchNamespaces={${env.namespace}}`,
        '--set',
        `connection.url=${env.sim.url}`,
        '--set',
        `connection.apiKey.value=${env.apiKey}`,
      ]);
      expect(installed.code, installed.stderr).toBe(0);
      const sa = await serviceAccountKubeconfig(system, 'ugo-usergroup-operator');
      const granted = await sa.as(['auth', 'can-i', '--list', '-n', env.namespace]);
      console.log(`[rbac] what the chart's ServiceAccount may do in ${env.namespace}:\n${granted.stdout}`);

      // The controller as the Deployment runs it: leader election in the release namespace, the watched namespace only.
      // The chart's own ClusterUserGroupService is the default: its API key is read from the release namespace.
      const [metricsPort = 0] = await freePorts(1);
      c = spawnController({
        kubeconfigPath: sa.path,
        namespace: env.namespace,
        defaultService: 'ugo-usergroup-operator',
        args: [
          '--leader-elect',
          '--leader-election-namespace',
          system,
          '--leader-election-id',
          'ugo-usergroup-operator',
          '--metrics-addr',
          `127.0.0.1:${metricsPort}`,
        ],
      });
      await waitLog(c, 'workers started', msgIs('workers started'));
      await env.createUserGroup('acme', { userGroupId: 'acme', name: 'Acme', tokenSecret: { name: 'acme-token' } });
      await env.waitForReady('acme');
      const token = await env.secretToken('acme-token');
      expect(sha256(token)).toBe(env.simGroup('acme')?.tokenSha256);
      await env.requestRotation('acme', 'rbac-1');
      await eventually('rotation handled', async () => ((await env.getUserGroup('acme')).status?.rotation?.lastHandledRequest === 'rbac-1' ? true : undefined));
      expect(sha256(await env.secretToken('acme-token'))).toBe(env.simGroup('acme')?.tokenSha256);
      expect(sha256(await env.secretToken('acme-token'))).not.toBe(sha256(token));
      expect(env.calls().rotate.ok).toBe(1);
      expect((await env.eventsFor('acme')).map((e) => e.reason)).toEqual(expect.arrayContaining(['Synced', 'TokenRotated']));

      // A UserGroupService in the same namespace: its API-key Secret is read with the same token.
      // Of the type a UserGroupService may use (docs/tenancy.md); the simulator is plain http on loopback.
      await admin(['create', 'secret', 'generic', 'team-key', '-n', env.namespace, '--type=usergroup.dev/api-key', `--from-literal=apiKey=${env.apiKey}`]);
      const service = {
        apiVersion: 'usergroup.dev/v1',
        kind: 'UserGroupService',
        metadata: { name: 'own', namespace: env.namespace },
        spec: { url: env.sim.url, allowInsecure: true, apiKeySecretRef: { name: 'team-key', key: 'apiKey' } },
      };
      expect((await admin(['apply', '-f', '-'], JSON.stringify(service))).code).toBe(0);
      await env.createUserGroup('initech', { userGroupId: 'initech', name: 'Initech', serviceRef: { name: 'own' } });
      await env.waitForReady('initech');

      const lease = await admin(['get', 'lease', 'ugo-usergroup-operator', '-n', system, '-o', 'jsonpath={.spec.holderIdentity}']);
      expect(lease.stdout).toBe(c.identity());
      await expectMetricsGuarded(system, 'ugo-usergroup-operator-metrics-reader', metricsPort);
      expect(noAuthorizationTrouble(c)).toEqual([]);

      // The tenant rule from watchNamespaces admits nothing else: a UserGroup there gets no call. And the id was claimed.
      expect((await env.claims()).map((cl) => cl.spec.userGroupId).sort()).toEqual(['acme', 'initech']);

      // Denied: Secrets anywhere but the watched namespace; in the release namespace only reading one by name (API keys).
      await admin(['create', 'secret', 'generic', 'elsewhere', '-n', other, '--from-literal=k=v']);
      await expectForbidden(sa.as, ['get', 'secret', 'elsewhere', '-n', other]);
      await expectForbidden(sa.as, ['get', 'secrets', '-n', other]);
      await expectForbidden(sa.as, ['get', 'secrets', '-A']);
      await expectForbidden(sa.as, ['get', 'secrets', '-n', system]);
      await expectForbidden(sa.as, ['create', 'secret', 'generic', 'x', '-n', other, '--from-literal=k=v']);
      await expectForbidden(sa.as, ['create', 'secret', 'generic', 'x', '-n', system, '--from-literal=k=v']);
      // Denied: writing the shared connections or namespaces (their labels admit tenants).
      await expectForbidden(sa.as, ['patch', 'clusterusergroupservice', 'ugo-usergroup-operator', '--type=merge', '-p', '{"spec":{"tenants":[]}}']);
      await expectForbidden(sa.as, ['label', 'namespace', other, 'usergroup.dev/tenant=true']);
      // Denied: any write to a UserGroup itself (spec, labels, annotations, others' finalizers), creating or deleting
      // one. RBAC grants patch (for the rotate-on-delete finalizer); the chart's ValidatingAdmissionPolicy refuses
      // every other change the ServiceAccount would make.
      await expectForbidden(sa.as, ['patch', 'usergroup', 'acme', '-n', env.namespace, '--type=merge', '-p', '{"spec":{"name":"Hijacked"}}']);
      await expectForbidden(sa.as, [
        'patch',
        'usergroup',
        'acme',
        '-n',
        env.namespace,
        '--type=merge',
        '-p',
        '{"metadata":{"finalizers":["example.com/hold"]}}',
      ]);
      await expectForbidden(sa.as, ['annotate', 'usergroup', 'acme', '-n', env.namespace, 'usergroup.dev/rotate-requested-at=x', '--overwrite']);
      await expectForbidden(sa.as, ['label', 'usergroup', 'acme', '-n', env.namespace, 'a=b']);
      await expectForbidden(sa.as, ['delete', 'usergroup', 'acme', '-n', env.namespace]);
      await expectForbidden(sa.as, ['patch', 'usergroupservice', 'own', '-n', env.namespace, '--type=merge', '-p', '{"spec":{"allowInsecure":true}}']);
      // Denied: UserGroups outside the watched namespace, other Leases, and everything unrelated.
      await expectForbidden(sa.as, ['get', 'usergroups', '-n', other]);
      await expectForbidden(sa.as, ['get', 'usergroups', '-A']);
      await expectForbidden(sa.as, ['get', 'lease', 'someone-else', '-n', system]);
      await expectForbidden(sa.as, ['get', 'leases', '-n', system]);
      await expectForbidden(sa.as, ['get', 'pods,configmaps', '-n', env.namespace]);
      // Allowed, the one write to a UserGroup: its status (which the controller did above). kubectl patch
      // would GET the status first, which the controller never needs, so ask the authorizer instead.
      const status = await sa.as(['auth', 'can-i', 'patch', 'usergroups', '--subresource=status', '-n', env.namespace]);
      expect(status.stdout.trim()).toBe('yes');
      expect((await sa.as(['auth', 'can-i', 'update', 'usergroups', '--subresource=status', '-n', env.namespace])).stdout.trim()).toBe('no');
      // Workloads: nothing until rolloutRestart.enabled (the default is off).
      await expectForbidden(sa.as, ['get', 'deployments', '-n', env.namespace]);
      expect((await sa.as(['auth', 'can-i', 'patch', 'deployments', '-n', env.namespace])).stdout.trim()).toBe('no');

      // rolloutRestart.enabled: get and patch on the three workload kinds, in the watched namespace only, and
      // enough for the controller to restart a consenting Deployment after a rotation.
      const upgraded = await helm(['upgrade', 'ugo', CHART_DIR, '--namespace', system, '--reuse-values', '--set', 'rolloutRestart.enabled=true']);
      expect(upgraded.code, upgraded.stderr).toBe(0);
      for (const kind of ['deployments', 'statefulsets', 'daemonsets']) {
        for (const verb of ['get', 'patch']) expect((await sa.as(['auth', 'can-i', verb, `${kind}.apps`, '-n', env.namespace])).stdout.trim()).toBe('yes');
        for (const verb of ['update', 'delete', 'create', 'list'])
          expect((await sa.as(['auth', 'can-i', verb, `${kind}.apps`, '-n', env.namespace])).stdout.trim()).toBe('no');
        expect((await sa.as(['auth', 'can-i', 'patch', `${kind}.apps`, '-n', other])).stdout.trim()).toBe('no');
      }
      await signalAndWait(c, 'SIGTERM');
      c = spawnController({
        kubeconfigPath: sa.path,
        namespace: env.namespace,
        defaultService: 'ugo-usergroup-operator',
        args: [
          '--leader-elect',
          '--leader-election-namespace',
          system,
          '--leader-election-id',
          'ugo-usergroup-operator',
          '--workload-restarts-per-minute',
          '60',
        ],
      });
      await waitLog(c, 'workers started', msgIs('workers started'));
      const deployment = {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web', namespace: env.namespace, annotations: { 'usergroup.dev/restart-on-token-change': 'acme' } },
        spec: {
          selector: { matchLabels: { app: 'web' } },
          template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'registry.invalid/web:1' }] } },
        },
      };
      expect((await admin(['apply', '-f', '-'], JSON.stringify(deployment))).code).toBe(0);
      await env.patchUserGroup('acme', { spec: { rolloutRestartTargets: [{ kind: 'Deployment', name: 'web' }] } });
      await env.waitForReady('acme');
      await env.requestRotation('acme', 'rbac-2');
      await eventually('web restarted for the new token', async () => {
        const generation = await admin(['get', 'deployment', 'web', '-n', env.namespace, '-o', 'jsonpath={.metadata.generation}']);
        return generation.stdout === '2' ? true : undefined;
      });
      expect(noAuthorizationTrouble(c)).toEqual([]);
    } finally {
      if (c) await signalAndWait(c, 'SIGTERM');
      await helm(['uninstall', 'ugo', '--namespace', system]);
      await env.close();
      terminating.push(env.namespace, other);
    }
  });

  it('sharded install (sharding.enabled): two replicas share the namespaces with only that token; their Leases only in the release namespace', async () => {
    const env = await TestEnv.create('sharded', {}, cp.kubeconfigPath);
    const system = await createNamespace('ugo-sharded', adminKubeConfig(cp.kubeconfigPath));
    const replicas: ControllerProcess[] = [];
    try {
      const installed = await helm(['install', 'ugs', CHART_DIR, '--namespace', system, '--set', 'sharding.enabled=true', '--set', 'replicaCount=2']);
      expect(installed.code, installed.stderr).toBe(0);
      const sa = await serviceAccountKubeconfig(system, 'ugs-usergroup-operator');
      for (let i = 0; i < 2; i++)
        replicas.push(
          spawnController({
            kubeconfigPath: sa.path,
            namespace: env.namespace,
            defaultService: env.defaultService,
            args: ['--namespaces', '', '--shard-by-namespace', '--leader-election-namespace', system, '--leader-election-id', 'ugs-usergroup-operator'],
          }),
        );
      for (const c of replicas) await waitLog(c, 'a view of both', (e) => e.json?.['msg'] === 'shard view settled' && e.json['members'] === 2, 30_000);
      await env.createUserGroup('initech', { userGroupId: 'initech', name: 'Initech' });
      await env.waitForReady('initech');
      expect(sha256(await env.secretToken('initech'))).toBe(env.simGroup('initech')?.tokenSha256);
      for (const c of replicas) expect(noAuthorizationTrouble(c)).toEqual([]);
      await expectForbidden(sa.as, ['get', 'lease', 'kube-controller-manager', '-n', 'kube-system']);
      await expectForbidden(
        sa.as,
        ['create', '-n', env.namespace, '-f', '-'],
        JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'x' } }),
      );
      for (const c of replicas) {
        await signalAndWait(c, 'SIGTERM');
        expect((await c.exit).code).toBe(0);
      }
      const left = await admin(['get', 'leases', '-n', system, '-l', 'usergroup.dev/shard-group=ugs-usergroup-operator', '-o', 'name']);
      expect(left.stdout.trim()).toBe('');
    } finally {
      for (const c of replicas) await signalAndWait(c, 'SIGTERM');
      await helm(['uninstall', 'ugs', '--namespace', system]);
      terminating.push(env.namespace);
      await env.close();
    }
  });

  it('cluster-wide install (default values): reconciles in any namespace with only that token; writes to UserGroups and unrelated resources are denied', async () => {
    const env = await TestEnv.create('anywhere', {}, cp.kubeconfigPath);
    const system = await createNamespace('ugo-cluster', adminKubeConfig(cp.kubeconfigPath));
    let c: ControllerProcess | undefined;
    try {
      const installed = await helm(['install', 'ugc', CHART_DIR, '--namespace', system]);
      expect(installed.code, installed.stderr).toBe(0);
      const sa = await serviceAccountKubeconfig(system, 'ugc-usergroup-operator');
      const [metricsPort = 0] = await freePorts(1);
      c = spawnController({
        kubeconfigPath: sa.path,
        namespace: env.namespace,
        defaultService: env.defaultService,
        // No --namespaces: every namespace, as the chart's default.
        args: [
          '--namespaces',
          '',
          '--leader-elect',
          '--leader-election-namespace',
          system,
          '--leader-election-id',
          'ugc-usergroup-operator',
          '--metrics-addr',
          `127.0.0.1:${metricsPort}`,
        ],
      });
      await waitLog(c, 'workers started', msgIs('workers started'));
      await env.createUserGroup('globex', { userGroupId: 'globex', name: 'Globex' });
      await env.waitForReady('globex');
      expect(sha256(await env.secretToken('globex'))).toBe(env.simGroup('globex')?.tokenSha256);
      await expectMetricsGuarded(system, 'ugc-usergroup-operator-metrics-reader', metricsPort);
      expect(noAuthorizationTrouble(c)).toEqual([]);

      // Patch is granted for the rotate-on-delete finalizer (spec.deletionPolicy), and admission refuses any other
      // change; a replace is not granted.
      await expectForbidden(sa.as, ['patch', 'usergroup', 'globex', '-n', env.namespace, '--type=merge', '-p', '{"spec":{"name":"Hijacked"}}']);
      expect((await sa.as(['auth', 'can-i', 'update', 'usergroups', '-n', env.namespace])).stdout.trim()).toBe('no');
      // spec.deletionPolicy Rotate with only that token: the finalizers go on, and the deletion rotates once.
      await env.createUserGroup('initech', { userGroupId: 'initech', name: 'Initech', deletionPolicy: 'Rotate' });
      await env.waitForReady('initech');
      const held = (await env.secretToken('initech')) ?? '';
      await eventually(
        'the rotate-on-delete finalizers on the UserGroup and its Secret',
        async () => {
          const ug = (await env.getUserGroup('initech')) as { metadata: { finalizers?: string[] } };
          const secret = await env.getSecret('initech');
          return ug.metadata.finalizers?.includes(ROTATE_ON_DELETE) && secret?.metadata?.finalizers?.includes(ROTATE_ON_DELETE) ? true : undefined;
        },
        30_000,
      );
      await env.deleteUserGroup('initech');
      await eventually(
        'initech gone',
        () =>
          env.getUserGroup('initech').then(
            () => undefined,
            () => true,
          ),
        30_000,
      );
      expect(env.simGroup('initech')?.tokenSha256).not.toBe(sha256(held));
      expect(noAuthorizationTrouble(c)).toEqual([]);
      await expectForbidden(
        sa.as,
        ['create', '-n', env.namespace, '-f', '-'],
        JSON.stringify({
          apiVersion: 'usergroup.dev/v1',
          kind: 'UserGroup',
          metadata: { name: 'planted' },
          spec: { userGroupId: 'planted', name: 'Planted' },
        }),
      );
      await expectForbidden(sa.as, ['delete', 'usergroup', 'globex', '-n', env.namespace]);
      await expectForbidden(sa.as, ['get', 'pods,configmaps,serviceaccounts', '-A']);
      await expectForbidden(sa.as, ['get', 'lease', 'kube-controller-manager', '-n', 'kube-system']);
      await expectForbidden(sa.as, [
        'create',
        'clusterrolebinding',
        'escalate',
        '--clusterrole=cluster-admin',
        `--serviceaccount=${system}:ugc-usergroup-operator`,
      ]);
    } finally {
      if (c) await signalAndWait(c, 'SIGTERM');
      await helm(['uninstall', 'ugc', '--namespace', system]);
      await env.close();
    }
  });
});
