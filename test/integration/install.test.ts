import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { createNamespace, deleteNamespace, eventually, kubectl, run, type CommandResult } from '../support/kube.js';
import { CHART_DIR, MANIFESTS_DIR, renderManifests } from '../../devtools/manifests.js';

/** The real helm (built with the control plane), against the shared test cluster. */
function helm(args: readonly string[]): Promise<CommandResult> {
  return run(path.join(inject('binDir'), 'helm'), ['--kubeconfig', inject('kubeconfig'), ...args], { timeoutMs: 120_000 });
}

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

async function template(...sets: string[]): Promise<K8sObject[]> {
  const res = await helm(['template', 'ugo', CHART_DIR, '--namespace', 'ugo-system', ...sets.flatMap((s) => ['--set', s])]);
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

const only = (objects: K8sObject[], kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);
function one(objects: K8sObject[], kind: string): K8sObject {
  const found = only(objects, kind);
  expect(found, kind).toHaveLength(1);
  return found[0]!;
}

interface PodSpec {
  automountServiceAccountToken?: boolean;
  securityContext?: { runAsNonRoot?: boolean; seccompProfile?: { type: string } };
  containers: {
    args: string[];
    env: { name: string; value?: string }[];
    securityContext: { allowPrivilegeEscalation: boolean; readOnlyRootFilesystem: boolean; runAsNonRoot: boolean; capabilities: { drop: string[] } };
    livenessProbe: { httpGet: { path: string } };
    readinessProbe: { httpGet: { path: string } };
    volumeMounts: { name: string; mountPath: string }[];
  }[];
  volumes: { name: string; projected?: { sources: { serviceAccountToken?: { expirationSeconds: number } }[] }; secret?: { secretName: string } }[];
}
interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

const deploymentOf = (objects: K8sObject[]): { replicas: number; pod: PodSpec } => {
  const spec = one(objects, 'Deployment')['spec'] as { replicas: number; template: { spec: PodSpec } };
  return { replicas: spec.replicas, pod: spec.template.spec };
};
const envOf = (pod: PodSpec): Map<string, string | undefined> => new Map(pod.containers[0]?.env.map((e) => [e.name, e.value]));

describe('Helm chart', () => {
  it('passes helm lint --strict with default and typical values', async () => {
    for (const sets of [
      [],
      ['connection.url=https://analytics.example.com', 'connection.apiKey.existingSecret=key', 'watchNamespaces={a,b}'],
      ['metrics.serviceMonitor.enabled=true', 'replicaCount=1'],
      ['metrics.prometheusRule.enabled=true', 'metrics.dashboard.enabled=true', 'metrics.dashboard.namespace=monitoring'],
      ['networkPolicy.enabled=true', 'metrics.auth=false', 'namespacedServices.allowedHosts={analytics.example.com}'],
      ['sharding.enabled=true', 'replicaCount=4', 'leaderElection.enabled=false'],
      ['mountedTokenRefresh.enabled=true', 'rolloutRestart.enabled=true', 'watchNamespaces={a}'],
    ]) {
      const res = await helm(['lint', CHART_DIR, '--strict', ...sets.flatMap((s) => ['--set', s])]);
      expect(res.stdout + res.stderr, sets.join(' ')).not.toMatch(/\[(ERROR|WARNING)\]/);
      expect(res.code, res.stdout + res.stderr).toBe(0);
    }
  });

  it('renders a restricted, least-privilege Deployment with leader election by default', async () => {
    const objects = await template();
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'ClusterRole',
      'ClusterRole',
      'ClusterRole',
      'ClusterRole',
      'ClusterRole',
      'ClusterRoleBinding',
      'ClusterRoleBinding',
      'Deployment',
      'PodDisruptionBudget',
      'Role',
      'RoleBinding',
      'Service',
      'ServiceAccount',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
      'ValidatingAdmissionPolicyBinding',
    ]);
    // The controller's patch on UserGroups may change only the rotate-on-delete finalizer (rbac.test.ts tries it).
    const policy = only(objects, 'ValidatingAdmissionPolicy')[0] as { spec: { matchConditions: { expression: string }[] } } | undefined;
    expect(policy?.spec.matchConditions[0]?.expression).toBe("request.userInfo.username == 'system:serviceaccount:ugo-system:ugo-usergroup-operator'");
    const { replicas, pod } = deploymentOf(objects);
    expect(replicas).toBe(2);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(one(objects, 'ServiceAccount')['automountServiceAccountToken']).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    const container = pod.containers[0];
    expect(container?.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container?.livenessProbe.httpGet.path).toBe('/healthz');
    expect(container?.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container?.args).toEqual(['run']);
    // The only token in the pod: the projected, expiring one, mounted where in-cluster config looks.
    const token = pod.volumes.find((v) => v.name === 'kube-api-access');
    expect(token?.projected?.sources.find((s) => s.serviceAccountToken)?.serviceAccountToken?.expirationSeconds).toBe(3600);
    const shortToken = deploymentOf(await template('serviceAccount.tokenExpirationSeconds=600')).pod.volumes.find((v) => v.name === 'kube-api-access');
    expect(shortToken?.projected?.sources.find((s) => s.serviceAccountToken)?.serviceAccountToken?.expirationSeconds).toBe(600);
    expect(container?.volumeMounts.map((m) => m.mountPath)).toEqual(['/var/run/secrets/kubernetes.io/serviceaccount']);
    const env = envOf(pod);
    expect(env.get('USERGROUP_LEADER_ELECT')).toBe('true');
    expect(env.get('USERGROUP_NAMESPACES')).toBe('');
    expect(env.has('USERGROUP_DEFAULT_SERVICE')).toBe(false);
    // /metrics behind TokenReview + SubjectAccessReview; tenants may not define their own connections.
    expect(env.get('USERGROUP_METRICS_AUTH')).toBe('true');
    expect(env.get('USERGROUP_ALLOWED_SERVICE_HOSTS')).toBe('');
    expect(env.get('USERGROUP_ALLOW_HTTP_SERVICES')).toBe('false');
    expect(only(objects, 'NetworkPolicy')).toEqual([]);
    expect(only(objects, 'ClusterUserGroupService')).toEqual([]);
    expect(one(objects, 'PodDisruptionBudget')['spec']).toMatchObject({ maxUnavailable: 1 });
  });

  it("sizes the controller's V8 heap from its memory limit: heapPercent (75 %) of it, in any unit Kubernetes users write", async () => {
    const heap = async (...sets: string[]): Promise<string | undefined> => envOf(deploymentOf(await template(...sets)).pod).get('NODE_OPTIONS');
    const defaults = deploymentOf(await template()).pod.containers[0] as unknown as { resources: unknown };
    expect(defaults.resources).toEqual({ requests: { cpu: '50m', memory: '192Mi' }, limits: { memory: '320Mi' } });
    expect(await heap()).toBe('--max-old-space-size=240');
    expect(await heap('resources.limits.memory=1Gi')).toBe('--max-old-space-size=768');
    expect(await heap('resources.limits.memory=1.5Gi', 'heapPercent=50')).toBe('--max-old-space-size=768');
    expect(await heap('resources.limits.memory=800M')).toBe('--max-old-space-size=572');
    expect(await heap('resources.limits.memory=300000000')).toBe('--max-old-space-size=214');
    // Off, or no limit to size it from: Node's own default.
    expect(await heap('heapPercent=0')).toBeUndefined();
    expect(await heap('resources.limits=null')).toBeUndefined();
    const refused = await helm(['template', 'ugo', CHART_DIR, '--set', 'resources.limits.memory=2Ti']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('resources.limits.memory "2Ti": give it in Mi, Gi, M, G or bytes');
  });

  it('grants the controller no wildcard and no write to UserGroups but a patch (of their finalizers)', async () => {
    const objects = await template();
    const controllerRoles = (kind: string): K8sObject[] => only(objects, kind).filter((r) => !/-(edit|view|metrics-reader)$/.test(r.metadata.name));
    const rules = [...controllerRoles('ClusterRole'), ...controllerRoles('Role')].flatMap((r) => r['rules'] as Rule[]);
    for (const rule of rules) {
      expect([...rule.apiGroups, ...rule.resources, ...rule.verbs]).not.toContain('*');
      if (rule.resources.some((r) => ['usergroups', 'usergroupservices', 'clusterusergroupservices', 'namespaces'].includes(r)))
        expect(rule.verbs).toEqual(
          rule.resources.length === 1 && rule.resources[0] === 'usergroups' && rule.verbs.length === 1 ? ['patch'] : ['get', 'list', 'watch'],
        );
    }
    // spec.deletionPolicy Rotate: the finalizer on UserGroups (patch only: no update, create or delete) and on token Secrets.
    expect(rules.filter((r) => r.resources.includes('usergroups')).map((r) => r.verbs)).toEqual([['get', 'list', 'watch'], ['patch']]);
    expect(rules.find((r) => r.resources.includes('secrets') && r.verbs.includes('create'))?.verbs).toEqual([
      'get',
      'list',
      'watch',
      'create',
      'update',
      'patch',
      'delete',
    ]);
    expect(rules.find((r) => r.resources.includes('usergroups/status'))?.verbs).toEqual(['patch']);
    expect(rules.find((r) => r.resources.includes('usergroupclaims'))?.verbs).toEqual(['get', 'list', 'watch', 'create', 'update', 'delete']);
    // For /metrics (metrics.auth): reviewing scrapers' tokens, nothing more.
    expect(rules.filter((r) => r.apiGroups.some((g) => g.startsWith('authentication.') || g.startsWith('authorization.')))).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]);
    const leaseRules = (only(objects, 'Role')[0]?.['rules'] ?? []) as Rule[];
    expect(leaseRules).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['ugo-usergroup-operator'], verbs: ['get', 'update'] },
    ]);
  });

  it('gives tenants, through the aggregated admin/edit/view roles, UserGroups and UserGroupServices only: never their status, the shared connections or the claims', async () => {
    const objects = await template();
    const edit = only(objects, 'ClusterRole').find((r) => r.metadata.name === 'ugo-usergroup-operator-edit');
    const view = only(objects, 'ClusterRole').find((r) => r.metadata.name === 'ugo-usergroup-operator-view');
    expect(edit?.metadata.labels).toMatchObject({
      'rbac.authorization.k8s.io/aggregate-to-edit': 'true',
      'rbac.authorization.k8s.io/aggregate-to-admin': 'true',
    });
    expect(view?.metadata.labels).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-view': 'true' });
    for (const role of [edit, view]) for (const rule of role?.['rules'] as Rule[]) expect(rule.resources).toEqual(['usergroups', 'usergroupservices']);
  });

  it('with watchNamespaces: a Role per namespace; cluster-wide only the connections, claims, namespace labels and reviews of /metrics callers', async () => {
    const objects = await template('watchNamespaces={team-a,team-b}');
    const clusterRoles = only(objects, 'ClusterRole')
      .map((r) => r.metadata.name)
      .sort();
    expect(clusterRoles).toEqual([
      'ugo-usergroup-operator-cluster',
      'ugo-usergroup-operator-edit',
      'ugo-usergroup-operator-metrics-reader',
      'ugo-usergroup-operator-view',
    ]);
    const cluster = only(objects, 'ClusterRole').find((r) => r.metadata.name === 'ugo-usergroup-operator-cluster');
    expect((cluster?.['rules'] as Rule[]).flatMap((r) => r.resources).sort()).toEqual([
      'clusterusergroupservices',
      'namespaces',
      'subjectaccessreviews',
      'tokenreviews',
      'usergroupclaims',
    ]);
    expect(only(objects, 'ClusterRoleBinding').map((b) => b.metadata.name)).toEqual(['ugo-usergroup-operator-cluster']);
    const roles = only(objects, 'Role')
      .map((r) => `${r.metadata.namespace}/${r.metadata.name}`)
      .sort();
    expect(roles).toEqual([
      'team-a/ugo-usergroup-operator',
      'team-b/ugo-usergroup-operator',
      'ugo-system/ugo-usergroup-operator-api-keys',
      'ugo-system/ugo-usergroup-operator-leader-election',
    ]);
    const apiKeys = only(objects, 'Role').find((r) => r.metadata.name === 'ugo-usergroup-operator-api-keys');
    expect(apiKeys?.['rules']).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }]);
    expect(only(objects, 'RoleBinding')).toHaveLength(4);
    expect(envOf(deploymentOf(objects).pod).get('USERGROUP_NAMESPACES')).toBe('team-a,team-b');
  });

  it('mountedTokenRefresh: off, no access to Pods and no guard; on, list and patch on Pods (in watchNamespaces only) and the admission policy that narrows the patch', async () => {
    const podRules = (objects: K8sObject[]): { where: string; verbs: string[] }[] =>
      [...only(objects, 'ClusterRole'), ...only(objects, 'Role')].flatMap((r) =>
        (r['rules'] as Rule[])
          .filter((rule) => (rule.resources as string[] | undefined)?.some((x) => x.startsWith('pods')) === true)
          .map((rule) => ({ where: r.metadata.namespace ?? 'cluster', verbs: rule.verbs })),
      );
    const off = await template('watchNamespaces={team-a}');
    expect(podRules(off)).toEqual([]);
    expect(only(off, 'ValidatingAdmissionPolicy').map((p) => p.metadata.name)).not.toContain('ugo-usergroup-operator-pod-prompt-guard');
    expect(envOf(deploymentOf(off).pod).get('USERGROUP_MOUNTED_TOKEN_REFRESHES_PER_MINUTE')).toBe('0');
    const on = await template('watchNamespaces={team-a}', 'mountedTokenRefresh.enabled=true', 'mountedTokenRefresh.perMinute=120');
    expect(podRules(on)).toEqual([{ where: 'team-a', verbs: ['list', 'patch'] }]);
    const guard = only(on, 'ValidatingAdmissionPolicy').find((p) => p.metadata.name === 'ugo-usergroup-operator-pod-prompt-guard');
    expect(guard?.['spec']).toMatchObject({
      failurePolicy: 'Fail',
      matchConditions: [{ name: 'the-controller', expression: "request.userInfo.username == 'system:serviceaccount:ugo-system:ugo-usergroup-operator'" }],
    });
    expect(only(on, 'ValidatingAdmissionPolicyBinding').find((b) => b.metadata.name === 'ugo-usergroup-operator-pod-prompt-guard')?.['spec']).toEqual({
      policyName: 'ugo-usergroup-operator-pod-prompt-guard',
      validationActions: ['Deny'],
    });
    expect(envOf(deploymentOf(on).pod).get('USERGROUP_MOUNTED_TOKEN_REFRESHES_PER_MINUTE')).toBe('120');
    const cluster = await template('mountedTokenRefresh.enabled=true');
    expect(podRules(cluster)).toEqual([{ where: 'cluster', verbs: ['list', 'patch'] }]);
  });

  it("with a connection: a ClusterUserGroupService named after the release as the default, its API key read from the chart's Secret or yours, deny by default", async () => {
    const created = await template('connection.url=https://analytics.example.com', 'connection.apiKey.value=not-a-real-key');
    const secret = one(created, 'Secret');
    expect(secret.metadata.name).toBe('ugo-usergroup-operator-api-key');
    expect(secret['data']).toEqual({ apiKey: Buffer.from('not-a-real-key').toString('base64') });
    const { pod } = deploymentOf(created);
    expect(envOf(pod).get('USERGROUP_DEFAULT_SERVICE')).toBe('ugo-usergroup-operator');
    expect(pod.volumes.map((v) => v.name)).toEqual(['kube-api-access']);
    const service = one(created, 'ClusterUserGroupService');
    expect(service.metadata.name).toBe('ugo-usergroup-operator');
    expect(service['spec']).toEqual({
      url: 'https://analytics.example.com',
      allowInsecure: false,
      apiKeySecretRef: { namespace: 'ugo-system', name: 'ugo-usergroup-operator-api-key', key: 'apiKey' },
      tenants: [],
    });
    // The key never reaches the pod spec or the connection object.
    expect(JSON.stringify([one(created, 'Deployment'), service])).not.toContain('not-a-real-key');

    const existing = await template('connection.url=https://analytics.example.com', 'connection.apiKey.existingSecret=mine', 'connection.apiKey.key=k');
    expect(only(existing, 'Secret')).toEqual([]);
    expect(one(existing, 'ClusterUserGroupService')['spec']).toMatchObject({ apiKeySecretRef: { namespace: 'ugo-system', name: 'mine', key: 'k' } });
  });

  it("a single team is one value: watchNamespaces becomes the connection's only rule, for any id", async () => {
    const objects = await template('connection.url=https://analytics.example.com', 'connection.apiKey.existingSecret=key', 'watchNamespaces={customers}');
    expect(one(objects, 'ClusterUserGroupService')['spec']).toMatchObject({
      tenants: [{ namespaces: ['customers'], userGroupIds: { prefix: '' }, adoption: 'Rotate' }],
    });
  });

  it('several teams: connection.tenants verbatim, each team with its own id prefix, and the apiserver accepts it', async () => {
    const values = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-values-')), 'values.yaml');
    fs.writeFileSync(
      values,
      [
        'connection:',
        '  url: https://analytics.example.com',
        '  apiKey: {existingSecret: key}',
        '  tenants:',
        '    - namespaces: [team-a, team-b]',
        '      userGroupIds: {prefix: "{namespace}."}',
        '    - namespaceSelector: {matchLabels: {tier: gold}}',
        '      userGroupIds: {exact: ["gold-{namespace}"]}',
        '      adoption: Keep',
      ].join('\n'),
    );
    const rendered = await helm(['template', 'ugo', CHART_DIR, '--namespace', 'ugo-system', '-f', values]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const docs = parseAllDocuments(rendered.stdout).map((d) => d.toJS() as K8sObject | null);
    const service = docs.find((o) => o?.kind === 'ClusterUserGroupService');
    expect((service?.['spec'] as { tenants: unknown }).tenants).toEqual([
      { namespaces: ['team-a', 'team-b'], userGroupIds: { prefix: '{namespace}.' } },
      { namespaceSelector: { matchLabels: { tier: 'gold' } }, userGroupIds: { exact: ['gold-{namespace}'] }, adoption: 'Keep' },
    ]);
    const dryRun = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: JSON.stringify(service) });
    expect(dryRun.code, dryRun.stderr).toBe(0);
  });

  it("renders a ServiceMonitor only when asked, sending Prometheus' ServiceAccount token or one from a Secret", async () => {
    expect(only(await template(), 'ServiceMonitor')).toEqual([]);
    const monitor = one(await template('metrics.serviceMonitor.enabled=true', 'metrics.serviceMonitor.labels.release=prom'), 'ServiceMonitor');
    expect(monitor.metadata.labels?.['release']).toBe('prom');
    expect(monitor['spec']).toMatchObject({
      endpoints: [{ port: 'metrics', path: '/metrics', bearerTokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token' }],
    });
    const fromSecret = one(
      await template(
        'metrics.serviceMonitor.enabled=true',
        'metrics.serviceMonitor.authorization.credentials.name=scrape-token',
        'metrics.serviceMonitor.authorization.credentials.key=token',
      ),
      'ServiceMonitor',
    );
    const endpoint = (fromSecret['spec'] as { endpoints: Record<string, unknown>[] }).endpoints[0];
    expect(endpoint?.['authorization']).toEqual({ type: 'Bearer', credentials: { name: 'scrape-token', key: 'token' } });
    expect(endpoint?.['bearerTokenFile']).toBeUndefined();
    const open = one(await template('metrics.serviceMonitor.enabled=true', 'metrics.auth=false'), 'ServiceMonitor');
    expect(Object.keys((open['spec'] as { endpoints: Record<string, unknown>[] }).endpoints[0] ?? {}).sort()).toEqual([
      'interval',
      'path',
      'port',
      'scrapeTimeout',
    ]);
  });

  it('metrics.auth: a ClusterRole for scrapers and the reviews for the controller; off, neither', async () => {
    const objects = await template();
    const reader = only(objects, 'ClusterRole').find((r) => r.metadata.name === 'ugo-usergroup-operator-metrics-reader');
    expect(reader?.['rules']).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    // Nobody is bound to it by the chart: the cluster admin binds the scraper.
    expect(only(objects, 'ClusterRoleBinding').map((b) => (b['roleRef'] as { name: string }).name)).not.toContain('ugo-usergroup-operator-metrics-reader');

    const off = await template('metrics.auth=false');
    expect(only(off, 'ClusterRole').map((r) => r.metadata.name)).not.toContain('ugo-usergroup-operator-metrics-reader');
    const rules = only(off, 'ClusterRole').flatMap((r) => r['rules'] as Partial<Rule>[]);
    expect(rules.flatMap((r) => r.resources ?? [])).not.toContain('tokenreviews');
    expect(rules.flatMap((r) => r.resources ?? [])).not.toContain('subjectaccessreviews');
    expect(envOf(deploymentOf(off).pod).get('USERGROUP_METRICS_AUTH')).toBe('false');
  });

  it("namespacedServices: the hosts tenants' UserGroupServices may use, and plain http, reach the controller", async () => {
    const objects = await template('namespacedServices.allowedHosts={analytics.example.com,*.eu.example.com:8443}', 'namespacedServices.allowHttp=true');
    const env = envOf(deploymentOf(objects).pod);
    expect(env.get('USERGROUP_ALLOWED_SERVICE_HOSTS')).toBe('analytics.example.com,*.eu.example.com:8443');
    expect(env.get('USERGROUP_ALLOW_HTTP_SERVICES')).toBe('true');
  });

  it('networkPolicy: ingress only to the metrics and health ports, egress only to DNS, the apiserver and the services; the apiserver accepts it', async () => {
    const defaults = one(await template('networkPolicy.enabled=true'), 'NetworkPolicy');
    expect(defaults['spec']).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'usergroup-operator', 'app.kubernetes.io/instance': 'ugo' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: [{ port: 'metrics', protocol: 'TCP' }] }, { ports: [{ port: 'health', protocol: 'TCP' }] }],
      egress: [
        {
          ports: [
            { port: 53, protocol: 'UDP' },
            { port: 53, protocol: 'TCP' },
          ],
          to: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
          ],
        },
        {
          ports: [
            { port: 443, protocol: 'TCP' },
            { port: 6443, protocol: 'TCP' },
          ],
        },
        { ports: [{ port: 443, protocol: 'TCP' }] },
      ],
    });

    const values = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-values-')), 'values.yaml');
    fs.writeFileSync(
      values,
      [
        'networkPolicy:',
        '  enabled: true',
        '  metricsFrom:',
        '    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}',
        '  apiServer: {cidrs: [10.0.0.1/32], ports: [6443]}',
        '  serviceEgress:',
        '    - cidrs: [0.0.0.0/0]',
        '      except: [10.0.0.0/8, 169.254.0.0/16]',
        '      ports: [443]',
        '    - cidrs: [192.0.2.0/24, 198.51.100.0/24]',
        '      ports: [8443]',
      ].join('\n'),
    );
    const rendered = await helm(['template', 'ugo', CHART_DIR, '--namespace', 'ugo-system', '-f', values]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const policy = parseAllDocuments(rendered.stdout)
      .map((d) => d.toJS() as K8sObject | null)
      .find((o) => o?.kind === 'NetworkPolicy');
    const spec = policy?.['spec'] as { ingress: unknown[]; egress: unknown[] };
    expect(spec.ingress[0]).toEqual({
      ports: [{ port: 'metrics', protocol: 'TCP' }],
      from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
    });
    expect(spec.ingress[1]).toEqual({ ports: [{ port: 'health', protocol: 'TCP' }] });
    expect(spec.egress.slice(1)).toEqual([
      { ports: [{ port: 6443, protocol: 'TCP' }], to: [{ ipBlock: { cidr: '10.0.0.1/32' } }] },
      { ports: [{ port: 443, protocol: 'TCP' }], to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '169.254.0.0/16'] } }] },
      { ports: [{ port: 8443, protocol: 'TCP' }], to: [{ ipBlock: { cidr: '192.0.2.0/24' } }, { ipBlock: { cidr: '198.51.100.0/24' } }] },
    ]);
    // The apiserver's validation (ports, CIDRs, except inside cidr) accepts both.
    for (const object of [defaults, policy]) {
      const dryRun = await kubectl(['apply', '--dry-run=server', '-n', 'default', '-f', '-'], {
        input: JSON.stringify({ ...object, metadata: { ...object?.metadata, namespace: 'default' } }),
      });
      expect(dryRun.code, dryRun.stderr).toBe(0);
    }
  });

  it.each([
    [['replicas=3'], "additional properties 'replicas' not allowed"],
    [['controller.logLevel=verbose'], '/controller/logLevel'],
    [['image.pullPolicy=Sometimes'], '/image/pullPolicy'],
    [['connection.url=ftp://analytics.example.com', 'connection.apiKey.value=x'], '/connection/url'],
    [['watchNamespaces={Team_A}'], '/watchNamespaces/0'],
    [['controller.resyncPeriod=daily'], '/controller/resyncPeriod'],
    [['leaderElection.enabeld=true'], "additional properties 'enabeld' not allowed"],
    [['connection.url=https://analytics.example.com'], 'connection.url is set but there is no API key'],
    [['connection.url=https://analytics.example.com', 'connection.apiKey.value=x', 'connection.adoption=Maybe'], '/connection/adoption'],
    [['connection.apiKey.existingSecret=key'], 'connection.apiKey is set but connection.url is empty'],
    [['leaderElection.enabled=false'], 'replicaCount > 1 needs leaderElection.enabled=true'],
    [['metrics.auth=maybe'], '/metrics/auth'],
    [['namespacedServices.allowedHosts={https://analytics.example.com}'], '/namespacedServices/allowedHosts/0'],
    [['networkPolicy.serviceEgress[0].ports={443}', 'networkPolicy.serviceEgress[0].cidrs={10.0.0.0}'], '/networkPolicy/serviceEgress/0/cidrs/0'],
    [['networkPolicy.apiServer.ports={0}'], '/networkPolicy/apiServer/ports/0'],
    [['metrics.serviceMonitor.authorization.credentials.name=x'], '/metrics/serviceMonitor/authorization/credentials'],
    // The TokenRequest API's minimum: a shorter one would leave the Pod without a token.
    [['serviceAccount.tokenExpirationSeconds=599'], '/serviceAccount/tokenExpirationSeconds'],
  ])('refuses %j with a clear message', async (sets, message) => {
    const res = await helm(['template', 'ugo', CHART_DIR, ...sets.flatMap((s) => ['--set', s])]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
  });
});

describe('helm install into the test control plane', () => {
  let ns: string;
  let watched: string;
  const release = `ugo-${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    ns = await createNamespace('helm');
    watched = await createNamespace('helm-watched');
    // The namespace enforces Pod Security "restricted": the ReplicaSet's pods are admitted only if they comply.
    const label = await kubectl([
      'label',
      'namespace',
      ns,
      'pod-security.kubernetes.io/enforce=restricted',
      'pod-security.kubernetes.io/enforce-version=latest',
    ]);
    expect(label.code, label.stderr).toBe(0);
  });
  afterAll(async () => {
    await helm(['uninstall', release, '--namespace', ns]);
    await deleteNamespace(ns);
    await deleteNamespace(watched);
  });

  it('installs without --wait, and its pods are admitted under the restricted Pod Security Standard', async () => {
    const res = await helm([
      'install',
      release,
      CHART_DIR,
      '--namespace',
      ns,
      '--set',
      `watchNamespaces={${watched}}`,
      '--set',
      'connection.url=https://analytics.example.com',
      '--set',
      'connection.apiKey.value=not-a-real-key',
    ]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain('STATUS: deployed');
    expect(res.stdout).toContain(`It manages UserGroups in: ${watched}.`);

    const status = await helm(['status', release, '--namespace', ns, '-o', 'json']);
    expect((JSON.parse(status.stdout) as { info: { status: string } }).info.status).toBe('deployed');
    for (const [kind, namespace] of [
      ['deployment', ns],
      ['serviceaccount', ns],
      ['service', ns],
      ['poddisruptionbudget', ns],
      ['secret', ns],
      ['role', watched],
      ['rolebinding', watched],
      ['role', ns],
    ] as const) {
      const got = await kubectl(['get', kind, '-n', namespace, '-l', `app.kubernetes.io/instance=${release}`, '-o', 'name']);
      expect(got.stdout.trim(), `${kind} in ${namespace}`).not.toBe('');
    }
    // No nodes run them, but kube-controller-manager's ReplicaSet controller creates both pods: admission
    // (Pod Security restricted, ServiceAccount) accepted them.
    const pods = await eventually('2 pods created by the ReplicaSet', async () => {
      const got = await kubectl(['get', 'pods', '-n', ns, '-l', `app.kubernetes.io/instance=${release}`, '-o', 'name']);
      const names = got.stdout.trim().split('\n').filter(Boolean);
      return names.length === 2 ? names : undefined;
    });
    expect(pods).toHaveLength(2);
    const events = await kubectl(['get', 'events', '-n', ns, '--field-selector', 'reason=FailedCreate', '-o', 'name']);
    expect(events.stdout.trim()).toBe('');
  });

  it("the rollback guard: an older chart's objects are refused until the controller's Lease says the rotate-on-delete finalizers are gone", async () => {
    const binding = JSON.parse(
      (await kubectl(['get', 'validatingadmissionpolicybinding', '-l', `app.kubernetes.io/instance=${release}`, '-o', 'json'])).stdout,
    ) as { items: { metadata: { name: string }; spec: { paramRef?: { name?: string } } }[] };
    const guard = binding.items.find((b) => b.metadata.name.endsWith('-rollback-guard'));
    const lease = guard?.spec.paramRef?.name;
    if (!lease) throw new Error('no rollback guard with a Lease as its parameter');
    /** A ConfigMap as the 0.2.0 chart (or this one) labels its objects: what helm rollback writes first. */
    const write = (name: string, chart: string): Promise<CommandResult> =>
      kubectl(['apply', '-n', ns, '--server-side', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            name,
            labels: { 'helm.sh/chart': chart, 'app.kubernetes.io/name': 'usergroup-operator', 'app.kubernetes.io/instance': release },
          },
        }),
      });
    const leaseBody = (annotations: Record<string, string>): string =>
      JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: lease, namespace: ns, annotations }, spec: {} });
    const setLease = async (state: string): Promise<void> =>
      expect((await kubectl(['apply', '-n', ns, '-f', '-'], { input: leaseBody({ 'usergroup.dev/rotate-on-delete': state }) })).code).toBe(0);
    const olderAllowed = (): Promise<true | undefined> => write('older', 'usergroup-operator-0.2.0').then((res) => (res.code === 0 ? true : undefined));
    await setLease('active');
    // Refused once the apiserver enforces the policy, with the steps to take.
    const refused = await eventually('the message naming the steps', async () => {
      const res = await write('older', 'usergroup-operator-0.2.0');
      return res.code !== 0 && res.stderr.includes('rotate-on-delete') ? res.stderr : undefined;
    });
    expect(refused).toContain('controller.rotateOnDelete=false');
    expect(refused).toContain(`Lease ${lease}`);
    // This chart's own objects, and another release's, pass.
    expect((await write('same', 'usergroup-operator-0.3.0')).code).toBe(0);
    // No Lease: no controller of this release has run, so it left no finalizer. Allowed, and this chart's own writes
    // too: a release whose controller never started (a wrong image) is fixed by helm upgrade, not locked out.
    expect((await kubectl(['delete', '-n', ns, `lease/${lease}`])).code).toBe(0);
    await eventually('an older chart allowed without a Lease', olderAllowed);
    expect((await write('same', 'usergroup-operator-0.3.0')).code).toBe(0);
    // A controller that holds finalizers again refuses; once it has removed them all, the rollback may go.
    await setLease('active');
    await eventually('an older chart refused again', async () => ((await olderAllowed()) ? undefined : true));
    await setLease('released');
    await eventually('an older chart allowed once released', olderAllowed);
    await kubectl(['delete', '-n', ns, 'configmap', 'older', 'same', `lease/${lease}`]);
  });

  it('the namespace really enforces restricted: a pod without the security settings is refused', async () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'careless' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } };
    const res = await kubectl(['create', '-n', ns, '--dry-run=server', '-f', '-'], { input: JSON.stringify(pod) });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('violates PodSecurity "restricted:latest"');
  });

  it('helm uninstall removes what it installed and keeps the CRDs', async () => {
    const res = await helm(['uninstall', release, '--namespace', ns]);
    expect(res.code, res.stderr).toBe(0);
    await eventually("the release's objects gone", async () => {
      const got = await kubectl(['get', 'deployment,serviceaccount,role,secret', '-n', ns, '-l', `app.kubernetes.io/instance=${release}`, '-o', 'name']);
      const roles = await kubectl(['get', 'role', '-n', watched, '-l', `app.kubernetes.io/instance=${release}`, '-o', 'name']);
      return got.stdout.trim() === '' && roles.stdout.trim() === '' ? true : undefined;
    });
    const crds = await kubectl(['get', 'crd', 'usergroups.usergroup.dev', 'usergroupservices.usergroup.dev', '-o', 'name']);
    expect(crds.code).toBe(0);
  });
});

describe('plain manifests (deploy/kubernetes)', () => {
  it('are exactly what the chart renders (fix: npm run manifests)', async () => {
    const rendered = await renderManifests(path.join(inject('binDir'), 'helm'));
    for (const [file, content] of rendered) {
      expect(fs.readFileSync(path.join(MANIFESTS_DIR, file), 'utf8'), file).toBe(content);
    }
  });

  it('build with kustomize, and the example overlay sets the service URL and a tenant rule', async () => {
    const base = await kubectl(['kustomize', MANIFESTS_DIR]);
    expect(base.code, base.stderr).toBe(0);
    const kinds = parseAllDocuments(base.stdout).map((d) => (d.toJS() as K8sObject).kind);
    expect(kinds).toEqual(expect.arrayContaining(['Namespace', 'CustomResourceDefinition', 'Deployment', 'ClusterRole', 'ServiceAccount']));
    expect(kinds.filter((k) => k === 'CustomResourceDefinition')).toHaveLength(4);

    const overlay = await kubectl(['kustomize', path.join(MANIFESTS_DIR, '../example')]);
    expect(overlay.code, overlay.stderr).toBe(0);
    const objects = parseAllDocuments(overlay.stdout).map((d) => d.toJS() as K8sObject);
    const pod = (objects.find((o) => o.kind === 'Deployment')?.['spec'] as { template: { spec: PodSpec } }).template.spec;
    expect(envOf(pod).get('USERGROUP_DEFAULT_SERVICE')).toBe('usergroup-operator');
    expect(objects.find((o) => o.kind === 'ClusterUserGroupService')?.['spec']).toMatchObject({
      url: 'https://analytics.example.com',
      tenants: [{ namespaces: ['customers'], userGroupIds: { prefix: '' }, adoption: 'Rotate' }],
    });
  });

  it('apply to the real apiserver: the controller is installed in a restricted namespace and its pods are admitted', async () => {
    // crds.yaml only as a server dry run: the shared control plane's CRDs stay as the harness applied them.
    const crds = await kubectl(['apply', '--dry-run=server', '-f', path.join(MANIFESTS_DIR, 'crds.yaml')]);
    expect(crds.code, crds.stderr).toBe(0);
    const applied = await kubectl(['apply', '-f', path.join(MANIFESTS_DIR, 'namespace.yaml'), '-f', path.join(MANIFESTS_DIR, 'install.yaml')]);
    try {
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stderr).not.toMatch(/Warning/i);
      await eventually('2 controller pods created', async () => {
        const got = await kubectl(['get', 'pods', '-n', 'usergroup-operator', '-o', 'name']);
        return got.stdout.trim().split('\n').filter(Boolean).length === 2 ? true : undefined;
      });
    } finally {
      await kubectl(['delete', '--wait=false', '-f', path.join(MANIFESTS_DIR, 'install.yaml'), '-f', path.join(MANIFESTS_DIR, 'namespace.yaml')]);
    }
  });
});
