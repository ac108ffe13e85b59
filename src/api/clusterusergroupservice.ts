// The ClusterUserGroupService kind: a cluster admins' shared connection and its tenant rules, parsed.
import { parseLabelSelector, type LabelSelector } from './label-selector.js';
import { parseMeta, type ObjectMeta, type Parsed } from './meta.js';
import { isRecord } from '../platform/json-value.js';

/**
 * A shared, cluster-scoped connection to the service, owned by cluster admins (tenants have no RBAC on it).
 * It serves only the namespaces its tenant rules admit, and each of them only for the userGroupIds its rule
 * gives it: deny by default, like ESO's ClusterSecretStore conditions or VSO's allowedNamespaces, and one step
 * further, since the external identifier itself is bound to namespaces.
 */
export interface ClusterUserGroupService {
  readonly metadata: ObjectMeta;
  readonly spec: Parsed<ClusterUserGroupServiceSpec>;
}

export interface ClusterUserGroupServiceSpec {
  readonly url: string;
  readonly apiKeySecretRef: { readonly namespace: string; readonly name: string; readonly key: string };
  readonly allowInsecure: boolean;
  /** Empty: the connection serves no namespace at all. */
  readonly tenants: readonly TenantRule[];
  /** The account is shared by several clusters, each with its own copy of this object (docs/fleets.md). */
  readonly fleet: Fleet | undefined;
}

/**
 * One cluster of a fleet on one account. Primary: it rotates (requested, scheduled, on deletion). Follower: it never
 * POSTs; it follows the primary's rotations with PUTs. Either way a group found at the service is the fleet's own.
 */
export type FleetRole = 'Primary' | 'Follower';
const FLEET_ROLES: readonly FleetRole[] = ['Primary', 'Follower'];

export interface Fleet {
  readonly role: FleetRole;
}

/** What a UserGroup that finds an existing group at its first sync may do. */
export type Adoption = 'Rotate' | 'Keep' | 'Refuse';
const ADOPTIONS: readonly Adoption[] = ['Rotate', 'Keep', 'Refuse'];

export interface TenantRule {
  /** Namespaces admitted by name. */
  readonly namespaces: readonly string[];
  /** Namespaces admitted by their labels (labels only cluster admins can set). */
  readonly namespaceSelector: LabelSelector | undefined;
  /** The ids an admitted namespace may claim; "{namespace}" stands for the UserGroup's namespace. */
  readonly userGroupIds: { readonly prefix: string } | { readonly exact: readonly string[] };
  readonly adoption: Adoption;
}

export const NAMESPACE_PLACEHOLDER = '{namespace}';

export function parseClusterUserGroupService(raw: unknown): Parsed<ClusterUserGroupService> {
  if (!isRecord(raw)) return { ok: false, error: 'ClusterUserGroupService is not an object' };
  const meta = parseMeta(raw['metadata']);
  if (!meta.ok) return meta;
  return { ok: true, value: { metadata: meta.value, spec: parseSpec(raw['spec']) } };
}

function parseSpec(raw: unknown): Parsed<ClusterUserGroupServiceSpec> {
  if (!isRecord(raw)) return { ok: false, error: 'spec is missing' };
  const { url, apiKeySecretRef: ref, allowInsecure, tenants, fleet } = raw;
  if (typeof url !== 'string' || url === '') return { ok: false, error: 'spec.url must be a non-empty string' };
  if (!isRecord(ref) || typeof ref['namespace'] !== 'string' || ref['namespace'] === '' || typeof ref['name'] !== 'string' || ref['name'] === '') {
    return { ok: false, error: 'spec.apiKeySecretRef needs a namespace and a name' };
  }
  const key = ref['key'] ?? 'apiKey';
  if (typeof key !== 'string' || key === '') return { ok: false, error: 'spec.apiKeySecretRef.key must be a non-empty string' };
  if (allowInsecure !== undefined && typeof allowInsecure !== 'boolean') return { ok: false, error: 'spec.allowInsecure must be a boolean' };
  const rules: TenantRule[] = [];
  if (tenants !== undefined && tenants !== null) {
    if (!Array.isArray(tenants)) return { ok: false, error: 'spec.tenants must be a list' };
    for (const [i, t] of tenants.entries()) {
      const rule = parseRule(t, `spec.tenants[${i}]`);
      if (!rule.ok) return rule;
      rules.push(rule.value);
    }
  }
  const parsedFleet = parseFleet(fleet);
  if (!parsedFleet.ok) return parsedFleet;
  return {
    ok: true,
    value: {
      url,
      apiKeySecretRef: { namespace: ref['namespace'], name: ref['name'], key },
      allowInsecure: allowInsecure === true,
      tenants: rules,
      fleet: parsedFleet.value,
    },
  };
}

/** spec.fleet: absent (one cluster on the account), or the role of this cluster (Follower unless said). */
function parseFleet(raw: unknown): Parsed<Fleet | undefined> {
  if (raw === undefined || raw === null) return { ok: true, value: undefined };
  if (!isRecord(raw)) return { ok: false, error: 'spec.fleet must be an object' };
  const role = raw['role'] ?? 'Follower';
  const known = FLEET_ROLES.find((r) => r === role);
  if (!known) return { ok: false, error: `spec.fleet.role must be one of ${FLEET_ROLES.join(', ')}` };
  return { ok: true, value: { role: known } };
}

function parseRule(raw: unknown, at: string): Parsed<TenantRule> {
  if (!isRecord(raw)) return { ok: false, error: `${at} must be an object` };
  const names = raw['namespaces'] ?? [];
  if (!Array.isArray(names) || !names.every((n): n is string => typeof n === 'string' && n !== '')) {
    return { ok: false, error: `${at}.namespaces must be a list of namespace names` };
  }
  let namespaceSelector: LabelSelector | undefined;
  if (raw['namespaceSelector'] !== undefined && raw['namespaceSelector'] !== null) {
    const selector = parseLabelSelector(raw['namespaceSelector'], `${at}.namespaceSelector`);
    if (!selector.ok) return selector;
    namespaceSelector = selector.value;
  }
  if (names.length === 0 && !namespaceSelector) return { ok: false, error: `${at} admits no namespace: give namespaces, a namespaceSelector, or both` };
  const ids = raw['userGroupIds'];
  if (!isRecord(ids)) return { ok: false, error: `${at}.userGroupIds is required (prefix: "" allows every id)` };
  const { prefix, exact } = ids;
  if ((prefix === undefined) === (exact === undefined)) return { ok: false, error: `${at}.userGroupIds needs exactly one of prefix and exact` };
  let userGroupIds: TenantRule['userGroupIds'];
  if (prefix !== undefined) {
    if (typeof prefix !== 'string') return { ok: false, error: `${at}.userGroupIds.prefix must be a string` };
    const problem = prefixProblem(prefix);
    if (problem) return { ok: false, error: `${at}.userGroupIds.prefix: ${problem}` };
    userGroupIds = { prefix };
  } else {
    if (!Array.isArray(exact) || exact.length === 0 || !exact.every((e): e is string => typeof e === 'string' && e !== '')) {
      return { ok: false, error: `${at}.userGroupIds.exact must be a non-empty list of ids` };
    }
    const problem = exact.map(placeholderProblem).find((p) => p !== undefined);
    if (problem) return { ok: false, error: `${at}.userGroupIds.exact: ${problem}` };
    userGroupIds = { exact };
  }
  const adoption = raw['adoption'] ?? 'Rotate';
  const known = ADOPTIONS.find((a) => a === adoption);
  if (!known) return { ok: false, error: `${at}.adoption must be one of ${ADOPTIONS.join(', ')}` };
  return { ok: true, value: { namespaces: names, namespaceSelector, userGroupIds, adoption: known } };
}

function placeholderProblem(template: string): string | undefined {
  const other = /[{}]/.exec(template.replaceAll(NAMESPACE_PLACEHOLDER, ''));
  return other ? `only ${NAMESPACE_PLACEHOLDER} may appear in braces` : undefined;
}

/**
 * Namespace names consist of a-z, 0-9 and "-": a prefix that ends with {namespace}, or continues it with one
 * of those, would give namespace "team" the ids of namespace "team-a" too. The CRD rejects the same prefixes.
 */
export function prefixProblem(prefix: string): string | undefined {
  const placeholder = placeholderProblem(prefix);
  if (placeholder) return placeholder;
  let at = prefix.indexOf(NAMESPACE_PLACEHOLDER);
  while (at >= 0) {
    const next = prefix[at + NAMESPACE_PLACEHOLDER.length];
    if (next === undefined || /[a-z0-9-]/.test(next)) {
      return `follow ${NAMESPACE_PLACEHOLDER} with a character namespace names cannot contain, such as ".", ":", "/" or "_" (namespace "team" would otherwise also get the ids of namespace "team-a")`;
    }
    at = prefix.indexOf(NAMESPACE_PLACEHOLDER, at + 1);
  }
  return undefined;
}
