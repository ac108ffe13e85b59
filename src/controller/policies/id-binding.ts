// Id-binding policy: the one namespace the tenant rules let hold a userGroupId, if any (pure; usergroup/claim.ts asks it).
import { NAMESPACE_PLACEHOLDER, type ClusterUserGroupService, type TenantRule } from '../../api/clusterusergroupservice.js';

/**
 * The one namespace the cluster admins' rules let hold a userGroupId, if there is exactly one: every tenant rule
 * of every ClusterUserGroupService that could give this id to some namespace gives it to the same one. Then the
 * rules themselves keep the id in that namespace, and no UserGroupClaim is needed to (see usergroup/claim.ts).
 *
 * Conservative by construction, since a wrong "bound" would let two namespaces use one group: a rule admitting
 * namespaces by labels counts as admitting every namespace whose name fits its id template (labels change, and
 * any namespace may get them), a template without `{namespace}` then fits every namespace, and a template with
 * `{namespace}` twice is not worked out (any namespace). Rules of every ClusterUserGroupService count, whatever its
 * account (the account needs the API key, and an admin may point two connections at one). A tenant's own
 * UserGroupService counts for nothing: its account is its own API key's, which is not the platform's.
 */
export function boundNamespace(userGroupId: string, services: Iterable<ClusterUserGroupService>): string | undefined {
  let bound: string | undefined;
  for (const service of services) {
    if (!service.spec.ok) continue; // an invalid spec serves no one
    for (const rule of service.spec.value.tenants) {
      for (const namespace of namespacesGiven(rule, userGroupId)) {
        if (namespace === ANY || (bound !== undefined && bound !== namespace)) return undefined;
        bound = namespace;
      }
    }
  }
  return bound;
}

/** Stands for "any namespace could be given it". */
const ANY = Symbol('any namespace');

/** The namespaces this rule could give the id to, now or once any namespace gets the labels it selects. */
function namespacesGiven(rule: TenantRule, userGroupId: string): (string | typeof ANY)[] {
  const templates = 'prefix' in rule.userGroupIds ? [rule.userGroupIds.prefix] : rule.userGroupIds.exact;
  const prefix = 'prefix' in rule.userGroupIds;
  const given: (string | typeof ANY)[] = rule.namespaces.filter((ns) => templates.some((t) => fits(userGroupId, expand(t, ns), prefix)));
  if (rule.namespaceSelector !== undefined) for (const t of templates) given.push(...namespacesFitting(userGroupId, t, prefix));
  return given;
}

/** Every namespace name that, put into the template, gives this id (or makes it a prefix of it). */
function namespacesFitting(userGroupId: string, template: string, prefix: boolean): (string | typeof ANY)[] {
  const at = template.indexOf(NAMESPACE_PLACEHOLDER);
  if (at < 0) return fits(userGroupId, template, prefix) ? [ANY] : [];
  const before = template.slice(0, at);
  const after = template.slice(at + NAMESPACE_PLACEHOLDER.length);
  if (after.includes(NAMESPACE_PLACEHOLDER)) return [ANY];
  if (!userGroupId.startsWith(before)) return [];
  const rest = userGroupId.slice(before.length);
  const names: string[] = [];
  for (let length = 1; length <= Math.min(MAX_NAMESPACE_LENGTH, rest.length); length++) {
    const name = rest.slice(0, length);
    if (NAMESPACE_NAME.test(name) && fits(rest.slice(length), after, prefix)) names.push(name);
  }
  return names;
}

const fits = (userGroupId: string, expanded: string, prefix: boolean): boolean => (prefix ? userGroupId.startsWith(expanded) : userGroupId === expanded);
const expand = (template: string, namespace: string): string => template.replaceAll(NAMESPACE_PLACEHOLDER, namespace);

/** A namespace's name: an RFC 1123 label. */
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const MAX_NAMESPACE_LENGTH = 63;
