// The UserGroup kind: spec and status types, and the parse that enforces the size limits on what a tenant writes.
import { intern, internRecent } from './intern.js';
import { createHash } from 'node:crypto';
import { DEFAULT_TOKEN_KEY, ROTATE_ANNOTATION, SYNC_ANNOTATION } from './constants.js';
import { parseGoDuration } from '../platform/go-duration.js';
import { parseMeta, stringMap, withAnnotations, type MetaKeep, type ObjectMeta, type Parsed } from './meta.js';
import { dropUndefined, isRecord } from '../platform/json-value.js';
import { RESTART_KINDS, type RestartKind, type RestartTarget } from './workload.js';

export interface UserGroupSpec {
  readonly userGroupId: string;
  readonly name: string;
  readonly mapping: Readonly<Record<string, string>> | undefined;
  readonly properties: Readonly<Record<string, unknown>> | undefined;
  readonly tokenSecret: TokenSecretSpec;
  readonly serviceRef: ServiceRef | undefined;
  readonly suspend: boolean;
  /** What deleting the UserGroup does to its token (spec.deletionPolicy): Retain (default) or Rotate once before it goes. */
  readonly deletionPolicy: DeletionPolicy;
  /** Scheduled rotation: the token is rotated once it is older than this (spec.rotation.maxTokenAge). */
  readonly maxTokenAgeMs: number | undefined;
  /** Workloads in the namespace to restart after the token changed (spec.rolloutRestartTargets). */
  readonly rolloutRestartTargets: readonly RestartTarget[];
}

export type DeletionPolicy = 'Retain' | 'Rotate';

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
  /** The value of the usergroup.dev/sync-requested-at annotation handled last (a PUT answered it). */
  readonly lastHandledSyncRequest?: string;
  readonly rotation?: {
    readonly lastHandledRequest?: string;
    readonly lastRotationTime?: string;
    /** When the stored token was obtained (created, adopted, rotated). */
    readonly tokenIssuedTime?: string;
    /** When the scheduled rotation falls due (spec.rotation.maxTokenAge, less the group's jitter). */
    readonly nextRotationTime?: string;
    /** The token the last handled rotation request revoked. */
    readonly lastRevoked?: {
      readonly request: string;
      /** When that token was current at the service (the accepted POST sent; the refused POST's token read). */
      readonly currentAt?: string;
      readonly revokedAt: string;
      /** ThisController: its POST. AnotherHolder: a holder of the account's key rotated it after the request. */
      readonly by: 'ThisController' | 'AnotherHolder';
    };
    /** A fleet follower waits for the primary to rotate for this request, since it first saw it. */
    readonly following?: { readonly request: string; readonly since: string };
  };
  /** spec.rolloutRestartTargets: the token the targets were restarted for (or found current when first listed). */
  readonly rolloutRestarts?: { readonly tokenIssuedTime?: string; readonly lastRestartTime?: string };
  /** Prompts of the consenting Pods' kubelets to rewrite the mounted token (--mounted-token-refreshes-per-minute). */
  readonly podPrompts?: { readonly tokenIssuedTime?: string; readonly lastPromptTime?: string; readonly pods?: number };
  /** Set when the first sync found the group already at the service and this UserGroup adopted it. */
  readonly adoption?: { readonly adoptedAt: string; readonly tokenRotated: boolean };
}

export interface UserGroup {
  readonly metadata: ObjectMeta;
  /** A spec the apiserver accepted but the operator cannot use is reported as InvalidSpec, not dropped. */
  readonly spec: Parsed<UserGroupSpec>;
  readonly status: UserGroupStatus;
}

/**
 * Size limits on what a tenant writes into a UserGroup. The controller caches every UserGroup it watches,
 * so each must have a bound for its memory to have one (docs/usergroup-reference.md "Limits"). The CRD refuses at admission
 * what its schema can see; the rest, and everything again for CRDs older than these limits (Helm never
 * upgrades CRDs), is checked here: an object over a limit parses to an invalid spec (Ready=False,
 * InvalidSpec) and keeps none of its payload.
 */
const LIMITS = {
  /** Top-level entries of spec.properties (admission: maxProperties). */
  propertiesEntries: 64,
  /** spec.properties as the JSON the service receives, in UTF-8 bytes (controller only: CEL cannot see it). */
  propertiesBytes: 16_384,
  /** Nesting of spec.properties (controller only): hashing and sending them recurse that deep. */
  propertiesDepth: 100,
  /** Entries of spec.mapping (admission: maxProperties). */
  mappingEntries: 64,
  /** Characters of a spec.mapping key (admission: CEL). */
  mappingKeyChars: 253,
  /** Characters of a spec.mapping value (admission: maxLength). */
  mappingValueChars: 1024,
  /** Characters of all spec.mapping keys and values together (admission: CEL). */
  mappingTotalChars: 16_384,
  /** Entries of spec.tokenSecret.labels and of spec.tokenSecret.annotations (admission: maxProperties). */
  tokenSecretEntries: 64,
  /** Characters of all spec.tokenSecret.annotations keys and values together (admission: CEL). */
  tokenSecretAnnotationsTotalChars: 16_384,
  /** Entries of spec.rolloutRestartTargets (admission: maxItems): each costs a GET and a PATCH per new token. */
  restartTargets: 16,
  /**
   * Characters of the rotation (and of the sync) request annotation (controller only: CEL cannot read annotations). Its value
   * is kept in the cache and copied into status and into the token Secret's bookkeeping annotations, which
   * the Secret cache must be able to keep too; a timestamp needs 20. 256 characters are at most 512 UTF-16
   * units, well under the 1024 beyond which the Secret cache treats a bookkeeping value as not ours.
   */
  rotateRequestChars: 256,
} as const;

/** The request annotations: each new value asks for one rotation, or one sync. */
const REQUEST_ANNOTATIONS = [ROTATE_ANNOTATION, SYNC_ANNOTATION] as const;

/**
 * The metadata of a UserGroup the operator reads: the request annotations and nothing else of the annotations
 * (kubectl's last-applied-configuration alone is a copy of the object), no labels, no owner references.
 */
const KEEP: MetaKeep = { annotations: REQUEST_ANNOTATIONS, labels: false, ownerReferences: false };

const tooLongMessage = (annotation: string): string =>
  `the ${annotation} annotation is longer than ${LIMITS.rotateRequestChars} characters; use a short value such as a timestamp`;

export function parseUserGroup(raw: unknown): Parsed<UserGroup> {
  if (!isRecord(raw)) return { ok: false, error: 'UserGroup is not an object' };
  const tooLong = overLongRequests(raw['metadata']);
  const meta = parseMeta(
    raw['metadata'],
    tooLong.length === 0 ? KEEP : { ...KEEP, annotations: REQUEST_ANNOTATIONS.filter((a) => !tooLong.some(([k]) => k === a)) },
  );
  if (!meta.ok) return meta;
  const [first] = tooLong;
  if (first !== undefined) {
    // The value is not kept, but a change to it must still be seen as one (the controller reconciles when the
    // annotation changes): a short stand-in that differs whenever the value does. Never acted on: the spec
    // is invalid as long as it is there.
    const standIns = Object.fromEntries(
      tooLong.map(([annotation, value]) => [
        annotation,
        `(over ${LIMITS.rotateRequestChars} characters) sha256:${createHash('sha256').update(value).digest('hex')}`,
      ]),
    );
    return {
      ok: true,
      value: {
        metadata: withAnnotations(meta.value, { ...meta.value.annotations, ...standIns }),
        spec: { ok: false, error: tooLongMessage(first[0]) },
        status: parseStatus(raw['status'], heldStrings(meta.value, undefined)),
      },
    };
  }
  const spec = parseSpec(raw['spec'], meta.value.name);
  return { ok: true, value: { metadata: meta.value, spec, status: parseStatus(raw['status'], heldStrings(meta.value, spec)) } };
}

/** The request annotations over their limit, with their values. */
function overLongRequests(metadata: unknown): [string, string][] {
  const annotations = isRecord(metadata) ? metadata['annotations'] : undefined;
  if (!isRecord(annotations)) return [];
  return REQUEST_ANNOTATIONS.flatMap((annotation): [string, string][] => {
    const value = annotations[annotation];
    return typeof value === 'string' && chars(value) > LIMITS.rotateRequestChars ? [[annotation, value]] : [];
  });
}

function parseSpec(raw: unknown, objectName: string): Parsed<UserGroupSpec> {
  if (!isRecord(raw)) return { ok: false, error: 'spec is missing' };
  const { userGroupId, name, mapping, properties, tokenSecret, serviceRef, suspend, rotation, rolloutRestartTargets, deletionPolicy } = raw;
  // Counted in code points, as the apiserver's maxLength and the service count (not UTF-16 units).
  const idLength = typeof userGroupId === 'string' ? chars(userGroupId) : 0;
  if (typeof userGroupId !== 'string' || idLength < 1 || idLength > 255) {
    return { ok: false, error: 'spec.userGroupId must be a string of 1 to 255 characters' };
  }
  if (typeof name !== 'string' || name === '') return { ok: false, error: 'spec.name must be a non-empty string' };
  let parsedMapping: Readonly<Record<string, string>> | undefined;
  if (mapping !== undefined && mapping !== null) {
    parsedMapping = stringMap(mapping);
    if (!parsedMapping) return { ok: false, error: 'spec.mapping must map strings to strings' };
    const tooLarge = mappingOverLimits(parsedMapping);
    if (tooLarge) return { ok: false, error: tooLarge };
  }
  if (properties !== undefined && properties !== null && !isRecord(properties)) {
    return { ok: false, error: 'spec.properties must be a JSON object' };
  }
  if (isRecord(properties)) {
    const tooLarge = propertiesOverLimits(properties);
    if (tooLarge) return { ok: false, error: tooLarge };
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
  if (deletionPolicy !== undefined && deletionPolicy !== null && deletionPolicy !== 'Retain' && deletionPolicy !== 'Rotate') {
    return { ok: false, error: 'spec.deletionPolicy must be Retain or Rotate' };
  }
  const maxTokenAge = parseRotation(rotation);
  if (!maxTokenAge.ok) return maxTokenAge;
  const targets = parseRestartTargets(rolloutRestartTargets);
  if (!targets.ok) return targets;
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
      deletionPolicy: deletionPolicy === 'Rotate' ? 'Rotate' : 'Retain',
      maxTokenAgeMs: maxTokenAge.value,
      rolloutRestartTargets: targets.value,
    },
  };
}

/** The smallest spec.rotation.maxTokenAge admitted (the CRD says the same); the operator's --min-token-age may raise it. */
export const MIN_MAX_TOKEN_AGE_MS = 1_000;

function parseRotation(raw: unknown): Parsed<number | undefined> {
  if (raw === undefined || raw === null) return { ok: true, value: undefined };
  if (!isRecord(raw)) return { ok: false, error: 'spec.rotation must be an object' };
  const age = raw['maxTokenAge'];
  if (age === undefined || age === null) return { ok: true, value: undefined };
  const ms = typeof age === 'string' ? parseGoDuration(age) : undefined;
  if (ms === undefined || ms < MIN_MAX_TOKEN_AGE_MS) {
    return { ok: false, error: 'spec.rotation.maxTokenAge must be a duration of at least 1s, such as 720h or 30m' };
  }
  return { ok: true, value: ms };
}

/** Shared by every UserGroup without rolloutRestartTargets (nearly all of them). */
const NO_TARGETS: Parsed<readonly RestartTarget[]> = { ok: true, value: Object.freeze([]) };

function parseRestartTargets(raw: unknown): Parsed<readonly RestartTarget[]> {
  if (raw === undefined || raw === null) return NO_TARGETS;
  const invalid = {
    ok: false,
    error: `spec.rolloutRestartTargets must be a list of at most ${LIMITS.restartTargets} distinct {kind: Deployment|StatefulSet|DaemonSet, name} entries`,
  } as const;
  if (!Array.isArray(raw) || raw.length > LIMITS.restartTargets) return invalid;
  const targets: RestartTarget[] = [];
  for (const entry of raw) {
    if (!isRecord(entry)) return invalid;
    const { kind, name } = entry;
    if (!RESTART_KINDS.includes(kind as RestartKind) || typeof name !== 'string' || name.length > 253 || !dnsSubdomain.test(name)) return invalid;
    if (targets.some((t) => t.kind === kind && t.name === name)) return invalid;
    targets.push({ kind: kind as RestartKind, name });
  }
  return { ok: true, value: targets };
}

/** The first limit spec.mapping breaks, worded like the CRD's messages; undefined within limits. */
function mappingOverLimits(mapping: Readonly<Record<string, string>>): string | undefined {
  const entries = Object.entries(mapping);
  if (entries.length > LIMITS.mappingEntries) return `spec.mapping has ${entries.length} entries; at most ${LIMITS.mappingEntries} are allowed`;
  let total = 0;
  for (const [k, v] of entries) {
    const keyChars = chars(k);
    if (keyChars < 1 || keyChars > LIMITS.mappingKeyChars) return `spec.mapping keys must be 1 to ${LIMITS.mappingKeyChars} characters`;
    const valueChars = chars(v);
    if (valueChars > LIMITS.mappingValueChars) return `spec.mapping values must be at most ${LIMITS.mappingValueChars} characters`;
    total += keyChars + valueChars;
  }
  if (total > LIMITS.mappingTotalChars) return `spec.mapping must be at most ${LIMITS.mappingTotalChars} characters in total (keys and values)`;
  return undefined;
}

/** The first limit spec.properties breaks; undefined within limits. Depth first: serialising recurses. */
function propertiesOverLimits(properties: Record<string, unknown>): string | undefined {
  const entries = Object.keys(properties).length;
  if (entries > LIMITS.propertiesEntries) return `spec.properties has ${entries} entries; at most ${LIMITS.propertiesEntries} are allowed`;
  if (nestedDeeperThan(properties, LIMITS.propertiesDepth)) return `spec.properties is nested more than ${LIMITS.propertiesDepth} levels deep`;
  // Exactly what the service would receive; at most the object's own size again, and only for this call.
  const bytes = Buffer.byteLength(JSON.stringify(properties));
  if (bytes > LIMITS.propertiesBytes) return `spec.properties is ${bytes} bytes as JSON; at most ${LIMITS.propertiesBytes} are allowed`;
  return undefined;
}

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

/**
 * Length in code points, as the apiserver's maxLength and CEL's size() count it (an emoji is one, not two
 * UTF-16 units), without copying the string.
 */
function chars(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const secretKey = /^[-._a-zA-Z0-9]+$/;

function parseTokenSecret(raw: unknown, objectName: string): Parsed<TokenSecretSpec> {
  const spec = raw ?? {};
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
  for (const [field, map] of [
    ['labels', labels],
    ['annotations', annotations],
  ] as const) {
    const n = Object.keys(map).length;
    if (n > LIMITS.tokenSecretEntries)
      return { ok: false, error: `spec.tokenSecret.${field} has ${n} entries; at most ${LIMITS.tokenSecretEntries} are allowed` };
  }
  // Label keys and values have their own small limits (label syntax), which the CRD of every release from 0.1 on checks at admission.
  let total = 0;
  for (const [k, v] of Object.entries(annotations)) total += chars(k) + chars(v);
  if (total > LIMITS.tokenSecretAnnotationsTotalChars) {
    return {
      ok: false,
      error: `spec.tokenSecret.annotations must be at most ${LIMITS.tokenSecretAnnotationsTotalChars} characters in total (keys and values)`,
    };
  }
  return { ok: true, value: { name, key, labels, annotations } };
}

const timestamp = (v: unknown): string | undefined => (typeof v === 'string' ? internRecent(v) : undefined);

/**
 * Strings the parsed object already holds that its status repeats once synced: the id (providedId), the Secret's name,
 * the request values handled. The cache keeps one copy instead of two (JSON.parse makes one per occurrence).
 */
function heldStrings(meta: ObjectMeta, spec: Parsed<UserGroupSpec> | undefined): readonly string[] {
  const held = [meta.name, ...Object.values(meta.annotations)];
  if (spec?.ok) held.push(spec.value.userGroupId, spec.value.tokenSecret.name);
  return held;
}

type RotationStatus = NonNullable<UserGroupStatus['rotation']>;

/** status.rotation.lastRevoked as the controller writes it; anything else reads as absent. */
function parseRevoked(raw: unknown, str: (v: unknown) => string | undefined): RotationStatus['lastRevoked'] {
  if (!isRecord(raw)) return undefined;
  const request = str(raw['request']);
  const revokedAt = timestamp(raw['revokedAt']);
  const by = raw['by'];
  if (request === undefined || revokedAt === undefined || (by !== 'ThisController' && by !== 'AnotherHolder')) return undefined;
  const currentAt = timestamp(raw['currentAt']);
  return { request, revokedAt, by, ...(currentAt === undefined ? {} : { currentAt }) };
}

/** status.rotation.following as the controller writes it; anything else reads as absent. */
function parseFollowing(raw: unknown, str: (v: unknown) => string | undefined): RotationStatus['following'] {
  if (!isRecord(raw)) return undefined;
  const request = str(raw['request']);
  const since = timestamp(raw['since']);
  return request === undefined || since === undefined ? undefined : { request, since };
}

function parseStatus(raw: unknown, held: readonly string[]): UserGroupStatus {
  if (!isRecord(raw)) return {};
  const str = (v: unknown): string | undefined => (typeof v === 'string' ? (held.find((h) => h === v) ?? v) : undefined);
  const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const rotation = isRecord(raw['rotation'])
    ? {
        lastHandledRequest: str(raw['rotation']['lastHandledRequest']),
        lastRotationTime: timestamp(raw['rotation']['lastRotationTime']),
        tokenIssuedTime: str(raw['rotation']['tokenIssuedTime']),
        nextRotationTime: str(raw['rotation']['nextRotationTime']),
        lastRevoked: parseRevoked(raw['rotation']['lastRevoked'], str),
        following: parseFollowing(raw['rotation']['following'], str),
      }
    : undefined;
  const conditions = Array.isArray(raw['conditions']) ? parseConditions(raw['conditions']) : undefined;
  const restarts = isRecord(raw['rolloutRestarts'])
    ? dropUndefined({ tokenIssuedTime: str(raw['rolloutRestarts']['tokenIssuedTime']), lastRestartTime: str(raw['rolloutRestarts']['lastRestartTime']) })
    : undefined;
  const prompts = isRecord(raw['podPrompts'])
    ? dropUndefined({
        tokenIssuedTime: str(raw['podPrompts']['tokenIssuedTime']),
        lastPromptTime: str(raw['podPrompts']['lastPromptTime']),
        pods: num(raw['podPrompts']['pods']),
      })
    : undefined;
  const adoption =
    isRecord(raw['adoption']) && typeof raw['adoption']['adoptedAt'] === 'string'
      ? { adoptedAt: raw['adoption']['adoptedAt'], tokenRotated: raw['adoption']['tokenRotated'] === true }
      : undefined;
  return dropUndefined({
    observedGeneration: num(raw['observedGeneration']),
    conditions,
    teamId: num(raw['teamId']),
    providedId: str(raw['providedId']),
    // One of a few values ("Customer" …) across every group.
    environmentTag: typeof raw['environmentTag'] === 'string' ? intern(raw['environmentTag']) : undefined,
    tokenSecretName: str(raw['tokenSecretName']),
    lastSyncTime: timestamp(raw['lastSyncTime']),
    syncedHash: str(raw['syncedHash']),
    lastHandledSyncRequest: str(raw['lastHandledSyncRequest']),
    rotation: rotation && dropUndefined(rotation),
    rolloutRestarts: restarts,
    podPrompts: prompts,
    adoption,
  });
}

/**
 * The conditions in an array of their exact length, each object built whole: every cached UserGroup holds one (flatMap
 * leaves room for 16 entries, and an object filled key by key keeps its fields in a second allocation).
 */
function parseConditions(raw: readonly unknown[]): Condition[] {
  const parsed: Condition[] = [];
  for (const c of raw) {
    const condition = parseCondition(c);
    if (condition) parsed.push(condition);
  }
  return parsed.slice();
}

function parseCondition(raw: unknown): Condition | undefined {
  if (!isRecord(raw)) return undefined;
  const { type, status, reason, message, lastTransitionTime, observedGeneration } = raw;
  if (typeof type !== 'string' || (status !== 'True' && status !== 'False' && status !== 'Unknown')) return undefined;
  const t = intern(type);
  const why = typeof reason === 'string' ? intern(reason) : '';
  const text = typeof message === 'string' ? message : '';
  const since = typeof lastTransitionTime === 'string' ? internRecent(lastTransitionTime) : '';
  // Two literals rather than a spread: a spread copy keeps the added field in a second allocation.
  return typeof observedGeneration === 'number'
    ? { type: t, status, reason: why, message: text, lastTransitionTime: since, observedGeneration }
    : { type: t, status, reason: why, message: text, lastTransitionTime: since };
}

export function findReadyCondition(status: UserGroupStatus): Condition | undefined {
  return status.conditions?.find((c) => c.type === 'Ready');
}
