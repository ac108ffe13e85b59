// The UserGroupClaim kind: which namespace holds a userGroupId on an account, its name and its object.
import { createHash } from 'node:crypto';
import { CLAIM_API_VERSION, CLAIM_KIND, CLAIM_NAMESPACE_LABEL } from './constants.js';
import { intern } from './intern.js';
import { parseMeta, type ObjectMeta, type Parsed } from './meta.js';
import { isRecord } from '../platform/json-value.js';

/**
 * Which namespace holds a userGroupId on one service account. Cluster-scoped and written only by the
 * operator (tenants have no RBAC on it), so the apiserver itself decides a race between namespaces, across
 * every deployment of the operator, whatever URL spelling leads to the account. It outlives the UserGroup
 * that made it: the id stays with its namespace until a cluster admin deletes the claim.
 */
export interface UserGroupClaim {
  readonly metadata: ObjectMeta;
  readonly spec: ClaimSpec;
}

export interface ClaimSpec {
  readonly userGroupId: string;
  /** The account (see Connection.account): a digest of its API key, never the key. */
  readonly account: string;
  readonly namespace: string;
  /** The UserGroup that holds the claim now (a later one of the same namespace takes it over when it is gone). */
  readonly userGroup: { readonly name: string; readonly uid: string };
}

export function parseClaim(raw: unknown): Parsed<UserGroupClaim> {
  if (!isRecord(raw)) return { ok: false, error: 'UserGroupClaim is not an object' };
  // Nothing decides on a claim's labels, annotations or owners: the cache keeps none (one per UserGroup).
  const meta = parseMeta(raw['metadata'], { labels: false, annotations: [], ownerReferences: false });
  if (!meta.ok) return meta;
  const spec = raw['spec'];
  if (!isRecord(spec)) return { ok: false, error: 'spec is missing' };
  const { userGroupId, account, namespace, userGroup } = spec;
  if (typeof userGroupId !== 'string' || typeof account !== 'string' || typeof namespace !== 'string') {
    return { ok: false, error: 'spec.userGroupId, account and namespace must be strings' };
  }
  if (!isRecord(userGroup) || typeof userGroup['name'] !== 'string' || typeof userGroup['uid'] !== 'string') {
    return { ok: false, error: 'spec.userGroup needs a name and a uid' };
  }
  return {
    ok: true,
    value: {
      metadata: meta.value,
      spec: { userGroupId, account: intern(account), namespace: intern(namespace), userGroup: { name: userGroup['name'], uid: userGroup['uid'] } },
    },
  };
}

/** One name per (account, userGroupId), so creating it is the atomic "first one wins". */
export function claimName(account: string, userGroupId: string): string {
  return `ugc-${createHash('sha256').update(`${account}\n${userGroupId}`, 'utf8').digest('hex').slice(0, 40)}`;
}

export function claimObject(spec: ClaimSpec): Record<string, unknown> {
  return {
    apiVersion: CLAIM_API_VERSION,
    kind: CLAIM_KIND,
    metadata: { name: claimName(spec.account, spec.userGroupId), labels: { [CLAIM_NAMESPACE_LABEL]: spec.namespace } },
    spec,
  };
}
