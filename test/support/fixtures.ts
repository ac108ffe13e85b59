import { createHmac } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { parseClusterUserGroupService, type ClusterUserGroupService } from '../../src/api/clusterusergroupservice.js';
import type { ObjectMeta } from '../../src/api/meta.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import type { UserGroupSpec } from '../../src/api/usergroup.js';
import { desiredSecret, inspectSecret, type SecretInspection } from '../../src/controller/policies/token-secret.js';
import { SecretValue } from '../../src/service/secret-value.js';

/** Metadata of a UserGroup "team-a/acme", for tests of pure logic. */
export const OWNER: ObjectMeta = {
  name: 'acme',
  namespace: 'team-a',
  uid: 'uid-acme',
  resourceVersion: '10',
  generation: 1,
  creationTimestamp: '2025-01-01T00:00:00Z',
  deletionTimestamp: undefined,
  labels: {},
  annotations: {},
  ownerReferences: [],
};

/** A parsed minimal spec (userGroupId acme-1, Secret "acme"), with overrides. */
export function userGroupSpec(over: Partial<UserGroupSpec> = {}): UserGroupSpec {
  return {
    userGroupId: 'acme-1',
    name: 'Acme',
    mapping: undefined,
    properties: undefined,
    tokenSecret: { name: 'acme', key: 'token', labels: {}, annotations: {} },
    serviceRef: undefined,
    suspend: false,
    deletionPolicy: 'Retain',
    maxTokenAgeMs: undefined,
    rolloutRestartTargets: [],
    ...over,
  };
}

/** A connection's record seal (Connection.seal), keyed as if by one account's API key. */
export const SEAL = (message: string): string => createHmac('sha256', 'account-a').update(message).digest('hex');
/** The seal of another account: records it made are worthless to SEAL. */
export const OTHER_SEAL = (message: string): string => createHmac('sha256', 'account-b').update(message).digest('hex');

/**
 * A Secret built by desiredSecret as the apiserver returns it once stored: the same fields, plus a uid and
 * `resourceVersion`. Built field by field (the fields desiredSecret sets), as a plain object.
 */
export function storedSecret(desired: V1Secret, resourceVersion: string): V1Secret {
  const meta = desired.metadata ?? {};
  return {
    apiVersion: desired.apiVersion,
    kind: desired.kind,
    type: desired.type,
    metadata: {
      name: meta.name,
      namespace: meta.namespace,
      labels: meta.labels,
      annotations: meta.annotations,
      ownerReferences: meta.ownerReferences,
      uid: 'uid-secret',
      resourceVersion,
    },
    data: desired.data,
  };
}

/** A ClusterUserGroupService named `name` with these tenant rules (as they would be written), parsed. */
export function clusterService(name: string, tenants: unknown[]): ClusterUserGroupService {
  const parsed = parseClusterUserGroupService({
    metadata: { name, uid: name, resourceVersion: '1' },
    spec: { url: 'https://analytics.example.com', apiKeySecretRef: { namespace: 'ops', name: 'key' }, tenants },
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** An observed Secret as the apiserver would return it after the operator wrote desiredSecret(..., SEAL). */
export function writtenSecret(content: { token: string; handled?: string; pending?: string }, s: UserGroupSpec = userGroupSpec()): ObservedSecret {
  const desired = desiredSecret(OWNER, s, { token: new SecretValue(content.token), handled: content.handled, pending: content.pending }, SEAL);
  const parsed = parseSecret(storedSecret(desired, '77'));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** What inspectSecret makes of such a Secret, for OWNER and the default spec: a token Secret the operator wrote. */
export function ownedInspection(content: { token: string; handled?: string; pending?: string }): SecretInspection {
  return inspectSecret(writtenSecret(content), OWNER, userGroupSpec(), SEAL);
}

/** No token Secret. */
export const MISSING_SECRET: SecretInspection = { state: 'missing' };
