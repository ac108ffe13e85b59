// Tenancy policy: whether a shared connection's tenant rules admit a UserGroup and its id (pure; connections.ts asks it).
import { NAMESPACE_PLACEHOLDER, type Adoption, type TenantRule } from '../../api/clusterusergroupservice.js';
import { selects } from '../../api/label-selector.js';
import { Reason } from './conditions.js';

/** Whether a shared connection serves this UserGroup, and under which adoption policy. */
export type Admission =
  | { readonly ok: true; readonly adoption: Adoption }
  | { readonly ok: false; readonly reason: typeof Reason.NamespaceNotAllowed | typeof Reason.UserGroupIdNotAllowed; readonly message: string };

export interface AdmissionRequest {
  /** For messages: "ClusterUserGroupService <name>". */
  readonly service: string;
  readonly tenants: readonly TenantRule[];
  readonly namespace: string;
  /** The namespace's labels; undefined when the namespace is not known (then no selector admits it). */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  readonly userGroupId: string;
}

/**
 * Deny by default: a rule must admit the namespace (by name, or by labels only cluster admins set), and one
 * of the admitting rules must give it the id. The first rule that does both decides the adoption policy.
 */
export function admit(request: AdmissionRequest): Admission {
  const { service, tenants, namespace, namespaceLabels, userGroupId } = request;
  const admitting = tenants.filter(
    (rule) =>
      rule.namespaces.includes(namespace) ||
      (rule.namespaceSelector !== undefined && namespaceLabels !== undefined && selects(rule.namespaceSelector, namespaceLabels)),
  );
  if (admitting.length === 0) {
    return {
      ok: false,
      reason: Reason.NamespaceNotAllowed,
      message: `${service} does not serve namespace ${namespace}: none of its spec.tenants entries admits it (a cluster admin decides which namespaces may use it)`,
    };
  }
  const granting = admitting.find((rule) => idAllowed(rule, namespace, userGroupId));
  if (!granting) {
    return {
      ok: false,
      reason: Reason.UserGroupIdNotAllowed,
      message: `userGroupId "${userGroupId}" is not one that namespace ${namespace} may claim on ${service}; it may claim ${admitting.map((r) => describeIds(r, namespace)).join(', or ')}`,
    };
  }
  return { ok: true, adoption: granting.adoption };
}

function idAllowed(rule: TenantRule, namespace: string, userGroupId: string): boolean {
  const ids = rule.userGroupIds;
  if ('prefix' in ids) return userGroupId.startsWith(expand(ids.prefix, namespace));
  return ids.exact.some((id) => expand(id, namespace) === userGroupId);
}

function expand(template: string, namespace: string): string {
  return template.replaceAll(NAMESPACE_PLACEHOLDER, namespace);
}

const MAX_LISTED = 5;

function describeIds(rule: TenantRule, namespace: string): string {
  const ids = rule.userGroupIds;
  if ('prefix' in ids) return ids.prefix === '' ? 'any id' : `ids starting with "${expand(ids.prefix, namespace)}"`;
  const listed = ids.exact
    .slice(0, MAX_LISTED)
    .map((id) => `"${expand(id, namespace)}"`)
    .join(', ');
  return ids.exact.length > MAX_LISTED ? `one of ${listed} (and ${ids.exact.length - MAX_LISTED} more)` : `one of ${listed}`;
}
