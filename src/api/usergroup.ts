import { DEFAULT_TOKEN_KEY } from './constants.js';
import { isRecord, parseMeta, stringMap, type ObjectMeta, type Parsed } from './meta.js';

export interface UserGroupSpec {
  readonly userGroupId: string;
  readonly name: string;
  readonly mapping: Readonly<Record<string, string>> | undefined;
  readonly properties: Readonly<Record<string, unknown>> | undefined;
  readonly tokenSecret: TokenSecretSpec;
  readonly serviceRef: ServiceRef | undefined;
  readonly suspend: boolean;
}

/** A UserGroupService in the UserGroup's namespace (the team's own account), or a shared ClusterUserGroupService. */
export interface ServiceRef {
  readonly kind: 'UserGroupService' | 'ClusterUserGroupService';
  readonly name: string;
}

export interface TokenSecretSpec {
  /** Resolved: defaults to the UserGroup's name. */
  readonly name: string;
  readonly key: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  readonly type: string;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
  readonly observedGeneration?: number;
}

export interface UserGroupStatus {
  readonly observedGeneration?: number;
  readonly conditions?: readonly Condition[];
  readonly teamId?: number;
  readonly providedId?: string;
  readonly environmentTag?: string;
  readonly tokenSecretName?: string;
  readonly lastSyncTime?: string;
  readonly syncedHash?: string;
  readonly rotation?: { readonly lastHandledRequest?: string; readonly lastRotationTime?: string };
  /** Set when the first sync found the group already at the service and this UserGroup adopted it. */
  readonly adoption?: { readonly adoptedAt: string; readonly tokenRotated: boolean };
}

export interface UserGroup {
  readonly metadata: ObjectMeta;
  /** A spec the apiserver accepted but the operator cannot use is reported as InvalidSpec, not dropped. */
  readonly spec: Parsed<UserGroupSpec>;
  readonly status: UserGroupStatus;
}

/** Copies of the whole object that kubectl apply keeps; with 10,000 UserGroups they would double the cache. */
const UNREAD_ANNOTATIONS = ['kubectl.kubernetes.io/last-applied-configuration'];

export function parseUserGroup(raw: unknown): Parsed<UserGroup> {
  if (!isRecord(raw)) return { ok: false, error: 'UserGroup is not an object' };
  const meta = parseMeta(raw['metadata'], UNREAD_ANNOTATIONS);
  if (!meta.ok) return meta;
  return {
    ok: true,
    value: { metadata: meta.value, spec: parseSpec(raw['spec'], meta.value.name), status: parseStatus(raw['status']) },
  };
}

export function parseSpec(raw: unknown, objectName: string): Parsed<UserGroupSpec> {
  if (!isRecord(raw)) return { ok: false, error: 'spec is missing' };
  const { userGroupId, name, mapping, properties, tokenSecret, serviceRef, suspend } = raw;
  // Counted in code points, as the apiserver's maxLength and the service count (not UTF-16 units).
  const idLength = typeof userGroupId === 'string' ? [...userGroupId].length : 0;
  if (typeof userGroupId !== 'string' || idLength < 1 || idLength > 255) {
    return { ok: false, error: 'spec.userGroupId must be a string of 1 to 255 characters' };
  }
  if (typeof name !== 'string' || name === '') return { ok: false, error: 'spec.name must be a non-empty string' };
  let parsedMapping: Record<string, string> | undefined;
  if (mapping !== undefined && mapping !== null) {
    parsedMapping = stringMap(mapping);
    if (!parsedMapping) return { ok: false, error: 'spec.mapping must map strings to strings' };
  }
  if (properties !== undefined && properties !== null && !isRecord(properties)) {
    return { ok: false, error: 'spec.properties must be a JSON object' };
  }
  if (isRecord(properties) && nestedDeeperThan(properties, MAX_PROPERTIES_DEPTH)) {
    return { ok: false, error: `spec.properties is nested more than ${MAX_PROPERTIES_DEPTH} levels deep` };
  }
  const secret = parseTokenSecret(tokenSecret, objectName);
  if (!secret.ok) return secret;
  let ref: ServiceRef | undefined;
  if (serviceRef !== undefined && serviceRef !== null) {
    if (!isRecord(serviceRef) || typeof serviceRef['name'] !== 'string' || serviceRef['name'] === '') {
      return { ok: false, error: 'spec.serviceRef.name must be a non-empty string' };
    }
    const kind = serviceRef['kind'] ?? 'UserGroupService';
    if (kind !== 'UserGroupService' && kind !== 'ClusterUserGroupService') {
      return { ok: false, error: 'spec.serviceRef.kind must be UserGroupService or ClusterUserGroupService' };
    }
    ref = { kind, name: serviceRef['name'] };
  }
  if (suspend !== undefined && typeof suspend !== 'boolean') return { ok: false, error: 'spec.suspend must be a boolean' };
  return {
    ok: true,
    value: {
      userGroupId,
      name,
      mapping: parsedMapping,
      properties: isRecord(properties) ? properties : undefined,
      tokenSecret: secret.value,
      serviceRef: ref,
      suspend: suspend === true,
    },
  };
}

/** Deeper properties are refused: hashing and sending them would recurse that deep. */
export const MAX_PROPERTIES_DEPTH = 100;

/** Iterative, so a hostile depth cannot overflow the stack here either. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const [v, depth] = item;
    if (v === null || typeof v !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Object.values(v as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return false;
}

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const secretKey = /^[-._a-zA-Z0-9]+$/;

function parseTokenSecret(raw: unknown, objectName: string): Parsed<TokenSecretSpec> {
  const spec = raw === undefined || raw === null ? {} : raw;
  if (!isRecord(spec)) return { ok: false, error: 'spec.tokenSecret must be an object' };
  const name = spec['name'] ?? objectName;
  const key = spec['key'] ?? DEFAULT_TOKEN_KEY;
  if (typeof name !== 'string' || name.length > 253 || !dnsSubdomain.test(name)) {
    return { ok: false, error: 'spec.tokenSecret.name must be a DNS subdomain name' };
  }
  if (typeof key !== 'string' || key.length > 253 || !secretKey.test(key)) {
    return { ok: false, error: 'spec.tokenSecret.key must consist of alphanumerics, "-", "_" or "."' };
  }
  const labels = stringMap(spec['labels']);
  const annotations = stringMap(spec['annotations']);
  if (!labels || !annotations) return { ok: false, error: 'spec.tokenSecret labels and annotations must map strings to strings' };
  return { ok: true, value: { name, key, labels, annotations } };
}

function parseStatus(raw: unknown): UserGroupStatus {
  if (!isRecord(raw)) return {};
  const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const rotation = isRecord(raw['rotation'])
    ? { lastHandledRequest: str(raw['rotation']['lastHandledRequest']), lastRotationTime: str(raw['rotation']['lastRotationTime']) }
    : undefined;
  const conditions = Array.isArray(raw['conditions']) ? raw['conditions'].flatMap((c) => parseCondition(c)) : undefined;
  const adoption = isRecord(raw['adoption']) && typeof raw['adoption']['adoptedAt'] === 'string'
    ? { adoptedAt: raw['adoption']['adoptedAt'], tokenRotated: raw['adoption']['tokenRotated'] === true }
    : undefined;
  return dropUndefined({
    observedGeneration: num(raw['observedGeneration']),
    conditions,
    teamId: num(raw['teamId']),
    providedId: str(raw['providedId']),
    environmentTag: str(raw['environmentTag']),
    tokenSecretName: str(raw['tokenSecretName']),
    lastSyncTime: str(raw['lastSyncTime']),
    syncedHash: str(raw['syncedHash']),
    rotation: rotation && dropUndefined(rotation),
    adoption,
  });
}

function parseCondition(raw: unknown): Condition[] {
  if (!isRecord(raw)) return [];
  const { type, status, reason, message, lastTransitionTime, observedGeneration } = raw;
  if (typeof type !== 'string' || (status !== 'True' && status !== 'False' && status !== 'Unknown')) return [];
  return [
    dropUndefined({
      type,
      status,
      reason: typeof reason === 'string' ? reason : '',
      message: typeof message === 'string' ? message : '',
      lastTransitionTime: typeof lastTransitionTime === 'string' ? lastTransitionTime : '',
      observedGeneration: typeof observedGeneration === 'number' ? observedGeneration : undefined,
    }),
  ];
}

function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

export function readyCondition(status: UserGroupStatus): Condition | undefined {
  return status.conditions?.find((c) => c.type === 'Ready');
}
