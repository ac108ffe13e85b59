/**
 * The table of malformed and hostile manifests thrown at a running controller by
 * test/reliability/bad-input.test.ts. Each case is applied with the real kubectl and names the outcome
 * it must have:
 *
 * - `rejected`: kubectl exits non-zero and its stderr says what is wrong (the apiserver's structural
 *   schema, CEL rules, strict field validation, size limits, or kubectl's own parser); nothing is stored
 *   (or, for an update of a good object, the object keeps its spec).
 * - `condition`: accepted; the controller reports Ready=False with a specific reason and message, and a
 *   Warning Event (where the controller records one).
 * - `synced`: hostile but legal (control characters, unicode, odd YAML, a rotation value and sizes at their
 *   limits, a forged token Secret); accepted, and the controller syncs it: Ready=True and the Secret holds the
 *   service's token.
 *
 * Cases run in two namespaces: `bad` (watched by the same controller; accepted failing objects stay there)
 * and `good` (the good groups; only rejected updates, a forged Secret, and temporary objects that the test
 * deletes before it checks the invariant).
 */
export interface CaseContext {
  readonly goodNs: string;
  readonly badNs: string;
  /** The simulator (loopback http). */
  readonly simUrl: string;
  /** Good groups: `good[i]` exists, is synced and gets updates and rotations during the barrage. */
  readonly good: readonly { readonly name: string; readonly userGroupId: string }[];
  /** A UserGroupService in the good namespace (with a working API key), for the cross-namespace case. */
  readonly goodService: string;
  /**
   * Another account at the simulator, for objects whose properties could break the simulator's views
   * (deep nesting): the invariant reads the good account's groups only.
   */
  readonly isolatedApiKey: string;
}

type Match = string | RegExp;

export type Expected =
  | {
      readonly kind: 'rejected';
      /** A substring (or pattern) of kubectl's stderr that tells the user what is wrong. */
      readonly error: Match;
    }
  | {
      readonly kind: 'condition';
      readonly reason: string;
      readonly message: Match;
      /** The Warning Event the controller records (reason, and a pattern of its note); none for Suspended. */
      readonly event?: { readonly reason: string; readonly note: Match };
      /** A Secret the case tried to take over: afterwards it must not be owned by the case's UserGroup. */
      readonly untouchedSecret?: string;
    }
  | {
      readonly kind: 'synced';
      /** kubectl succeeded and its stderr matches this (a warning), else stderr must be empty. */
      readonly stderr?: Match;
      /** The stored spec must contain these values (what the apiserver made of the manifest). */
      readonly stored?: Readonly<Record<string, unknown>>;
      /** Rotations the simulator must have executed for this userGroupId (checked exactly). */
      readonly rotations?: number;
    };

export interface BadCase {
  /** Unique slug; the name of the object the case creates unless `object` says otherwise. */
  readonly id: string;
  readonly what: string;
  /** Namespace the case is applied in. */
  readonly ns: 'bad' | 'good';
  /** Manifests applied (and accepted) first, e.g. an unowned Secret or a UserGroupService. */
  readonly before?: (ctx: CaseContext) => readonly string[];
  /** A UserGroup (in the case's namespace) that must be Synced before the case runs (an older duplicate). */
  readonly beforeSynced?: string;
  /** kubectl arguments after `-n <ns>`; default `apply -f -` with the manifest on stdin. */
  readonly args?: (ctx: CaseContext) => readonly string[];
  /** What kubectl reads on stdin (omitted: no stdin). */
  readonly stdin?: (ctx: CaseContext) => string;
  /**
   * The object the outcome is about: for `rejected`, its kind and name must not exist afterwards (a create)
   * or keep its userGroupId and suspend=false (an update of a good group, `update: true`); for `condition` and
   * `synced`, the UserGroup whose status is checked. Undefined: nothing to look up (kubectl refused to parse).
   */
  readonly object?: (ctx: CaseContext) => {
    readonly kind: 'UserGroup' | 'UserGroupService' | 'Secret';
    readonly name: string;
    readonly update?: { readonly userGroupId: string };
  };
  /** Accepted in the good namespace: deleted before the invariant is checked. */
  readonly temporary?: boolean;
  readonly expected: Expected;
}

const apiVersion = 'usergroup.dev/v1';

/** JSON (what kubectl reads as well as YAML), so no YAML 1.1 surprise unless a case asks for one. */
const json = (manifest: Record<string, unknown>): string => JSON.stringify(manifest);

const ugManifest = (name: string, spec: unknown, extra: { metadata?: Record<string, unknown>; top?: Record<string, unknown> } = {}): string =>
  json({ apiVersion, kind: 'UserGroup', metadata: { name, ...extra.metadata }, ...(spec === undefined ? {} : { spec }), ...extra.top });

const ugsManifest = (name: string, spec: unknown): string => json({ apiVersion, kind: 'UserGroupService', metadata: { name }, spec });

const secretManifest = (name: string, body: Record<string, unknown>): string =>
  json({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, type: 'Opaque', ...body });
/** An API-key Secret a UserGroupService may use: it opts in by its type. */
const apiKeySecretManifest = (name: string, body: Record<string, unknown>): string => secretManifest(name, { type: 'usergroup.dev/api-key', ...body });

/** A properties object whose JSON is about `bytes` long (one big string). */
const bigProperties = (bytes: number): Record<string, unknown> => ({ blob: 'x'.repeat(bytes) });

/**
 * The same string one level down, where admission cannot see it (the schema checks top-level entries and
 * strings only; CEL sees nothing of free-form values): what reaches the controller's 16384-byte check.
 */
const nestedBigProperties = (bytes: number): Record<string, unknown> => ({ payload: { blob: 'x'.repeat(bytes) } });

/** `n` entries k00, k01, … (three characters each up to k99) with the given value. */
const entries = (n: number, value: string): Record<string, string> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${String(i).padStart(2, '0')}`, value]));

const rotateTooLong = 'annotation is longer than 256 characters; use a short value such as a timestamp';

/** A properties object nested `depth` levels deep, as JSON text (JSON.stringify itself recurses). */
const nestedJson = (depth: number): string => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

const ugWithNestedProperties = (name: string, userGroupId: string, depth: number, serviceRef?: string): string =>
  `{"apiVersion":"${apiVersion}","kind":"UserGroup","metadata":{"name":"${name}"},"spec":{"userGroupId":"${userGroupId}","name":"Nested",` +
  `${serviceRef ? `"serviceRef":{"name":"${serviceRef}"},` : ''}"properties":${nestedJson(depth)}}}`;

const base = (id: string): { userGroupId: string; name: string } => ({ userGroupId: `${id}-id`, name: `Case ${id}` });

/** The object of a create: it must not exist after a rejection, and carries the status of an accepted one. */
const ug = (name: string) => (): { kind: 'UserGroup'; name: string } => ({ kind: 'UserGroup', name });
const ugOf = (id: string) => ug(id);

const rejected = (error: Match): Expected => ({ kind: 'rejected', error });

/** A UserGroup create in the bad namespace that the apiserver must refuse. */
const badUg = (
  id: string,
  what: string,
  spec: unknown,
  error: Match,
  extra: { metadata?: Record<string, unknown>; top?: Record<string, unknown> } = {},
): BadCase => ({
  id,
  what,
  ns: 'bad',
  stdin: () => ugManifest(id, spec, extra),
  object: ugOf(id),
  expected: rejected(error),
});

/** An update of good group `i` that the apiserver must refuse; the group keeps its spec and stays Ready. */
const badUpdate = (id: string, what: string, i: number, spec: (g: { name: string; userGroupId: string }) => unknown, error: Match): BadCase => ({
  id,
  what,
  ns: 'good',
  stdin: (ctx) => ugManifest(goodAt(ctx, i).name, spec(goodAt(ctx, i))),
  object: (ctx) => ({ kind: 'UserGroup', name: goodAt(ctx, i).name, update: { userGroupId: goodAt(ctx, i).userGroupId } }),
  expected: rejected(error),
});

function goodAt(ctx: CaseContext, i: number): { name: string; userGroupId: string } {
  const g = ctx.good[i % ctx.good.length];
  if (!g) throw new Error('no good groups');
  return g;
}

const notSubdomain = 'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters';
const bookkeeping = "are the operator's own bookkeeping annotations and cannot be set in spec.tokenSecret.annotations";
const httpsOnly = 'spec.url must use https unless it is a loopback address or spec.allowInsecure is true';

export const badCases: readonly BadCase[] = [
  // ---- wrong types -------------------------------------------------------------------------------------
  badUg('t-ugid-number', 'spec.userGroupId a number', { userGroupId: 42, name: 'Acme' }, 'spec.userGroupId in body must be of type string: "integer"'),
  badUg('t-ugid-bool', 'spec.userGroupId a boolean', { userGroupId: true, name: 'Acme' }, 'spec.userGroupId in body must be of type string: "boolean"'),
  badUg('t-mapping-list', 'spec.mapping a list', { ...base('t-mapping-list'), mapping: ['a', 'b'] }, 'spec.mapping in body must be of type object: "array"'),
  badUg(
    't-properties-string',
    'spec.properties a string',
    { ...base('t-properties-string'), properties: 'plan=gold' },
    'spec.properties in body must be of type object: "string"',
  ),
  badUg(
    't-properties-list',
    'spec.properties a list',
    { ...base('t-properties-list'), properties: [1, 2] },
    'spec.properties in body must be of type object: "array"',
  ),
  badUg(
    't-suspend-yes',
    'spec.suspend "yes" (a quoted string)',
    { ...base('t-suspend-yes'), suspend: 'yes' },
    'spec.suspend in body must be of type boolean: "string"',
  ),
  badUg('t-spec-string', 'spec a string', 'userGroupId=acme', 'spec in body must be of type object: "string"'),
  badUg(
    't-mapping-number',
    'a number in spec.mapping',
    { ...base('t-mapping-number'), mapping: { tenant: 7 } },
    'spec.mapping.tenant in body must be of type string: "integer"',
  ),
  badUg('t-mapping-object', 'an object in spec.mapping', { ...base('t-mapping-object'), mapping: { tenant: { schema: 'x' } } }, /spec\.mapping\.tenant/),
  badUg(
    't-mapping-nested-list',
    'a list in spec.mapping',
    { ...base('t-mapping-nested-list'), mapping: { tenant: ['x'] } },
    'spec.mapping.tenant in body must be of type string: "array"',
  ),
  // ---- missing or empty required fields ----------------------------------------------------------------
  badUg('m-no-spec', 'no spec', undefined, 'spec: Required value'),
  badUg('m-spec-null', 'spec: null (pruned, so missing)', null, 'spec: Required value'),
  badUg('m-no-ugid', 'no spec.userGroupId', { name: 'Acme' }, 'spec.userGroupId: Required value'),
  badUg('m-ugid-null', 'spec.userGroupId: null', { userGroupId: null, name: 'Acme' }, 'spec.userGroupId: Required value'),
  badUg('m-no-name', 'no spec.name', { userGroupId: 'm-no-name-id' }, 'spec.name: Required value'),
  badUg('m-ugid-empty', 'spec.userGroupId ""', { userGroupId: '', name: 'Acme' }, /spec\.userGroupId: Invalid value: "": .*at least 1 chars long/),
  badUg('m-name-empty', 'spec.name ""', { userGroupId: 'm-name-empty-id', name: '' }, /spec\.name: Invalid value: "": .*at least 1 chars long/),
  // ---- sizes -------------------------------------------------------------------------------------------
  badUg(
    's-ugid-256',
    'spec.userGroupId of 256 characters',
    { userGroupId: 'x'.repeat(256), name: 'Acme' },
    'spec.userGroupId: Too long: may not be more than 255',
  ),
  badUg(
    's-ugid-256-emoji',
    'spec.userGroupId of 256 emoji (counted in characters)',
    { userGroupId: '\u{1F600}'.repeat(256), name: 'Acme' },
    'spec.userGroupId: Too long: may not be more than 255',
  ),
  badUg('s-name-1025', 'spec.name of 1025 "ü"', { userGroupId: 's-name-1025-id', name: 'ü'.repeat(1025) }, 'spec.name: Too long: may not be more than 1024'),
  // Size limits (docs/usergroup-reference.md "Limits"): what admission can see.
  badUg(
    's-mapping-65',
    'spec.mapping with 65 entries',
    { ...base('s-mapping-65'), mapping: entries(65, 'db') },
    'spec.mapping: Too many: 65: must have at most 64 items',
  ),
  badUg(
    's-mapping-key-254',
    'a spec.mapping key of 254 characters',
    { ...base('s-mapping-key-254'), mapping: { ['s'.repeat(254)]: 'db' } },
    'spec.mapping keys must be 1 to 253 characters',
  ),
  badUg(
    's-mapping-value-1025',
    'a spec.mapping value of 1025 characters',
    { ...base('s-mapping-value-1025'), mapping: { sales: 'd'.repeat(1025) } },
    'spec.mapping.sales: Too long: may not be more than 1024',
  ),
  badUg(
    's-mapping-total',
    'spec.mapping of 17 × 1024 characters (16384 in all at most)',
    { ...base('s-mapping-total'), mapping: entries(17, 'd'.repeat(1021)) },
    'spec.mapping must be at most 16384 characters in total (keys and values)',
  ),
  badUg(
    's-props-65',
    'spec.properties with 65 top-level entries',
    { ...base('s-props-65'), properties: entries(65, 'v') },
    'spec.properties: Too many: 65: must have at most 64 items',
  ),
  badUg(
    's-props-string-16385',
    'a top-level spec.properties string of 16385 characters',
    { ...base('s-props-string-16385'), properties: bigProperties(16_385) },
    'spec.properties.blob: Too long: may not be more than 16384',
  ),
  badUg(
    's-ts-annotations-total',
    'spec.tokenSecret.annotations of more than 16384 characters',
    { ...base('s-ts-annotations-total'), tokenSecret: { annotations: { 'example.com/note': 'n'.repeat(16_384) } } },
    'spec.tokenSecret.annotations must be at most 16384 characters in total (keys and values)',
  ),
  {
    // Client-side apply copies the whole object into the last-applied-configuration annotation (256 KiB max).
    id: 's-props-300k-csa',
    what: '300 KB properties with client-side kubectl apply',
    ns: 'bad',
    stdin: () => ugManifest('s-props-300k-csa', { ...base('s-props-300k-csa'), properties: bigProperties(300_000) }),
    object: ugOf('s-props-300k-csa'),
    expected: rejected('metadata.annotations: Too long: may not be more than 262144 bytes'),
  },
  {
    // Nested, or the schema's 16384-character limit on top-level strings would refuse it first.
    id: 's-props-1600k',
    what: "1.6 MB nested properties (server-side apply): over etcd's request limit",
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () => ugManifest('s-props-1600k', { ...base('s-props-1600k'), properties: nestedBigProperties(1_600_000) }),
    object: ugOf('s-props-1600k'),
    expected: rejected('etcdserver: request is too large'),
  },
  {
    id: 's-props-3200k',
    what: "3.2 MB properties: over the apiserver's 3 MiB request limit",
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () => ugManifest('s-props-3200k', { ...base('s-props-3200k'), properties: bigProperties(3_200_000) }),
    object: ugOf('s-props-3200k'),
    expected: rejected('Request entity too large: limit is 3145728'),
  },
  {
    id: 's-props-nest-10001',
    what: 'properties nested 10,001 levels deep',
    ns: 'bad',
    stdin: () => ugWithNestedProperties('s-props-nest-10001', 's-props-nest-10001-id', 10_001),
    object: ugOf('s-props-nest-10001'),
    expected: rejected('exceeded max depth'),
  },
  {
    id: 's-rotate-300k',
    what: 'a rotation request value of 300 KB (server-side apply)',
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () =>
      ugManifest('s-rotate-300k', base('s-rotate-300k'), { metadata: { annotations: { 'usergroup.dev/rotate-requested-at': 'r'.repeat(300_000) } } }),
    object: ugOf('s-rotate-300k'),
    expected: rejected('metadata.annotations: Too long: may not be more than 262144 bytes'),
  },
  // ---- metadata ----------------------------------------------------------------------------------------
  badUg('grüppe', 'metadata.name with a non-ASCII letter', base('n-unicode'), notSubdomain),
  badUg('a\u0007b\nc', 'metadata.name with control characters', base('n-control'), notSubdomain),
  badUg('Acme', 'metadata.name with upper case', base('n-upper'), notSubdomain),
  badUg('n'.repeat(254), 'metadata.name of 254 characters', base('n-254'), 'must be no more than 253 characters'),
  badUg('n-label-key', 'an invalid label key on the UserGroup', base('n-label-key'), 'metadata.labels: Invalid value: "bad key"', {
    metadata: { labels: { 'bad key': 'x' } },
  }),
  {
    id: 'n-generate-name',
    what: 'metadata.generateName instead of a name',
    ns: 'bad',
    stdin: () => json({ apiVersion, kind: 'UserGroup', metadata: { generateName: 'n-generate-' }, spec: base('n-generate-name') }),
    expected: rejected('cannot use generate name with apply'),
  },
  // ---- tokenSecret ---------------------------------------------------------------------------------------
  badUg(
    'ts-name-upper',
    'spec.tokenSecret.name with upper case',
    { ...base('ts-name-upper'), tokenSecret: { name: 'Acme-Token' } },
    'spec.tokenSecret.name in body should match',
  ),
  badUg(
    'ts-name-254',
    'spec.tokenSecret.name of 254 characters',
    { ...base('ts-name-254'), tokenSecret: { name: 't'.repeat(254) } },
    'spec.tokenSecret.name: Too long: may not be more than 253',
  ),
  badUg(
    'ts-key-dotdot',
    'spec.tokenSecret.key ".."',
    { ...base('ts-key-dotdot'), tokenSecret: { key: '..' } },
    'spec.tokenSecret.key must not be "." or start with ".."',
  ),
  badUg(
    'ts-key-dot',
    'spec.tokenSecret.key "."',
    { ...base('ts-key-dot'), tokenSecret: { key: '.' } },
    'spec.tokenSecret.key must not be "." or start with ".."',
  ),
  badUg('ts-key-slash', 'spec.tokenSecret.key "/x"', { ...base('ts-key-slash'), tokenSecret: { key: '/x' } }, 'spec.tokenSecret.key in body should match'),
  badUg(
    'ts-label-key',
    'an invalid key in spec.tokenSecret.labels',
    { ...base('ts-label-key'), tokenSecret: { labels: { '-team-': 'a' } } },
    'spec.tokenSecret.labels keys must be valid label keys',
  ),
  badUg(
    'ts-annotation-key',
    'an invalid key in spec.tokenSecret.annotations',
    { ...base('ts-annotation-key'), tokenSecret: { annotations: { 'a/b/c': 'x' } } },
    'spec.tokenSecret.annotations keys must be valid annotation keys',
  ),
  badUg(
    'ts-reserved-sha',
    'usergroup.dev/token-sha256 in spec.tokenSecret.annotations',
    { ...base('ts-reserved-sha'), tokenSecret: { annotations: { 'usergroup.dev/token-sha256': '0'.repeat(64) } } },
    bookkeeping,
  ),
  badUg(
    'ts-reserved-pending',
    'usergroup.dev/rotation-pending in spec.tokenSecret.annotations',
    { ...base('ts-reserved-pending'), tokenSecret: { annotations: { 'usergroup.dev/rotation-pending': '1' } } },
    bookkeeping,
  ),
  // ---- serviceRef, unknown fields, wrong apiVersion/kind -------------------------------------------------
  badUg(
    'sr-namespace',
    'spec.serviceRef.namespace (a UserGroupService of another namespace)',
    { ...base('sr-namespace'), serviceRef: { name: 'team-a', namespace: 'kube-system' } },
    'unknown field "spec.serviceRef.namespace"',
  ),
  badUg('sr-empty', 'spec.serviceRef without a name', { ...base('sr-empty'), serviceRef: {} }, 'spec.serviceRef.name: Required value'),
  badUg(
    'u-spec-field',
    "an unknown field in spec (kubectl's default strict validation)",
    { ...base('u-spec-field'), colour: 'blue' },
    'unknown field "spec.colour"',
  ),
  badUg('u-top-field', 'an unknown top-level field', base('u-top-field'), 'strict decoding error: unknown field "extra"', { top: { extra: 1 } }),
  {
    id: 'k-apiversion',
    what: 'apiVersion usergroup.dev/v2 (no such version)',
    ns: 'bad',
    stdin: () => json({ apiVersion: 'usergroup.dev/v2', kind: 'UserGroup', metadata: { name: 'k-apiversion' }, spec: base('k-apiversion') }),
    object: ugOf('k-apiversion'),
    expected: rejected('no matches for kind "UserGroup" in version "usergroup.dev/v2"'),
  },
  {
    id: 'k-kind',
    what: 'kind UserGroups (no such kind)',
    ns: 'bad',
    stdin: () => json({ apiVersion, kind: 'UserGroups', metadata: { name: 'k-kind' }, spec: base('k-kind') }),
    object: ugOf('k-kind'),
    expected: rejected('no matches for kind "UserGroups" in version "usergroup.dev/v1"'),
  },
  // ---- YAML the parser refuses -----------------------------------------------------------------------------
  {
    id: 'y-aliases',
    what: 'a YAML alias bomb ("billion laughs") in properties',
    ns: 'bad',
    stdin: () => aliasBomb('y-aliases'),
    object: ugOf('y-aliases'),
    expected: rejected('excessive aliasing'),
  },
  {
    id: 'y-tab',
    what: 'YAML indented with a tab',
    ns: 'bad',
    stdin: () => `apiVersion: ${apiVersion}\nkind: UserGroup\nmetadata: {name: y-tab}\nspec:\n\tuserGroupId: y-tab-id\n\tname: Tab\n`,
    object: ugOf('y-tab'),
    expected: rejected('found character that cannot start any token'),
  },
  // ---- updates of good groups (each must leave the group as it was) ------------------------------------
  badUpdate(
    'up-ugid',
    'a changed userGroupId on a good group',
    0,
    (g) => ({ userGroupId: `${g.userGroupId}-changed`, name: 'Changed' }),
    'userGroupId is immutable; create a new UserGroup instead',
  ),
  badUpdate(
    'up-suspend',
    'spec.suspend "yes" on a good group',
    1,
    (g) => ({ userGroupId: g.userGroupId, name: 'Suspend?', suspend: 'yes' }),
    'spec.suspend in body must be of type boolean: "string"',
  ),
  badUpdate(
    'up-mapping',
    'spec.mapping a list on a good group',
    2,
    (g) => ({ userGroupId: g.userGroupId, name: 'Mapping', mapping: ['a'] }),
    'spec.mapping in body must be of type object: "array"',
  ),
  // Client-side apply merges into the properties the good traffic writes (two entries): 65 to 67 in all.
  badUpdate(
    'up-props-65',
    'spec.properties with 65 entries on a good group',
    8,
    (g) => ({ userGroupId: g.userGroupId, name: 'Props', properties: entries(65, 'v') }),
    /spec\.properties: Too many: 6[5-7]: must have at most 64 items/,
  ),
  {
    id: 'up-patch-null',
    what: 'kubectl patch removing spec.userGroupId of a good group',
    ns: 'good',
    args: (ctx) => ['patch', 'usergroup', goodAt(ctx, 3).name, '--type', 'merge', '-p', '{"spec":{"userGroupId":null}}'],
    object: (ctx) => ({ kind: 'UserGroup', name: goodAt(ctx, 3).name, update: { userGroupId: goodAt(ctx, 3).userGroupId } }),
    expected: rejected('spec.userGroupId: Required value'),
  },
  // ---- UserGroupServices the apiserver refuses -----------------------------------------------------------------
  {
    id: 'svc-http-remote',
    what: 'UserGroupService with plain http to a remote host',
    ns: 'bad',
    stdin: () => ugsManifest('svc-http-remote', { url: 'http://analytics.example.com', apiKeySecretRef: { name: 'svc-key' } }),
    object: () => ({ kind: 'UserGroupService', name: 'svc-http-remote' }),
    expected: rejected(httpsOnly),
  },
  {
    id: 'svc-http-lookalike',
    what: 'UserGroupService with http://localhost.evil.example',
    ns: 'bad',
    stdin: () => ugsManifest('svc-http-lookalike', { url: 'http://localhost.evil.example:8080', apiKeySecretRef: { name: 'svc-key' } }),
    object: () => ({ kind: 'UserGroupService', name: 'svc-http-lookalike' }),
    expected: rejected(httpsOnly),
  },
  {
    id: 'svc-url-number',
    what: 'UserGroupService with spec.url a number',
    ns: 'bad',
    stdin: () => ugsManifest('svc-url-number', { url: 443, apiKeySecretRef: { name: 'svc-key' } }),
    object: () => ({ kind: 'UserGroupService', name: 'svc-url-number' }),
    expected: rejected('spec.url in body must be of type string: "integer"'),
  },
  {
    id: 'svc-credentials',
    what: 'UserGroupService with credentials in the URL',
    ns: 'bad',
    stdin: () => ugsManifest('svc-credentials', { url: 'https://user:secret@analytics.example.com', apiKeySecretRef: { name: 'svc-key' } }),
    object: () => ({ kind: 'UserGroupService', name: 'svc-credentials' }),
    expected: rejected('spec.url must not contain credentials'),
  },
  {
    id: 'svc-secret-namespace',
    what: 'UserGroupService reading an API-key Secret of another namespace',
    ns: 'bad',
    stdin: () => ugsManifest('svc-secret-namespace', { url: 'https://analytics.example.com', apiKeySecretRef: { name: 'svc-key', namespace: 'kube-system' } }),
    object: () => ({ kind: 'UserGroupService', name: 'svc-secret-namespace' }),
    expected: rejected('unknown field "spec.apiKeySecretRef.namespace"'),
  },
  {
    id: 'svc-insecure-string',
    what: 'UserGroupService with allowInsecure "true" (a string)',
    ns: 'bad',
    stdin: () => ugsManifest('svc-insecure-string', { url: 'http://analytics.example.com', apiKeySecretRef: { name: 'svc-key' }, allowInsecure: 'true' }),
    object: () => ({ kind: 'UserGroupService', name: 'svc-insecure-string' }),
    expected: rejected('spec.allowInsecure in body must be of type boolean: "string"'),
  },
  // ---- Secrets the apiserver refuses --------------------------------------------------------------------------
  {
    id: 'sec-base64',
    what: 'a Secret whose data is not base64',
    ns: 'bad',
    stdin: () => secretManifest('sec-base64', { data: { apiKey: 'not base64!!' } }),
    object: () => ({ kind: 'Secret', name: 'sec-base64' }),
    expected: rejected('illegal base64 data'),
  },
  {
    id: 'sec-key',
    what: 'a Secret with the data key "a/b"',
    ns: 'bad',
    stdin: () => secretManifest('sec-key', { stringData: { 'a/b': 'x' } }),
    object: () => ({ kind: 'Secret', name: 'sec-key' }),
    expected: rejected('a valid config key must consist of alphanumeric characters'),
  },

  // ==== accepted: the controller reports a condition ===========================================================
  {
    id: 'c-ref-missing',
    what: 'serviceRef to a UserGroupService that does not exist',
    ns: 'bad',
    stdin: () => ugManifest('c-ref-missing', { ...base('c-ref-missing'), serviceRef: { name: 'no-such-service' } }),
    object: ugOf('c-ref-missing'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionNotFound',
      message: /UserGroupService \S+\/no-such-service does not exist/,
      event: { reason: 'ConnectionNotFound', note: 'no-such-service does not exist' },
    },
  },
  {
    id: 'c-ref-other-ns',
    what: 'serviceRef to a UserGroupService that exists only in another namespace',
    ns: 'bad',
    stdin: (ctx) => ugManifest('c-ref-other-ns', { ...base('c-ref-other-ns'), serviceRef: { name: ctx.goodService } }),
    object: ugOf('c-ref-other-ns'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionNotFound',
      message: 'does not exist (a UserGroup can only use one in its own namespace)',
      event: { reason: 'ConnectionNotFound', note: 'does not exist' },
    },
  },
  {
    id: 'c-svc-no-secret',
    what: 'UserGroupService whose API-key Secret does not exist',
    ns: 'bad',
    before: (ctx) => [ugsManifest('svc-no-secret', { url: ctx.simUrl, allowInsecure: true, apiKeySecretRef: { name: 'absent-api-key' } })],
    stdin: () => ugManifest('c-svc-no-secret', { ...base('c-svc-no-secret'), serviceRef: { name: 'svc-no-secret' } }),
    object: ugOf('c-svc-no-secret'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionNotFound',
      message: /Secret \S+\/absent-api-key does not exist/,
      event: { reason: 'ConnectionNotFound', note: 'absent-api-key does not exist' },
    },
  },
  {
    id: 'c-svc-wrong-key',
    what: 'UserGroupService whose Secret lacks the apiKey key',
    ns: 'bad',
    before: (ctx) => [
      apiKeySecretManifest('svc-wrong-key-secret', { stringData: { token: 'not-here' } }),
      ugsManifest('svc-wrong-key', { url: ctx.simUrl, allowInsecure: true, apiKeySecretRef: { name: 'svc-wrong-key-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-wrong-key', { ...base('c-svc-wrong-key'), serviceRef: { name: 'svc-wrong-key' } }),
    object: ugOf('c-svc-wrong-key'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionNotFound',
      message: 'svc-wrong-key-secret has no key "apiKey"',
      event: { reason: 'ConnectionNotFound', note: 'has no key "apiKey"' },
    },
  },
  {
    id: 'c-svc-blank-key',
    what: 'UserGroupService whose API key is only whitespace',
    ns: 'bad',
    before: (ctx) => [
      apiKeySecretManifest('svc-blank-key-secret', { stringData: { apiKey: ' \n\t ' } }),
      ugsManifest('svc-blank-key', { url: ctx.simUrl, allowInsecure: true, apiKeySecretRef: { name: 'svc-blank-key-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-blank-key', { ...base('c-svc-blank-key'), serviceRef: { name: 'svc-blank-key' } }),
    object: ugOf('c-svc-blank-key'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionNotFound',
      message: 'svc-blank-key-secret has no key "apiKey"',
      event: { reason: 'ConnectionNotFound', note: 'has no key "apiKey"' },
    },
  },
  {
    id: 'c-svc-wrong-apikey',
    what: 'UserGroupService with an API key the service does not know',
    ns: 'bad',
    before: (ctx) => [
      apiKeySecretManifest('svc-unknown-key-secret', { stringData: { apiKey: 'key-nobody-issued' } }),
      ugsManifest('svc-unknown-key', { url: ctx.simUrl, allowInsecure: true, apiKeySecretRef: { name: 'svc-unknown-key-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-wrong-apikey', { ...base('c-svc-wrong-apikey'), serviceRef: { name: 'svc-unknown-key' } }),
    object: ugOf('c-svc-wrong-apikey'),
    expected: { kind: 'condition', reason: 'Unauthorized', message: 'via UserGroupService', event: { reason: 'SyncFailed', note: /^Unauthorized: / } },
  },
  {
    // CEL's loopback rule allows any digits as a port; the WHATWG URL parser refuses 99999.
    id: 'c-svc-bad-port',
    what: 'UserGroupService with http://localhost:99999 (passes CEL, not a URL)',
    ns: 'bad',
    before: () => [
      apiKeySecretManifest('svc-bad-port-secret', { stringData: { apiKey: 'whatever' } }),
      ugsManifest('svc-bad-port', { url: 'http://localhost:99999', apiKeySecretRef: { name: 'svc-bad-port-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-bad-port', { ...base('c-svc-bad-port'), serviceRef: { name: 'svc-bad-port' } }),
    object: ugOf('c-svc-bad-port'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionInvalid',
      message: 'service URL is not an absolute URL',
      event: { reason: 'ConnectionInvalid', note: 'not an absolute URL' },
    },
  },
  {
    id: 'c-svc-closed-port',
    what: 'UserGroupService pointing at a closed loopback port',
    ns: 'bad',
    before: () => [
      apiKeySecretManifest('svc-closed-port-secret', { stringData: { apiKey: 'whatever' } }),
      ugsManifest('svc-closed-port', { url: 'http://127.0.0.1:1', allowInsecure: true, apiKeySecretRef: { name: 'svc-closed-port-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-closed-port', { ...base('c-svc-closed-port'), serviceRef: { name: 'svc-closed-port' } }),
    object: ugOf('c-svc-closed-port'),
    // A tenant's own connection learns the kind of failure, not which network error (no port scanning).
    expected: {
      kind: 'condition',
      reason: 'ServiceUnavailable',
      message: /no answer from the service|are paused/,
      event: { reason: 'SyncFailed', note: /^ServiceUnavailable: .*no answer from the service/ },
    },
  },
  {
    id: 'c-svc-untyped-secret',
    what: 'UserGroupService naming a Secret that did not opt in as an API key (type Opaque)',
    ns: 'bad',
    before: (ctx) => [
      secretManifest('svc-untyped-secret', { stringData: { apiKey: 'some-other-apps-password' } }),
      ugsManifest('svc-untyped', { url: ctx.simUrl, allowInsecure: true, apiKeySecretRef: { name: 'svc-untyped-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-untyped-secret', { ...base('c-svc-untyped-secret'), serviceRef: { name: 'svc-untyped' } }),
    object: ugOf('c-svc-untyped-secret'),
    expected: {
      kind: 'condition',
      reason: 'ConnectionInvalid',
      message: 'is not an API-key Secret',
      event: { reason: 'ConnectionInvalid', note: 'type must be usergroup.dev/api-key' },
    },
  },
  {
    id: 'c-svc-host-not-allowed',
    what: "UserGroupService at a host the operator's egress policy does not list",
    ns: 'bad',
    before: () => [
      apiKeySecretManifest('svc-elsewhere-secret', { stringData: { apiKey: 'whatever' } }),
      ugsManifest('svc-elsewhere', { url: 'https://analytics.example.com', apiKeySecretRef: { name: 'svc-elsewhere-secret' } }),
    ],
    stdin: () => ugManifest('c-svc-host-not-allowed', { ...base('c-svc-host-not-allowed'), serviceRef: { name: 'svc-elsewhere' } }),
    object: ugOf('c-svc-host-not-allowed'),
    expected: {
      kind: 'condition',
      reason: 'ServiceNotAllowed',
      message: 'is not among the hosts the operator allows',
      event: { reason: 'ServiceNotAllowed', note: '--allowed-service-hosts' },
    },
  },
  {
    id: 'c-secret-unowned',
    what: 'tokenSecret.name of an existing Secret the operator does not own',
    ns: 'bad',
    before: () => [secretManifest('taken-by-someone', { stringData: { token: 'theirs' } })],
    stdin: () => ugManifest('c-secret-unowned', { ...base('c-secret-unowned'), tokenSecret: { name: 'taken-by-someone' } }),
    object: ugOf('c-secret-unowned'),
    expected: {
      kind: 'condition',
      reason: 'SecretConflict',
      message: 'exists and is not owned by this UserGroup',
      event: { reason: 'SecretConflict', note: 'taken-by-someone exists' },
      untouchedSecret: 'taken-by-someone',
    },
  },
  {
    id: 'c-secret-apikey',
    what: "tokenSecret.name of a UserGroupService's API-key Secret",
    ns: 'bad',
    before: (ctx) => [
      secretManifest('team-b-api-key', { stringData: { apiKey: 'team-b-key' } }),
      ugsManifest('team-b', { url: ctx.simUrl, apiKeySecretRef: { name: 'team-b-api-key' } }),
    ],
    stdin: () => ugManifest('c-secret-apikey', { ...base('c-secret-apikey'), tokenSecret: { name: 'team-b-api-key', key: 'apiKey' } }),
    object: ugOf('c-secret-apikey'),
    expected: {
      kind: 'condition',
      reason: 'SecretConflict',
      message: 'team-b-api-key exists and is not owned by this UserGroup',
      event: { reason: 'SecretConflict', note: 'team-b-api-key exists' },
      untouchedSecret: 'team-b-api-key',
    },
  },
  {
    id: 'c-secret-steal',
    what: "tokenSecret.name of a good group's token Secret (same namespace)",
    ns: 'good',
    temporary: true,
    stdin: (ctx) => ugManifest('c-secret-steal', { ...base('c-secret-steal'), tokenSecret: { name: goodAt(ctx, 4).name } }),
    object: ugOf('c-secret-steal'),
    expected: {
      kind: 'condition',
      reason: 'SecretConflict',
      message: 'is not owned by this UserGroup',
      event: { reason: 'SecretConflict', note: 'is not owned by this UserGroup' },
    },
  },
  {
    id: 'c-dup-same-ns',
    what: 'userGroupId of a good group (same namespace)',
    ns: 'good',
    temporary: true,
    stdin: (ctx) => ugManifest('c-dup-same-ns', { userGroupId: goodAt(ctx, 5).userGroupId, name: 'Impostor' }),
    object: ugOf('c-dup-same-ns'),
    expected: {
      kind: 'condition',
      reason: 'DuplicateUserGroupId',
      message: /is already used by UserGroup \S+\/good5 on ClusterUserGroupService/,
      event: { reason: 'DuplicateUserGroupId', note: 'already used by' },
    },
  },
  {
    id: 'c-dup-cross-ns',
    what: 'userGroupId of a good group (another namespace, same connection)',
    ns: 'bad',
    stdin: (ctx) => ugManifest('c-dup-cross-ns', { userGroupId: goodAt(ctx, 6).userGroupId, name: 'Impostor' }),
    object: ugOf('c-dup-cross-ns'),
    expected: {
      kind: 'condition',
      reason: 'UserGroupIdClaimed',
      message: 'is held by another namespace on the account of',
      event: { reason: 'UserGroupIdClaimed', note: 'held by another namespace' },
    },
  },
  {
    id: 'c-dup-pair',
    what: 'two UserGroups with one userGroupId: the newer one',
    ns: 'bad',
    before: () => [ugManifest('c-dup-older', { userGroupId: 'c-dup-pair-id', name: 'Older' })],
    beforeSynced: 'c-dup-older',
    stdin: () => ugManifest('c-dup-pair', { userGroupId: 'c-dup-pair-id', name: 'Newer' }),
    object: ugOf('c-dup-pair'),
    expected: {
      kind: 'condition',
      reason: 'DuplicateUserGroupId',
      message: /already used by UserGroup \S+\/c-dup-older/,
      event: { reason: 'DuplicateUserGroupId', note: 'c-dup-older' },
    },
  },
  {
    // Stored (under etcd's 1.5 MiB; admission sees one top-level entry, an object) but over the controller's
    // 16384 bytes: refused before any call, so the service's own 1 MiB limit (413) is never reached.
    id: 'c-props-1100k',
    what: "1.1 MB nested properties (server-side apply): over the controller's limit",
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () => ugManifest('c-props-1100k', { ...base('c-props-1100k'), properties: nestedBigProperties(1_100_000) }),
    object: ugOf('c-props-1100k'),
    expected: {
      kind: 'condition',
      reason: 'InvalidSpec',
      message: /^spec\.properties is 1100\d{3} bytes as JSON; at most 16384 are allowed$/,
      event: { reason: 'InvalidSpec', note: 'at most 16384 are allowed' },
    },
  },
  {
    id: 'c-props-nested-20k',
    what: '20 KB of properties one level down (admission cannot see it)',
    ns: 'bad',
    stdin: () => ugManifest('c-props-nested-20k', { ...base('c-props-nested-20k'), properties: nestedBigProperties(20_000) }),
    object: ugOf('c-props-nested-20k'),
    expected: {
      kind: 'condition',
      reason: 'InvalidSpec',
      message: /^spec\.properties is 200\d\d bytes as JSON; at most 16384 are allowed$/,
      event: { reason: 'InvalidSpec', note: 'at most 16384 are allowed' },
    },
  },
  {
    // Annotations are out of CEL's reach; the value would be kept in the cache, status and the token Secret.
    id: 'c-rotate-250k',
    what: 'a rotation request value of 250 KB (server-side apply)',
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () =>
      ugManifest('c-rotate-250k', base('c-rotate-250k'), {
        metadata: { annotations: { 'usergroup.dev/rotate-requested-at': `${'r'.repeat(250_000)}\u0000\n` } },
      }),
    object: ugOf('c-rotate-250k'),
    expected: { kind: 'condition', reason: 'InvalidSpec', message: rotateTooLong, event: { reason: 'InvalidSpec', note: rotateTooLong } },
  },
  {
    // Accepted by kubectl (max depth 10,000) and the apiserver; the controller must say it cannot use it.
    // Through another account, so a group that did reach the simulator stays out of the invariant's reads.
    id: 'c-props-nest-5000',
    what: 'properties nested 5,000 levels deep (server-side apply)',
    ns: 'bad',
    before: (ctx) => [
      secretManifest('isolated-api-key', { stringData: { apiKey: ctx.isolatedApiKey } }),
      ugsManifest('isolated', { url: ctx.simUrl, apiKeySecretRef: { name: 'isolated-api-key' } }),
    ],
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () => ugWithNestedProperties('c-props-nest-5000', 'c-props-nest-5000-id', 5000, 'isolated'),
    object: ugOf('c-props-nest-5000'),
    expected: { kind: 'condition', reason: 'InvalidSpec', message: 'spec.properties', event: { reason: 'InvalidSpec', note: 'spec.properties' } },
  },
  {
    // YAML 1.1: kubectl reads an unquoted yes as true.
    id: 'c-suspend-yaml11',
    what: 'suspend: yes (unquoted YAML 1.1 boolean)',
    ns: 'bad',
    stdin: () =>
      `apiVersion: ${apiVersion}\nkind: UserGroup\nmetadata: {name: c-suspend-yaml11}\nspec: {userGroupId: c-suspend-yaml11-id, name: Suspended by YAML, suspend: yes}\n`,
    object: ugOf('c-suspend-yaml11'),
    expected: { kind: 'condition', reason: 'Suspended', message: 'spec.suspend is true' },
  },
  {
    // The Secret is labelled usergroup.dev/usergroup=<name> and label values are at most 63 characters, so
    // admission refuses longer names (CEL) rather than accepting a group that could never sync.
    id: 'l'.repeat(100),
    what: "metadata.name of 100 characters (the Secret's label value is limited to 63)",
    ns: 'bad',
    stdin: () => ugManifest('l'.repeat(100), base('c-name-100')),
    object: ugOf('l'.repeat(100)),
    expected: rejected('metadata.name must be at most 63 characters'),
  },

  // ==== accepted and legal, if odd: the controller syncs it ====================================================
  {
    id: 'ok-control-chars',
    what: 'NUL, BEL and an ANSI escape in userGroupId and name',
    ns: 'bad',
    stdin: () => ugManifest('ok-control-chars', { userGroupId: 'ctl-\u0000-\u0007-id', name: 'Red \u001b[31malert\u001b[0m\r\nInjected: yes' }),
    object: ugOf('ok-control-chars'),
    expected: { kind: 'synced', stored: { userGroupId: 'ctl-\u0000-\u0007-id' } },
  },
  {
    id: 'ok-unicode',
    what: 'unicode userGroupId and a 1024-character "ü" name',
    ns: 'bad',
    stdin: () => ugManifest('ok-unicode', { userGroupId: 'グループ-\u{1F600}-\u202Eevil', name: 'ü'.repeat(1024) }),
    object: ugOf('ok-unicode'),
    expected: { kind: 'synced' },
  },
  {
    // Admission counts characters (255 max) and so does the service: 200 emoji are a valid id.
    id: 'ok-ugid-200-emoji',
    what: 'spec.userGroupId of 200 emoji (400 UTF-16 units)',
    ns: 'bad',
    stdin: () => ugManifest('ok-ugid-200-emoji', { userGroupId: '\u{1F600}'.repeat(200), name: 'Emoji' }),
    object: ugOf('ok-ugid-200-emoji'),
    expected: { kind: 'synced' },
  },
  {
    id: 'ok-props-nest-50',
    what: 'properties nested 50 levels deep',
    ns: 'bad',
    stdin: () => ugWithNestedProperties('ok-props-nest-50', 'ok-props-nest-50-id', 50),
    object: ugOf('ok-props-nest-50'),
    expected: { kind: 'synced' },
  },
  {
    id: 'ok-props-numbers',
    what: 'properties with 2^64, -0 and 1e308',
    ns: 'bad',
    stdin: () =>
      `{"apiVersion":"${apiVersion}","kind":"UserGroup","metadata":{"name":"ok-props-numbers"},"spec":{"userGroupId":"ok-props-numbers-id","name":"Numbers","properties":{"big":18446744073709551616,"neg":-0,"huge":1e308}}}`,
    object: ugOf('ok-props-numbers'),
    expected: { kind: 'synced' },
  },
  {
    id: 'ok-mapping-null',
    what: 'a null value in spec.mapping (pruned)',
    ns: 'bad',
    stdin: () => ugManifest('ok-mapping-null', { ...base('ok-mapping-null'), mapping: { tenant: null } }),
    object: ugOf('ok-mapping-null'),
    expected: { kind: 'synced', stored: { mapping: {} } },
  },
  {
    id: 'ok-unknown-warn',
    what: 'an unknown spec field with --validate=warn (pruned, warned)',
    ns: 'bad',
    args: () => ['apply', '--validate=warn', '-f', '-'],
    stdin: () => ugManifest('ok-unknown-warn', { ...base('ok-unknown-warn'), colour: 'blue' }),
    object: ugOf('ok-unknown-warn'),
    expected: { kind: 'synced', stderr: 'Warning: unknown field "spec.colour"', stored: { colour: undefined } },
  },
  {
    id: 'ok-unknown-ignore',
    what: 'an unknown spec field with --validate=false (silently pruned)',
    ns: 'bad',
    args: () => ['apply', '--validate=false', '-f', '-'],
    stdin: () => ugManifest('ok-unknown-ignore', { ...base('ok-unknown-ignore'), colour: 'blue' }),
    object: ugOf('ok-unknown-ignore'),
    expected: { kind: 'synced', stored: { colour: undefined } },
  },
  {
    id: 'ok-status-forged',
    what: 'a forged status in the manifest (status is a subresource: ignored)',
    ns: 'bad',
    stdin: () =>
      ugManifest('ok-status-forged', base('ok-status-forged'), {
        top: {
          status: {
            conditions: [{ type: 'Ready', status: 'True', reason: 'Synced', message: 'forged', lastTransitionTime: '2024-01-01T00:00:00Z' }],
            syncedHash: 'sha256:forged',
            tokenSecretName: 'elsewhere',
          },
        },
      }),
    object: ugOf('ok-status-forged'),
    expected: { kind: 'synced' },
  },
  {
    id: 'ok-yaml-dup-key',
    what: 'a YAML mapping with userGroupId twice (the last wins)',
    ns: 'bad',
    stdin: () =>
      `apiVersion: ${apiVersion}\nkind: UserGroup\nmetadata: {name: ok-yaml-dup-key}\nspec: {userGroupId: ok-dup-a, userGroupId: ok-dup-b, name: Dup}\n`,
    object: ugOf('ok-yaml-dup-key'),
    expected: { kind: 'synced', stored: { userGroupId: 'ok-dup-b' } },
  },
  {
    // A new object that carries a rotation request rotates once right after its creation; 256 characters
    // (control characters included) is the longest request the controller takes.
    id: 'ok-rotate-256',
    what: 'a rotation request value of 256 characters with a NUL and a newline',
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () =>
      ugManifest('ok-rotate-256', base('ok-rotate-256'), { metadata: { annotations: { 'usergroup.dev/rotate-requested-at': `${'r'.repeat(254)}\u0000\n` } } }),
    object: ugOf('ok-rotate-256'),
    expected: { kind: 'synced', rotations: 1 },
  },
  {
    // At every limit at once: 64 top-level properties and 16384 bytes of JSON, 64 mapping entries and
    // 16384 characters of mapping (16 × 1024 would do too; 64 entries need shorter values), annotations too.
    id: 'ok-at-limits',
    what: 'properties, mapping and tokenSecret.annotations exactly at their size limits',
    ns: 'bad',
    args: () => ['apply', '--server-side', '-f', '-'],
    stdin: () =>
      ugManifest('ok-at-limits', {
        ...base('ok-at-limits'),
        mapping: entries(64, 'd'.repeat(253)),
        properties: atLimitProperties(),
        tokenSecret: { annotations: { 'example.com/note': 'n'.repeat(16_384 - 16) } },
      }),
    object: ugOf('ok-at-limits'),
    expected: { kind: 'synced' },
  },
  {
    // kubectl apply over an owned token Secret: the token is replaced by hand; the controller restores it.
    id: 'ok-forged-token',
    what: "a Secret manifest that overwrites a good group's token",
    ns: 'good',
    stdin: (ctx) => secretManifest(goodAt(ctx, 7).name, { stringData: { token: 'forged-token' } }),
    object: (ctx) => ({ kind: 'UserGroup', name: goodAt(ctx, 7).name }),
    expected: { kind: 'synced', stderr: 'is missing the kubectl.kubernetes.io/last-applied-configuration annotation' },
  },
];

/** 64 top-level entries whose JSON is exactly 16384 bytes: the most the controller takes. */
function atLimitProperties(): Record<string, unknown> {
  const properties: Record<string, unknown> = entries(63, 'v');
  const without = Buffer.byteLength(JSON.stringify({ ...properties, blob: '' }));
  properties['blob'] = 'x'.repeat(16_384 - without);
  if (Buffer.byteLength(JSON.stringify(properties)) !== 16_384) throw new Error('atLimitProperties: not 16384 bytes');
  return properties;
}

/** Nine levels of nine aliases: 387 million "lol"s once expanded. */
function aliasBomb(name: string): string {
  const levels = 'abcdefghi'.split('');
  const lines = [
    `apiVersion: ${apiVersion}`,
    'kind: UserGroup',
    `metadata: {name: ${name}}`,
    'spec:',
    `  userGroupId: ${name}-id`,
    '  name: Laughs',
    '  properties:',
  ];
  lines.push(`    a: &a [${Array(9).fill('"lol"').join(',')}]`);
  for (let i = 1; i < levels.length; i++)
    lines.push(
      `    ${levels[i]}: &${levels[i]} [${Array(9)
        .fill(`*${levels[i - 1]}`)
        .join(',')}]`,
    );
  return `${lines.join('\n')}\n`;
}
