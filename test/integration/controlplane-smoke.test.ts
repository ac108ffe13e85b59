import path from 'node:path';
import {
  ApiException,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  VersionApi,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pinnedKubernetesVersion } from '../../devtools/controlplane/binaries.js';
import { repoRoot } from '../support/repo-root.js';
import { adminKubeConfig, createNamespace, deleteNamespace, eventually, kubectl, tokenKubeConfig } from '../support/kube.js';

const group = 'usergroup.dev';
const version = 'v1';
const plural = 'usergroups';

interface UserGroupObject {
  metadata: { name: string; uid: string; resourceVersion: string };
  spec: { userGroupId: string; name: string };
  status?: { observedGeneration?: number; tokenSecretName?: string };
}

describe('the test control plane', () => {
  let ns: string;
  const kc = adminKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);

  beforeAll(async () => {
    ns = await createNamespace('smoke');
  });
  afterAll(async () => {
    if (ns) await deleteNamespace(ns);
  });

  it('serves the pinned Kubernetes version', async () => {
    const info = await kc.makeApiClient(VersionApi).getCode();
    expect(info.gitVersion).toBe(pinnedKubernetesVersion());
    expect(info.gitVersion).toBe(inject('kubernetesVersion'));
    expect(info.gitTreeState).toBe('clean');
  });

  it('establishes the UserGroup CRD applied with the real kubectl', async () => {
    // The global setup applied crds/ first (so garbage collection knows the type early); applying again is a no-op.
    const applied = await kubectl(['apply', '--server-side', '-f', path.join(repoRoot, 'crds')]);
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain('customresourcedefinition.apiextensions.k8s.io/usergroups.usergroup.dev serverside-applied');
    const wait = await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/usergroups.usergroup.dev']);
    expect(wait.stdout).toContain('condition met');
    const resources = await kubectl(['api-resources', '--api-group=usergroup.dev', '-o', 'name']);
    expect(resources.stdout.trim()).toContain('usergroups.usergroup.dev');
    const shortName = await kubectl(['get', 'ug', '-n', ns]);
    expect(shortName.code).toBe(0);
  });

  it('creates, gets, lists, watches, patches status of and deletes a UserGroup', async () => {
    const seen: string[] = [];
    const watch = new Watch(kc);
    const abort = await watch.watch(
      `/apis/${group}/${version}/namespaces/${ns}/${plural}`,
      { allowWatchBookmarks: true },
      (phase, obj: UserGroupObject) => {
        seen.push(`${phase} ${obj.metadata.name}`);
      },
      () => undefined,
    );
    try {
      const body = { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name: 'acme' }, spec: { userGroupId: 'acme-1', name: 'Acme' } };
      const created = (await custom.createNamespacedCustomObject({ group, version, namespace: ns, plural, body })) as UserGroupObject;
      expect(created.metadata.uid).toBeTruthy();

      const got = (await custom.getNamespacedCustomObject({ group, version, namespace: ns, plural, name: 'acme' })) as UserGroupObject;
      expect(got.spec).toMatchObject({ userGroupId: 'acme-1', name: 'Acme', suspend: false });

      const list = (await custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })) as { items: UserGroupObject[] };
      expect(list.items.map((i) => i.metadata.name)).toEqual(['acme']);

      const patched = (await custom.patchNamespacedCustomObjectStatus(
        { group, version, namespace: ns, plural, name: 'acme', body: { status: { observedGeneration: 1, tokenSecretName: 'acme' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )) as UserGroupObject;
      expect(patched.status).toEqual({ observedGeneration: 1, tokenSecretName: 'acme' });
      // A status patch must not touch spec, and a spec write must not touch status.
      expect(patched.spec.name).toBe('Acme');

      await custom.deleteNamespacedCustomObject({ group, version, namespace: ns, plural, name: 'acme' });
      await eventually('the watch to report ADDED, MODIFIED and DELETED', async () =>
        seen.includes('ADDED acme') && seen.includes('MODIFIED acme') && seen.includes('DELETED acme') ? true : undefined,
      );
      await expect(custom.getNamespacedCustomObject({ group, version, namespace: ns, plural, name: 'acme' })).rejects.toMatchObject({ code: 404 });
    } finally {
      abort.abort();
    }
  });

  it('garbage-collects an object owned by a deleted UserGroup (kube-controller-manager runs)', async () => {
    const owner = (await custom.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural,
      body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name: 'owner' }, spec: { userGroupId: 'owner-1', name: 'Owner' } },
    })) as UserGroupObject;
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: 'owned',
          ownerReferences: [{ apiVersion: `${group}/${version}`, kind: 'UserGroup', name: 'owner', uid: owner.metadata.uid, controller: true }],
        },
        data: { a: 'b' },
      },
    });
    await custom.deleteNamespacedCustomObject({ group, version, namespace: ns, plural, name: 'owner' });
    await eventually(
      'the owned ConfigMap to be garbage-collected',
      async () => {
        try {
          await core.readNamespacedConfigMap({ namespace: ns, name: 'owned' });
          return undefined;
        } catch (err) {
          return err instanceof ApiException && err.code === 404 ? true : undefined;
        }
      },
      60_000,
    );
  });

  it('authenticates a ServiceAccount token from the TokenRequest API and enforces RBAC', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'reader' } } });
    await rbac.createNamespacedRole({
      namespace: ns,
      body: { metadata: { name: 'configmap-reader' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }] },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
      },
    });
    const tokenRequest = await core.createNamespacedServiceAccountToken({
      namespace: ns,
      name: 'reader',
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const token = tokenRequest.status?.token;
    expect(token).toBeTruthy();

    const asReader = tokenKubeConfig(token ?? '');
    const review = await asReader.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe(`system:serviceaccount:${ns}:reader`);

    const readerCore = asReader.makeApiClient(CoreV1Api);
    await expect(readerCore.listNamespacedConfigMap({ namespace: ns })).resolves.toBeDefined();
    await expect(readerCore.listNamespacedSecret({ namespace: ns })).rejects.toMatchObject({ code: 403 });
    await expect(readerCore.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'x' } } })).rejects.toMatchObject({ code: 403 });
    await expect(readerCore.listNamespacedConfigMap({ namespace: 'default' })).rejects.toMatchObject({ code: 403 });
  });
});
