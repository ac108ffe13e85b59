import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { createNamespace, deleteNamespace, kubectl, type CommandResult } from '../support/kube.js';

/**
 * Bad manifests must be refused by the apiserver itself (structural schema, CEL
 * rules, strict field validation), applied with the real kubectl the way a user
 * or a GitOps tool would, so no controller is involved in this file.
 */

const apiVersion = 'usergroup.dev/v1';

// YAML 1.1 quoting: kubectl's YAML reader would turn an unquoted n, yes, on, ... into booleans.
const toYaml = (manifest: Record<string, unknown>): string => YAML.stringify(manifest, { version: '1.1' });

const userGroup = (name: string, spec: unknown, extra: Record<string, unknown> = {}): string =>
  toYaml({ apiVersion, kind: 'UserGroup', metadata: { name }, ...(spec === undefined ? {} : { spec }), ...extra });

const userGroupService = (name: string, spec: unknown): string => toYaml({ apiVersion, kind: 'UserGroupService', metadata: { name }, spec });

const clusterService = (name: string, spec: unknown): string => toYaml({ apiVersion, kind: 'ClusterUserGroupService', metadata: { name }, spec });

const good = { userGroupId: 'acme-1', name: 'Acme Corp' };
/** `n` entries k0, k1, … (three characters each up to k99) with the given values. */
const entries = (n: number, value: (i: number) => unknown): Record<string, unknown> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${String(i).padStart(2, '0')}`, value(i)]));
const ugsRef = { name: 'team-key' };

interface BadCase {
  readonly what: string;
  readonly manifest: string;
  /** A substring of kubectl's stderr that tells the user what is wrong. */
  readonly error: string | RegExp;
}

let n = 0;
/** Every case gets its own object name, so no case can be refused for a reason that belongs to another. */
const fresh = (): string => `bad-${++n}`;

const badUserGroups: BadCase[] = [
  { what: 'no spec at all', manifest: userGroup(fresh(), undefined), error: 'spec: Required value' },
  {
    what: "the operator's rotation bookkeeping annotation in spec.tokenSecret.annotations",
    manifest: userGroup(fresh(), { ...good, tokenSecret: { annotations: { 'usergroup.dev/rotation-handled': '1700000000' } } }),
    error: "are the operator's own bookkeeping annotations",
  },
  {
    what: "the operator's token issue time annotation in spec.tokenSecret.annotations",
    manifest: userGroup(fresh(), { ...good, tokenSecret: { annotations: { 'usergroup.dev/token-issued-at': '2020-01-01T00:00:00Z' } } }),
    error: "are the operator's own bookkeeping annotations",
  },
  {
    what: 'a restart target of a kind the operator does not restart',
    manifest: userGroup(fresh(), { ...good, rolloutRestartTargets: [{ kind: 'Pod', name: 'web' }] }),
    error: 'spec.rolloutRestartTargets[0].kind: Unsupported value: "Pod"',
  },
  {
    what: 'the same restart target twice',
    manifest: userGroup(fresh(), {
      ...good,
      rolloutRestartTargets: [
        { kind: 'Deployment', name: 'web' },
        { kind: 'Deployment', name: 'web' },
      ],
    }),
    error: 'spec.rolloutRestartTargets[1]: Duplicate value',
  },
  {
    what: 'a restart target in another namespace (no such field: targets never leave the namespace)',
    manifest: userGroup(fresh(), { ...good, rolloutRestartTargets: [{ kind: 'Deployment', name: 'other-ns/web' }] }),
    error: 'spec.rolloutRestartTargets[0].name in body should match',
  },
  {
    what: 'more than 16 restart targets',
    manifest: userGroup(fresh(), { ...good, rolloutRestartTargets: Array.from({ length: 17 }, (_, i) => ({ kind: 'Deployment', name: `d${i}` })) }),
    error: 'spec.rolloutRestartTargets: Too many: 17: must have at most 16 items',
  },
  {
    what: 'spec.rotation.maxTokenAge without a unit',
    manifest: userGroup(fresh(), { ...good, rotation: { maxTokenAge: '720' } }),
    error: 'spec.rotation.maxTokenAge in body should match',
  },
  {
    what: 'spec.rotation.maxTokenAge in days',
    manifest: userGroup(fresh(), { ...good, rotation: { maxTokenAge: '30d' } }),
    error: 'spec.rotation.maxTokenAge in body should match',
  },
  {
    what: 'a negative spec.rotation.maxTokenAge',
    manifest: userGroup(fresh(), { ...good, rotation: { maxTokenAge: '-1h' } }),
    error: 'spec.rotation.maxTokenAge in body should match',
  },
  {
    what: 'spec.rotation.maxTokenAge under a second',
    manifest: userGroup(fresh(), { ...good, rotation: { maxTokenAge: '500ms' } }),
    error: 'spec.rotation.maxTokenAge must be at least 1s',
  },
  {
    what: 'spec.rotation.maxTokenAge a number',
    manifest: userGroup(fresh(), { ...good, rotation: { maxTokenAge: 3600 } }),
    error: 'spec.rotation.maxTokenAge in body must be of type string',
  },
  { what: 'missing spec.name', manifest: userGroup(fresh(), { userGroupId: 'acme-1' }), error: 'spec.name: Required value' },
  {
    what: 'empty spec.name',
    manifest: userGroup(fresh(), { userGroupId: 'acme-1', name: '' }),
    error: /spec\.name: Invalid value: "": .*at least 1 chars long/,
  },
  { what: 'missing spec.userGroupId', manifest: userGroup(fresh(), { name: 'Acme' }), error: 'spec.userGroupId: Required value' },
  {
    what: 'empty spec.userGroupId',
    manifest: userGroup(fresh(), { userGroupId: '', name: 'Acme' }),
    error: /spec\.userGroupId: Invalid value: "": .*at least 1 chars long/,
  },
  {
    what: 'spec.userGroupId of 256 characters',
    manifest: userGroup(fresh(), { userGroupId: 'x'.repeat(256), name: 'Acme' }),
    error: 'spec.userGroupId: Too long: may not be more than 255',
  },
  {
    what: 'spec.userGroupId a number',
    manifest: userGroup(fresh(), { userGroupId: 42, name: 'Acme' }),
    error: 'spec.userGroupId in body must be of type string: "integer"',
  },
  {
    what: 'spec.name a number',
    manifest: userGroup(fresh(), { userGroupId: 'acme-1', name: 12 }),
    error: 'spec.name in body must be of type string: "integer"',
  },
  {
    what: 'spec.name a list',
    manifest: userGroup(fresh(), { userGroupId: 'acme-1', name: ['Acme'] }),
    error: 'spec.name in body must be of type string: "array"',
  },
  {
    what: 'spec.mapping with a number value',
    manifest: userGroup(fresh(), { ...good, mapping: { tenant: 7 } }),
    error: 'spec.mapping.tenant in body must be of type string: "integer"',
  },
  {
    what: 'spec.mapping with a boolean value',
    manifest: userGroup(fresh(), { ...good, mapping: { tenant: true } }),
    error: 'spec.mapping.tenant in body must be of type string: "boolean"',
  },
  {
    // Strict field validation sees the nested key before the type check does; either way the path is named.
    what: 'spec.mapping with an object value',
    manifest: userGroup(fresh(), { ...good, mapping: { tenant: { schema: 'x' } } }),
    error: /spec\.mapping\.tenant/,
  },
  {
    what: 'spec.mapping a list',
    manifest: userGroup(fresh(), { ...good, mapping: ['a', 'b'] }),
    error: 'spec.mapping in body must be of type object: "array"',
  },
  {
    what: 'spec.properties a string',
    manifest: userGroup(fresh(), { ...good, properties: 'plan=gold' }),
    error: 'spec.properties in body must be of type object: "string"',
  },
  {
    what: 'spec.properties a list',
    manifest: userGroup(fresh(), { ...good, properties: [1, 2] }),
    error: 'spec.properties in body must be of type object: "array"',
  },
  {
    what: 'spec.tokenSecret.name not a DNS name',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { name: 'Acme_Token' } }),
    error: /spec\.tokenSecret\.name: Invalid value: "Acme_Token": spec\.tokenSecret\.name in body should match/,
  },
  {
    what: 'spec.tokenSecret.name longer than 253',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { name: 'a'.repeat(254) } }),
    error: 'spec.tokenSecret.name: Too long: may not be more than 253',
  },
  {
    what: 'spec.tokenSecret.key with a slash',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { key: 'tokens/acme' } }),
    error: /spec\.tokenSecret\.key: Invalid value: "tokens\/acme": spec\.tokenSecret\.key in body should match/,
  },
  {
    what: 'spec.tokenSecret.key with a space',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { key: 'my token' } }),
    error: 'spec.tokenSecret.key in body should match',
  },
  {
    // Passes the character pattern but a Secret cannot have it: the controller could never store the token.
    what: 'spec.tokenSecret.key ".."',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { key: '..' } }),
    error: 'spec.tokenSecret.key must not be "." or start with ".."',
  },
  {
    what: 'spec.tokenSecret.labels with an invalid key',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { labels: { 'team name': 'a' } } }),
    error: 'spec.tokenSecret.labels keys must be valid label keys',
  },
  {
    what: 'spec.tokenSecret.labels with an invalid value',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { labels: { team: 'has spaces' } } }),
    error: 'spec.tokenSecret.labels.team in body should match',
  },
  {
    what: 'spec.tokenSecret.labels with a 64-character value',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { labels: { team: 'a'.repeat(64) } } }),
    error: 'spec.tokenSecret.labels.team: Too long: may not be more than 63',
  },
  {
    what: 'spec.tokenSecret.annotations with an invalid key',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { annotations: { 'a/b/c': 'x' } } }),
    error: 'spec.tokenSecret.annotations keys must be valid annotation keys',
  },
  { what: 'spec.serviceRef without name', manifest: userGroup(fresh(), { ...good, serviceRef: {} }), error: 'spec.serviceRef.name: Required value' },
  {
    what: 'spec.serviceRef.name not a DNS name',
    manifest: userGroup(fresh(), { ...good, serviceRef: { name: 'Team_A' } }),
    error: 'spec.serviceRef.name in body should match',
  },
  {
    what: 'spec.suspend a string',
    manifest: userGroup(fresh(), { ...good, suspend: 'true' }),
    error: 'spec.suspend in body must be of type boolean: "string"',
  },
  { what: 'spec.suspend a number', manifest: userGroup(fresh(), { ...good, suspend: 1 }), error: 'spec.suspend in body must be of type boolean: "integer"' },
  {
    what: 'spec.deletionPolicy not Retain or Rotate',
    manifest: userGroup(fresh(), { ...good, deletionPolicy: 'Delete' }),
    error: 'spec.deletionPolicy: Unsupported value: "Delete": supported values: "Retain", "Rotate"',
  },
  // ---- size limits (docs/usergroup-reference.md "Limits"): what the schema can see of properties, and all of mapping ----
  {
    what: 'spec.properties with 65 top-level entries',
    manifest: userGroup(fresh(), { ...good, properties: entries(65, (i) => i) }),
    error: 'spec.properties: Too many: 65: must have at most 64 items',
  },
  {
    what: 'a top-level spec.properties string of 16385 characters',
    manifest: userGroup(fresh(), { ...good, properties: { blob: 'x'.repeat(16_385) } }),
    error: 'spec.properties.blob: Too long: may not be more than 16384',
  },
  {
    what: 'spec.mapping with 65 entries',
    manifest: userGroup(fresh(), { ...good, mapping: entries(65, () => 'ds') }),
    error: 'spec.mapping: Too many: 65: must have at most 64 items',
  },
  {
    what: 'a spec.mapping key of 254 characters',
    manifest: userGroup(fresh(), { ...good, mapping: { ['s'.repeat(254)]: 'ds' } }),
    error: 'spec.mapping keys must be 1 to 253 characters',
  },
  {
    what: 'a spec.mapping value of 1025 characters',
    manifest: userGroup(fresh(), { ...good, mapping: { sales: 'd'.repeat(1025) } }),
    error: 'spec.mapping.sales: Too long: may not be more than 1024',
  },
  {
    what: 'spec.mapping of 17 × 1024 characters (over 16384 in total)',
    manifest: userGroup(fresh(), { ...good, mapping: entries(17, () => 'd'.repeat(1021)) }),
    error: 'spec.mapping must be at most 16384 characters in total (keys and values)',
  },
  {
    what: 'spec.tokenSecret.annotations of more than 16384 characters in total',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { annotations: { 'example.com/note': 'n'.repeat(16_384) } } }),
    error: 'spec.tokenSecret.annotations must be at most 16384 characters in total (keys and values)',
  },
  { what: 'an unknown field in spec', manifest: userGroup(fresh(), { ...good, colour: 'blue' }), error: 'unknown field "spec.colour"' },
  {
    what: 'an unknown field in spec.tokenSecret',
    manifest: userGroup(fresh(), { ...good, tokenSecret: { nmae: 'acme-token' } }),
    error: 'unknown field "spec.tokenSecret.nmae"',
  },
];

const badServices: BadCase[] = [
  {
    what: 'plain http to a remote host without allowInsecure',
    manifest: userGroupService(fresh(), { url: 'http://analytics.example.com', apiKeySecretRef: ugsRef }),
    error: 'spec.url must use https unless it is a loopback address or spec.allowInsecure is true',
  },
  {
    what: 'plain http with allowInsecure: false',
    manifest: userGroupService(fresh(), { url: 'http://analytics.example.com', apiKeySecretRef: ugsRef, allowInsecure: false }),
    error: 'spec.url must use https unless it is a loopback address or spec.allowInsecure is true',
  },
  {
    what: 'plain http to a host that only starts like localhost',
    manifest: userGroupService(fresh(), { url: 'http://localhost.evil.example:8080', apiKeySecretRef: ugsRef }),
    error: 'spec.url must use https unless it is a loopback address or spec.allowInsecure is true',
  },
  {
    what: 'plain http to a host that only starts like 127.0.0.1',
    manifest: userGroupService(fresh(), { url: 'http://127.0.0.1.nip.io', apiKeySecretRef: ugsRef }),
    error: 'spec.url must use https unless it is a loopback address or spec.allowInsecure is true',
  },
  {
    what: 'a url that is not a URL',
    manifest: userGroupService(fresh(), { url: 'not a url', apiKeySecretRef: ugsRef }),
    error: 'spec.url must be an absolute http(s) URL',
  },
  {
    what: 'a url with a space in the host',
    manifest: userGroupService(fresh(), { url: 'https://ana lytics.example.com', apiKeySecretRef: ugsRef }),
    error: 'spec.url must be an absolute http(s) URL',
  },
  {
    what: 'an ftp url',
    manifest: userGroupService(fresh(), { url: 'ftp://analytics.example.com', apiKeySecretRef: ugsRef }),
    error: 'spec.url must be an absolute http(s) URL',
  },
  {
    what: 'an https url without a host',
    manifest: userGroupService(fresh(), { url: 'https://', apiKeySecretRef: ugsRef }),
    error: 'spec.url must be an absolute http(s) URL',
  },
  {
    what: 'a url with credentials',
    manifest: userGroupService(fresh(), { url: 'https://user:secret@analytics.example.com', apiKeySecretRef: ugsRef }),
    error: 'spec.url must not contain credentials',
  },
  {
    what: 'a url with a query string',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com/?tenant=a', apiKeySecretRef: ugsRef }),
    error: 'spec.url must not have a query string or a fragment',
  },
  {
    what: 'a url with a fragment',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com/#top', apiKeySecretRef: ugsRef }),
    error: 'spec.url must not have a query string or a fragment',
  },
  { what: 'missing spec.url', manifest: userGroupService(fresh(), { apiKeySecretRef: ugsRef }), error: 'spec.url: Required value' },
  {
    what: 'missing spec.apiKeySecretRef',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com' }),
    error: 'spec.apiKeySecretRef: Required value',
  },
  {
    what: 'spec.apiKeySecretRef without name',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com', apiKeySecretRef: { key: 'apiKey' } }),
    error: 'spec.apiKeySecretRef.name: Required value',
  },
  {
    what: 'spec.apiKeySecretRef.name not a DNS name',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com', apiKeySecretRef: { name: 'Team_Key' } }),
    error: 'spec.apiKeySecretRef.name in body should match',
  },
  {
    what: 'spec.apiKeySecretRef.key with a slash',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com', apiKeySecretRef: { name: 'team-key', key: 'a/b' } }),
    error: 'spec.apiKeySecretRef.key in body should match',
  },
  {
    what: 'spec.allowInsecure a string',
    manifest: userGroupService(fresh(), { url: 'http://analytics.example.com', apiKeySecretRef: ugsRef, allowInsecure: 'true' }),
    error: 'spec.allowInsecure in body must be of type boolean: "string"',
  },
  {
    what: 'a namespace field in spec.apiKeySecretRef (only the own namespace may be used)',
    manifest: userGroupService(fresh(), { url: 'https://analytics.example.com', apiKeySecretRef: { name: 'team-key', namespace: 'kube-system' } }),
    error: 'unknown field "spec.apiKeySecretRef.namespace"',
  },
];

const cugsBase = { url: 'https://analytics.example.com', apiKeySecretRef: { namespace: 'usergroup-operator', name: 'key' } };
const rule = (over: Record<string, unknown>): Record<string, unknown> => ({ namespaces: ['team-a'], userGroupIds: { prefix: '{namespace}.' }, ...over });

const badClusterServices: BadCase[] = [
  {
    what: 'a prefix that continues {namespace} with "-" (team would get team-a\'s ids)',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [rule({ userGroupIds: { prefix: '{namespace}-' } })] }),
    error: 'follow {namespace} with a character namespace names cannot contain, such as ".", ":", "/" or "_"',
  },
  {
    what: 'a prefix that ends with {namespace}',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [rule({ userGroupIds: { prefix: 'org/{namespace}' } })] }),
    error: 'follow {namespace} with a character namespace names cannot contain',
  },
  {
    what: 'an unknown placeholder',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [rule({ userGroupIds: { exact: ['{team}-billing'] } })] }),
    error: 'only {namespace} may appear in braces',
  },
  {
    what: 'a rule that admits no namespace',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [{ userGroupIds: { prefix: '' } }] }),
    error: 'a tenants entry must admit namespaces by name (namespaces), by labels (namespaceSelector), or both',
  },
  {
    what: 'a rule without userGroupIds',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [{ namespaces: ['team-a'] }] }),
    error: 'spec.tenants[0].userGroupIds: Required value',
  },
  {
    what: 'userGroupIds with both prefix and exact',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [rule({ userGroupIds: { prefix: 'a.', exact: ['b'] } })] }),
    error: 'userGroupIds needs exactly one of prefix and exact',
  },
  {
    what: 'a selector requirement In without values',
    manifest: clusterService(fresh(), {
      ...cugsBase,
      tenants: [rule({ namespaces: [], namespaceSelector: { matchExpressions: [{ key: 'tenant', operator: 'In' }] } })],
    }),
    error: 'In and NotIn need values; Exists and DoesNotExist take none',
  },
  {
    what: 'an unknown adoption policy',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [rule({ adoption: 'Sometimes' })] }),
    error: 'spec.tenants[0].adoption: Unsupported value: "Sometimes": supported values: "Rotate", "Keep", "Refuse"',
  },
  {
    what: 'a namespace that is not a namespace name',
    manifest: clusterService(fresh(), { ...cugsBase, tenants: [rule({ namespaces: ['Team_A'] })] }),
    error: /spec\.tenants\[0\]\.namespaces\[0\]: Invalid value: "Team_A"/,
  },
  {
    what: 'an API-key Secret without its namespace',
    manifest: clusterService(fresh(), { url: cugsBase.url, apiKeySecretRef: { name: 'key' } }),
    error: 'spec.apiKeySecretRef.namespace: Required value',
  },
  {
    what: 'plain http to a remote host without allowInsecure',
    manifest: clusterService(fresh(), { ...cugsBase, url: 'http://analytics.example.com' }),
    error: 'spec.url must use https unless it is a loopback address or spec.allowInsecure is true',
  },
];

const goodServices: { what: string; name: string; spec: Record<string, unknown> }[] = [
  { what: 'https', name: 'svc-https', spec: { url: 'https://analytics.example.com/base', apiKeySecretRef: ugsRef } },
  {
    what: 'plain http to a remote host with allowInsecure: true',
    name: 'svc-insecure',
    spec: { url: 'http://analytics.example.com', apiKeySecretRef: ugsRef, allowInsecure: true },
  },
  { what: 'http://127.0.0.1:<port>', name: 'svc-loopback-v4', spec: { url: 'http://127.0.0.1:8080', apiKeySecretRef: ugsRef } },
  { what: 'http://localhost:<port>/path', name: 'svc-localhost', spec: { url: 'http://localhost:8080/service', apiKeySecretRef: ugsRef } },
  { what: 'http://[::1]:<port>', name: 'svc-loopback-v6', spec: { url: 'http://[::1]:8080', apiKeySecretRef: ugsRef } },
];

describe('admission: bad manifests are refused by the apiserver with a clear message', () => {
  let ns: string;
  const apply = (manifest: string): Promise<CommandResult> => kubectl(['apply', '-n', ns, '-f', '-'], { input: manifest, timeoutMs: 90_000 });
  const getJson = async (kind: string, name: string): Promise<Record<string, unknown>> => {
    const got = await kubectl(['get', kind, name, '-n', ns, '-o', 'json'], { timeoutMs: 90_000 });
    expect(got.code, got.stderr).toBe(0);
    return JSON.parse(got.stdout) as Record<string, unknown>;
  };
  const namesOf = async (kind: string): Promise<string[]> => {
    const got = await kubectl(['get', kind, '-n', ns, '-o', 'jsonpath={.items[*].metadata.name}'], { timeoutMs: 90_000 });
    expect(got.code, got.stderr).toBe(0);
    return got.stdout.split(/\s+/).filter(Boolean).sort();
  };

  beforeAll(async () => {
    ns = await createNamespace('admission');
  });
  afterAll(async () => {
    if (ns) await deleteNamespace(ns).catch(() => undefined);
  });

  it('accepts a good UserGroup with every field (positive control) and applies the defaults', async () => {
    const res = await apply(
      userGroup('acme', {
        userGroupId: 'acme-1',
        name: 'Acme Corp',
        mapping: { sales: 'acme_sales', n: 'yes' },
        properties: { plan: 'gold', seats: 12, nested: { region: 'eu', flags: [true, false] } },
        tokenSecret: {
          name: 'acme-token',
          labels: { 'example.com/team': 'acme', tier: 'gold' },
          annotations: { 'Example.com/Owner': 'Jane Doe <jane@example.com>' },
        },
        serviceRef: { name: 'svc-https' },
        suspend: false,
        deletionPolicy: 'Rotate',
        rotation: { maxTokenAge: '720h' },
      }),
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('usergroup.usergroup.dev/acme created');
    const stored = await getJson('usergroup', 'acme');
    expect(stored['spec']).toEqual({
      userGroupId: 'acme-1',
      name: 'Acme Corp',
      mapping: { sales: 'acme_sales', n: 'yes' },
      properties: { plan: 'gold', seats: 12, nested: { region: 'eu', flags: [true, false] } },
      // key defaulted by the schema
      tokenSecret: {
        name: 'acme-token',
        key: 'token',
        labels: { 'example.com/team': 'acme', tier: 'gold' },
        annotations: { 'Example.com/Owner': 'Jane Doe <jane@example.com>' },
      },
      serviceRef: { kind: 'UserGroupService', name: 'svc-https' },
      suspend: false,
      deletionPolicy: 'Rotate',
      rotation: { maxTokenAge: '720h' },
    });

    const minimal = await apply(userGroup('minimal', { userGroupId: 'minimal-1', name: 'Minimal' }));
    expect(minimal.code, minimal.stderr).toBe(0);
    expect((await getJson('usergroup', 'minimal'))['spec']).toEqual({ userGroupId: 'minimal-1', name: 'Minimal', suspend: false, deletionPolicy: 'Retain' });
  });

  it('accepts a UserGroup at every size limit, null and nested values kept (positive control for the limits)', async () => {
    const spec = {
      userGroupId: 'at-limits',
      name: 'At the limits',
      // 16 × (3 + 1021) characters: 16384 in all, the most the CEL rule allows.
      mapping: entries(16, () => 'd'.repeat(1021)),
      // 64 top-level entries, one a 16384-character string (admission's view; the controller's 16384-byte
      // total of the JSON is a separate, later check), nulls at the top and nested.
      properties: { ...entries(61, (i) => i), blob: 'x'.repeat(16_384), nothing: null, nested: { a: [null, {}] } },
      tokenSecret: { annotations: { 'example.com/note': 'n'.repeat(16_384 - 'example.com/note'.length) } },
    };
    // Server-side apply: client-side apply would also store the whole object in an annotation, and it keeps nulls.
    const res = await kubectl(['apply', '--server-side', '-n', ns, '-f', '-'], { input: userGroup('at-limits', spec), timeoutMs: 90_000 });
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const stored = (await getJson('usergroup', 'at-limits'))['spec'] as Record<string, unknown>;
    expect(stored['mapping']).toEqual(spec.mapping);
    expect(stored['properties']).toEqual(spec.properties);
    // Gone again, so the later tests see the objects they expect.
    const deleted = await kubectl(['delete', 'usergroup', 'at-limits', '-n', ns], { timeoutMs: 90_000 });
    expect(deleted.code, deleted.stderr).toBe(0);
  });

  it.each(badUserGroups)('refuses a UserGroup with $what', async ({ manifest, error }) => {
    const res = await apply(manifest);
    expect(res.code, `kubectl apply unexpectedly succeeded: ${res.stdout}`).not.toBe(0);
    if (typeof error === 'string') expect(res.stderr).toContain(error);
    else expect(res.stderr).toMatch(error);
  });

  it.each(badServices)('refuses a UserGroupService with $what', async ({ manifest, error }) => {
    const res = await apply(manifest);
    expect(res.code, `kubectl apply unexpectedly succeeded: ${res.stdout}`).not.toBe(0);
    if (typeof error === 'string') expect(res.stderr).toContain(error);
    else expect(res.stderr).toMatch(error);
  });

  it.each(goodServices)('accepts a UserGroupService with $what', async ({ name, spec }) => {
    const res = await apply(userGroupService(name, spec));
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(`usergroupservice.usergroup.dev/${name} created`);
    const stored = await getJson('usergroupservice', name);
    // key and allowInsecure defaulted by the schema
    expect(stored['spec']).toEqual({ allowInsecure: false, ...spec, apiKeySecretRef: { key: 'apiKey', ...ugsRef } });
  });

  it.each(badClusterServices)('refuses a ClusterUserGroupService with $what', async ({ manifest, error }) => {
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: manifest, timeoutMs: 90_000 });
    expect(res.code, `kubectl apply unexpectedly succeeded: ${res.stdout}`).not.toBe(0);
    if (typeof error === 'string') expect(res.stderr).toContain(error);
    else expect(res.stderr).toMatch(error);
  });

  it('accepts a ClusterUserGroupService with rules by name, by labels and by exact id, and applies the defaults', async () => {
    const res = await kubectl(['apply', '--dry-run=server', '-o', 'json', '-f', '-'], {
      input: clusterService('shared', {
        ...cugsBase,
        tenants: [
          rule({}),
          {
            namespaceSelector: { matchLabels: { 'usergroup.dev/tenant': 'true' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['gold'] }] },
            userGroupIds: { prefix: 'org/{namespace}:' },
            adoption: 'Keep',
          },
          { namespaces: ['billing'], userGroupIds: { exact: ['{namespace}', 'billing-eu'] }, adoption: 'Refuse' },
        ],
      }),
      timeoutMs: 90_000,
    });
    expect(res.code, res.stderr).toBe(0);
    const spec = (JSON.parse(res.stdout) as { spec: { allowInsecure: boolean; apiKeySecretRef: { key: string }; tenants: { adoption: string }[] } }).spec;
    expect(spec.allowInsecure).toBe(false);
    expect(spec.apiKeySecretRef.key).toBe('apiKey');
    expect(spec.tenants.map((t) => t.adoption)).toEqual(['Rotate', 'Keep', 'Refuse']);
  });

  it('refuses a serviceRef of another kind', async () => {
    const res = await apply(userGroup(fresh(), { ...good, serviceRef: { kind: 'Secret', name: 'x' } }));
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('spec.serviceRef.kind: Unsupported value: "Secret": supported values: "UserGroupService", "ClusterUserGroupService"');
  });

  it('stored none of the refused objects', async () => {
    expect(await namesOf('usergroups.usergroup.dev')).toEqual(['acme', 'minimal']);
    expect(await namesOf('usergroupservices.usergroup.dev')).toEqual(goodServices.map((s) => s.name).sort());
  });

  it('kubectl get usergroups lists UserGroups only (no category shadows the plural)', async () => {
    // A category named like the plural would make `kubectl get usergroups` (and `kubectl delete usergroups --all`!)
    // take in the UserGroupServices too.
    expect(await namesOf('usergroups')).toEqual(['acme', 'minimal']);
    const table = await kubectl(['get', 'usergroups', '-n', ns], { timeoutMs: 90_000 });
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).not.toContain('usergroupservice');
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]?.trim().split(/\s+/)).toEqual(['NAME', 'USERGROUPID', 'READY', 'REASON', 'SECRET', 'AGE']);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2))).toEqual([
      ['acme', 'acme-1'],
      ['minimal', 'minimal-1'],
    ]);
    const dryRun = await kubectl(['delete', 'usergroups', '--all', '-n', ns, '--dry-run=server'], { timeoutMs: 90_000 });
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).not.toContain('usergroupservice');
    expect(dryRun.stdout).toContain('"acme" deleted');
    expect(await namesOf('usergroups.usergroup.dev')).toEqual(['acme', 'minimal']);
  });

  it('refuses a changed userGroupId on update, but accepts other changes', async () => {
    const created = await apply(userGroup('immutable', { userGroupId: 'imm-1', name: 'Immutable' }));
    expect(created.code, created.stderr).toBe(0);

    const changed = await apply(userGroup('immutable', { userGroupId: 'imm-2', name: 'Immutable' }));
    expect(changed.code, `kubectl apply unexpectedly succeeded: ${changed.stdout}`).not.toBe(0);
    expect(changed.stderr).toContain('spec.userGroupId: Invalid value: "imm-2": userGroupId is immutable');

    // The same refusal for a patch that does not go through kubectl apply.
    const patched = await kubectl(['patch', 'usergroup', 'immutable', '-n', ns, '--type', 'merge', '-p', '{"spec":{"userGroupId":"imm-3"}}'], {
      timeoutMs: 90_000,
    });
    expect(patched.code, patched.stdout).not.toBe(0);
    expect(patched.stderr).toContain('userGroupId is immutable');

    const renamed = await apply(userGroup('immutable', { userGroupId: 'imm-1', name: 'Immutable, renamed' }));
    expect(renamed.code, renamed.stderr).toBe(0);
    expect(renamed.stdout).toContain('usergroup.usergroup.dev/immutable configured');
    expect((await getJson('usergroup', 'immutable'))['spec']).toMatchObject({ userGroupId: 'imm-1', name: 'Immutable, renamed' });
  });

  it('ignores a status in a create (status is a subresource), without an error', async () => {
    const res = await apply(
      userGroup(
        'with-status',
        { userGroupId: 'status-1', name: 'With status' },
        {
          status: {
            observedGeneration: 7,
            teamId: 99,
            providedId: 'someone-else',
            tokenSecretName: 'stolen',
            conditions: [{ type: 'Ready', status: 'True', reason: 'Synced', message: 'forged', lastTransitionTime: '2024-01-01T00:00:00Z' }],
          },
        },
      ),
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain('usergroup.usergroup.dev/with-status created');
    const stored = await getJson('usergroup', 'with-status');
    expect(stored['status']).toBeUndefined();
    expect(stored['spec']).toMatchObject({ userGroupId: 'status-1', name: 'With status' });
  });

  it('documents every spec field in kubectl explain usergroup.spec', async () => {
    const res = await kubectl(['explain', 'usergroup.spec'], { timeoutMs: 90_000 });
    expect(res.code, res.stderr).toBe(0);
    const fields: [string, string][] = [
      ['userGroupId', '<string> -required-'],
      ['name', '<string> -required-'],
      ['mapping', '<map[string]string>'],
      ['properties', '<map[string]Object>'],
      ['tokenSecret', '<Object>'],
      ['serviceRef', '<Object>'],
      ['suspend', '<boolean>'],
      ['deletionPolicy', '<string>'],
    ];
    for (const [field, type] of fields) {
      // "  field\t<type>" followed by an indented description line (after its enum values, if it has some)
      expect(res.stdout, `field ${field}`).toMatch(new RegExp(`^  ${field}\\s+${escapeRegExp(type)}\\n(  enum: .*\\n)?    \\S`, 'm'));
    }
    expect(res.stdout).toMatch(/^ {2}deletionPolicy\s+<string>\n {2}enum: Retain, Rotate\n/m);
    expect(res.stdout).toContain('Immutable');
    expect(res.stdout).not.toContain('<no description>');

    for (const [path, subfields] of [
      ['usergroup.spec.tokenSecret', ['name', 'key', 'labels', 'annotations']],
      ['usergroup.spec.serviceRef', ['name']],
    ] as const) {
      const sub = await kubectl(['explain', path], { timeoutMs: 90_000 });
      expect(sub.code, sub.stderr).toBe(0);
      for (const field of subfields) expect(sub.stdout, `${path}.${field}`).toMatch(new RegExp(`^  ${field}\\s+<[^>]+>.*\\n    \\S`, 'm'));
      expect(sub.stdout, path).not.toContain('<no description>');
    }
  });

  it('documents the status fields in kubectl explain usergroup.status', async () => {
    const res = await kubectl(['explain', 'usergroup.status'], { timeoutMs: 90_000 });
    expect(res.code, res.stderr).toBe(0);
    for (const field of [
      'observedGeneration',
      'conditions',
      'teamId',
      'providedId',
      'environmentTag',
      'tokenSecretName',
      'lastSyncTime',
      'syncedHash',
      'rotation',
    ]) {
      expect(res.stdout, `status.${field}`).toMatch(new RegExp(`^  ${field}\\s+<[^>]+>\\n    \\S`, 'm'));
    }
    expect(res.stdout).not.toContain('<no description>');
    const rotation = await kubectl(['explain', 'usergroup.status.rotation'], { timeoutMs: 90_000 });
    expect(rotation.code, rotation.stderr).toBe(0);
    expect(rotation.stdout).toMatch(/^ {2}lastHandledRequest\s+<string>\n {4}\S/m);
    expect(rotation.stdout).toMatch(/^ {2}lastRotationTime\s+<string>\n {4}\S/m);
  });

  it('documents the UserGroupService spec in kubectl explain usergroupservice.spec', async () => {
    const res = await kubectl(['explain', 'usergroupservice.spec'], { timeoutMs: 90_000 });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^ {2}url\s+<string> -required-\n {4}\S/m);
    expect(res.stdout).toMatch(/^ {2}apiKeySecretRef\s+<Object> -required-\n {4}\S/m);
    expect(res.stdout).toMatch(/^ {2}allowInsecure\s+<boolean>\n {4}\S/m);
    expect(res.stdout).not.toContain('<no description>');
    expect(res.stdout).not.toContain('<empty>');
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
