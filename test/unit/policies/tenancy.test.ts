// The tenancy policy (policies/tenancy.ts): whether a shared connection's tenant rules admit a UserGroup.
import { describe, expect, it } from 'vitest';
import { parseClusterUserGroupService, prefixProblem, type TenantRule } from '../../../src/api/clusterusergroupservice.js';
import { parseLabelSelector, selects } from '../../../src/api/label-selector.js';
import { admit } from '../../../src/controller/policies/tenancy.js';

/** The tenant rules of a ClusterUserGroupService: pure parsing and admission decisions. */

const rule = (over: Partial<TenantRule>): TenantRule => ({
  namespaces: [],
  namespaceSelector: undefined,
  userGroupIds: { prefix: '' },
  adoption: 'Rotate',
  ...over,
});
const selector = (raw: unknown) => {
  const parsed = parseLabelSelector(raw, 'sel');
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
};
const request = (tenants: TenantRule[], namespace: string, userGroupId: string, namespaceLabels: Record<string, string> | 'unknown' = {}) =>
  admit({
    service: 'ClusterUserGroupService shared',
    tenants,
    namespace,
    namespaceLabels: namespaceLabels === 'unknown' ? undefined : namespaceLabels,
    userGroupId,
  });

describe('admit: deny by default', () => {
  it('no rules: nobody', () => {
    expect(request([], 'team-a', 'x')).toMatchObject({ ok: false, reason: 'NamespaceNotAllowed' });
  });

  it('by name; another namespace is not admitted', () => {
    const rules = [rule({ namespaces: ['team-a'] })];
    expect(request(rules, 'team-a', 'anything')).toEqual({ ok: true, adoption: 'Rotate' });
    const refused = request(rules, 'team-b', 'anything');
    expect(refused).toMatchObject({ ok: false, reason: 'NamespaceNotAllowed' });
    expect(refused.ok || refused.message).toBe(
      'ClusterUserGroupService shared does not serve namespace team-b: none of its spec.tenants entries admits it (a cluster admin decides which namespaces may use it)',
    );
  });

  it('by labels; an unknown namespace (no labels known) is not admitted by any selector, not even {}', () => {
    const rules = [rule({ namespaceSelector: selector({ matchLabels: { tenant: 'yes' } }) })];
    expect(request(rules, 'team-a', 'x', { tenant: 'yes', other: '1' }).ok).toBe(true);
    expect(request(rules, 'team-a', 'x', { tenant: 'no' }).ok).toBe(false);
    expect(request([rule({ namespaceSelector: selector({}) })], 'team-a', 'x', 'unknown').ok).toBe(false);
    expect(request([rule({ namespaceSelector: selector({}) })], 'team-a', 'x', {}).ok).toBe(true);
  });

  it('ids: a prefix with the namespace substituted', () => {
    const rules = [rule({ namespaces: ['team-a', 'team'], userGroupIds: { prefix: '{namespace}.' } })];
    expect(request(rules, 'team-a', 'team-a.acme').ok).toBe(true);
    expect(request(rules, 'team', 'team.acme').ok).toBe(true);
    // "team" must not get team-a's ids: the dot after {namespace} is what keeps them apart.
    expect(request(rules, 'team', 'team-a.acme')).toMatchObject({ ok: false, reason: 'UserGroupIdNotAllowed' });
    const refused = request(rules, 'team-a', 'acme');
    expect(refused.ok || refused.message).toBe(
      'userGroupId "acme" is not one that namespace team-a may claim on ClusterUserGroupService shared; it may claim ids starting with "team-a."',
    );
  });

  it('ids: an exact list, with the namespace substituted; long lists are cut short in messages', () => {
    const rules = [rule({ namespaces: ['team-a'], userGroupIds: { exact: ['acme', '{namespace}-billing'] } })];
    expect(request(rules, 'team-a', 'acme').ok).toBe(true);
    expect(request(rules, 'team-a', 'team-a-billing').ok).toBe(true);
    expect(request(rules, 'team-a', 'acme2').ok).toBe(false);
    const many = [rule({ namespaces: ['n'], userGroupIds: { exact: ['a', 'b', 'c', 'd', 'e', 'f', 'g'] } })];
    const refused = request(many, 'n', 'z');
    expect(refused.ok || refused.message).toMatch(/one of "a", "b", "c", "d", "e" \(and 2 more\)$/);
  });

  it('several admitting rules: any of them may give the id; the first that does sets the adoption policy', () => {
    const rules = [
      rule({ namespaces: ['team-a'], userGroupIds: { prefix: 'a.' }, adoption: 'Refuse' }),
      rule({ namespaceSelector: selector({ matchLabels: { tier: 'gold' } }), userGroupIds: { prefix: 'gold.' }, adoption: 'Keep' }),
      rule({ namespaces: ['team-a'], userGroupIds: { prefix: '' }, adoption: 'Rotate' }),
    ];
    expect(request(rules, 'team-a', 'a.x', { tier: 'gold' })).toEqual({ ok: true, adoption: 'Refuse' });
    expect(request(rules, 'team-a', 'gold.x', { tier: 'gold' })).toEqual({ ok: true, adoption: 'Keep' });
    expect(request(rules, 'team-a', 'other', {})).toEqual({ ok: true, adoption: 'Rotate' });
    expect(request(rules, 'team-b', 'gold.x', { tier: 'gold' })).toEqual({ ok: true, adoption: 'Keep' });
    expect(request(rules, 'team-b', 'a.x', { tier: 'gold' })).toMatchObject({ ok: false, reason: 'UserGroupIdNotAllowed' });
  });
});

describe('label selectors', () => {
  it('matchLabels and every matchExpressions operator, all of which must hold', () => {
    const s = selector({
      matchLabels: { a: '1' },
      matchExpressions: [
        { key: 'b', operator: 'In', values: ['x', 'y'] },
        { key: 'c', operator: 'NotIn', values: ['bad'] },
        { key: 'd', operator: 'Exists' },
        { key: 'e', operator: 'DoesNotExist' },
      ],
    });
    expect(selects(s, { a: '1', b: 'y', d: '' })).toBe(true);
    expect(selects(s, { a: '1', b: 'y', c: 'fine', d: '' })).toBe(true);
    expect(selects(s, { a: '2', b: 'y', d: '' })).toBe(false);
    expect(selects(s, { a: '1', b: 'z', d: '' })).toBe(false);
    expect(selects(s, { a: '1', b: 'y', c: 'bad', d: '' })).toBe(false);
    expect(selects(s, { a: '1', b: 'y' })).toBe(false);
    expect(selects(s, { a: '1', b: 'y', d: '', e: '' })).toBe(false);
  });

  it('refuses malformed selectors', () => {
    expect(parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In' }] }, 's')).toMatchObject({
      ok: false,
      error: 's.matchExpressions[0]: In needs values',
    });
    expect(parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }, 's')).toMatchObject({ ok: false });
    expect(parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Like', values: ['x'] }] }, 's')).toMatchObject({ ok: false });
    expect(parseLabelSelector({ matchLabels: { a: 1 } }, 's')).toMatchObject({ ok: false });
  });
});

describe('parseClusterUserGroupService', () => {
  const parse = (spec: unknown) => {
    const p = parseClusterUserGroupService({ metadata: { name: 'shared', uid: 'u', resourceVersion: '1' }, spec });
    if (!p.ok) throw new Error(p.error);
    return p.value.spec;
  };
  const base = { url: 'https://svc.example.com', apiKeySecretRef: { namespace: 'ops', name: 'key' } };

  it('reads the connection and its rules; adoption defaults to Rotate, the key to apiKey', () => {
    expect(parse({ ...base, tenants: [{ namespaces: ['a'], userGroupIds: { prefix: '{namespace}.' } }] })).toEqual({
      ok: true,
      value: {
        url: base.url,
        allowInsecure: false,
        apiKeySecretRef: { namespace: 'ops', name: 'key', key: 'apiKey' },
        tenants: [{ namespaces: ['a'], namespaceSelector: undefined, userGroupIds: { prefix: '{namespace}.' }, adoption: 'Rotate' }],
      },
    });
    expect(parse(base)).toMatchObject({ ok: true, value: { tenants: [] } });
  });

  it('refuses what the CRD also refuses, with the same reasons', () => {
    const refused = (tenants: unknown[]): string => {
      const spec = parse({ ...base, tenants });
      return spec.ok ? '' : spec.error;
    };
    expect(refused([{ userGroupIds: { prefix: '' } }])).toMatch(/admits no namespace/);
    expect(refused([{ namespaces: ['a'] }])).toMatch(/userGroupIds is required/);
    expect(refused([{ namespaces: ['a'], userGroupIds: { prefix: 'x', exact: ['y'] } }])).toMatch(/exactly one of prefix and exact/);
    expect(refused([{ namespaces: ['a'], userGroupIds: { prefix: '{namespace}-' } }])).toMatch(/follow \{namespace\} with a character/);
    expect(refused([{ namespaces: ['a'], userGroupIds: { exact: ['{ns}'] } }])).toMatch(/only \{namespace\} may appear in braces/);
    expect(refused([{ namespaces: ['a'], userGroupIds: { prefix: '' }, adoption: 'Sometimes' }])).toMatch(/adoption must be one of Rotate, Keep, Refuse/);
    expect(parse({ url: base.url, apiKeySecretRef: { name: 'key' } })).toMatchObject({ ok: false, error: 'spec.apiKeySecretRef needs a namespace and a name' });
  });

  it('prefixProblem: {namespace} must be followed by a character namespace names cannot contain', () => {
    for (const ok of ['', 'shared.', '{namespace}.', '{namespace}:', '{namespace}/', '{namespace}_x', 'org/{namespace}.'])
      expect(prefixProblem(ok), ok).toBeUndefined();
    for (const bad of ['{namespace}', '{namespace}-', '{namespace}a', 'x.{namespace}', '{namespace}.{namespace}'])
      expect(prefixProblem(bad), bad).toBeDefined();
  });
});
