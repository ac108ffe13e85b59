import { describe, expect, it } from 'vitest';
import { objectKey, parseMeta, splitKey } from '../../src/api/meta.js';
import { parseSecret, secretValue } from '../../src/api/secret.js';
import { parseUserGroup, findReadyCondition, type UserGroup } from '../../src/api/usergroup.js';
import { parseUserGroupService } from '../../src/api/usergroupservice.js';
import { UserGroupIdIndex } from '../../src/controller/usergroup-index.js';

function meta(over: Record<string, unknown> = {}): Record<string, unknown> {
  return { name: 'acme', namespace: 'team-a', uid: 'uid-acme', resourceVersion: '5', generation: 2, creationTimestamp: '2025-01-01T00:00:00Z', ...over };
}

function ug(spec: unknown, extra: Record<string, unknown> = {}): UserGroup {
  const parsed = parseUserGroup({ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', metadata: meta(), spec, ...extra });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

function specError(spec: unknown): string {
  const u = ug(spec);
  expect(u.spec.ok).toBe(false);
  return u.spec.ok ? '' : u.spec.error;
}

describe('parseUserGroup', () => {
  it('applies the defaults to a minimal spec', () => {
    const u = ug({ userGroupId: 'acme-1', name: 'Acme' });
    expect(u.metadata.name).toBe('acme');
    expect(u.metadata.namespace).toBe('team-a');
    expect(u.metadata.generation).toBe(2);
    expect(u.spec).toEqual({
      ok: true,
      value: {
        userGroupId: 'acme-1',
        name: 'Acme',
        mapping: undefined,
        properties: undefined,
        tokenSecret: { name: 'acme', key: 'token', labels: {}, annotations: {} },
        serviceRef: undefined,
        suspend: false,
        deletionPolicy: 'Retain',
        rolloutRestartTargets: [],
      },
    });
    expect(u.status).toEqual({});
  });

  it('reads a full spec', () => {
    const u = ug({
      userGroupId: 'acme-1',
      name: 'Acme',
      mapping: { schema: 'ds' },
      properties: { tier: 'gold', nested: { a: [1, 2] } },
      tokenSecret: { name: 'acme-token', key: 'api.token', labels: { l: '1' }, annotations: { a: '2' } },
      serviceRef: { name: 'own-account' },
      suspend: true,
      deletionPolicy: 'Rotate',
      rolloutRestartTargets: [
        { kind: 'Deployment', name: 'web' },
        { kind: 'StatefulSet', name: 'web' },
      ],
    });
    expect(u.spec).toEqual({
      ok: true,
      value: {
        userGroupId: 'acme-1',
        name: 'Acme',
        mapping: { schema: 'ds' },
        properties: { tier: 'gold', nested: { a: [1, 2] } },
        tokenSecret: { name: 'acme-token', key: 'api.token', labels: { l: '1' }, annotations: { a: '2' } },
        serviceRef: { kind: 'UserGroupService', name: 'own-account' },
        suspend: true,
        deletionPolicy: 'Rotate',
        rolloutRestartTargets: [
          { kind: 'Deployment', name: 'web' },
          { kind: 'StatefulSet', name: 'web' },
        ],
      },
    });
  });

  it('refuses a deletionPolicy other than Retain or Rotate', () => {
    expect(ug({ userGroupId: 'acme-1', name: 'Acme', deletionPolicy: 'Delete' }).spec).toEqual({
      ok: false,
      error: 'spec.deletionPolicy must be Retain or Rotate',
    });
  });

  it('refuses restart targets of another kind, a bad name, a repeat, or more than 16', () => {
    const error = 'spec.rolloutRestartTargets must be a list of at most 16 distinct {kind: Deployment|StatefulSet|DaemonSet, name} entries';
    const many = Array.from({ length: 17 }, (_, i) => ({ kind: 'Deployment', name: `d${i}` }));
    for (const targets of [
      [{ kind: 'Pod', name: 'web' }],
      [{ kind: 'Deployment', name: 'Web' }],
      [{ kind: 'Deployment' }],
      [
        { kind: 'Deployment', name: 'web' },
        { kind: 'Deployment', name: 'web' },
      ],
      many,
      { kind: 'Deployment', name: 'web' },
    ]) {
      expect(ug({ userGroupId: 'x', name: 'X', rolloutRestartTargets: targets }).spec).toEqual({ ok: false, error });
    }
    expect(ug({ userGroupId: 'x', name: 'X', rolloutRestartTargets: many.slice(0, 16) }).spec.ok).toBe(true);
  });

  it('reads a serviceRef to a ClusterUserGroupService, and refuses another kind', () => {
    expect(ug({ userGroupId: 'x', name: 'X', serviceRef: { kind: 'ClusterUserGroupService', name: 'shared' } }).spec).toMatchObject({
      ok: true,
      value: { serviceRef: { kind: 'ClusterUserGroupService', name: 'shared' } },
    });
    expect(ug({ userGroupId: 'x', name: 'X', serviceRef: { kind: 'Secret', name: 'shared' } }).spec).toEqual({
      ok: false,
      error: 'spec.serviceRef.kind must be UserGroupService or ClusterUserGroupService',
    });
  });

  it('treats null optional fields as absent', () => {
    const u = ug({ userGroupId: 'x', name: 'X', mapping: null, properties: null, tokenSecret: null, serviceRef: null });
    expect(u.spec.ok && u.spec.value.mapping).toBeUndefined();
    expect(u.spec.ok && u.spec.value.properties).toBeUndefined();
    expect(u.spec.ok && u.spec.value.tokenSecret).toEqual({ name: 'acme', key: 'token', labels: {}, annotations: {} });
  });

  it.each<[string, unknown, RegExp]>([
    ['no spec', undefined, /spec is missing/],
    ['missing userGroupId', { name: 'X' }, /spec\.userGroupId/],
    ['empty userGroupId', { userGroupId: '', name: 'X' }, /spec\.userGroupId/],
    ['a 256-character userGroupId', { userGroupId: 'x'.repeat(256), name: 'X' }, /spec\.userGroupId.*1 to 255/],
    ['missing name', { userGroupId: 'x' }, /spec\.name/],
    ['empty name', { userGroupId: 'x', name: '' }, /spec\.name/],
    ['a numeric name', { userGroupId: 'x', name: 5 }, /spec\.name/],
    ['a non-string mapping value', { userGroupId: 'x', name: 'X', mapping: { a: 1 } }, /spec\.mapping/],
    ['a mapping that is an array', { userGroupId: 'x', name: 'X', mapping: ['a'] }, /spec\.mapping/],
    ['properties that are an array', { userGroupId: 'x', name: 'X', properties: [1] }, /spec\.properties/],
    ['properties that are a string', { userGroupId: 'x', name: 'X', properties: 'p' }, /spec\.properties/],
    ['an upper-case tokenSecret name', { userGroupId: 'x', name: 'X', tokenSecret: { name: 'Acme' } }, /spec\.tokenSecret\.name/],
    ['a tokenSecret name with a slash', { userGroupId: 'x', name: 'X', tokenSecret: { name: 'a/b' } }, /spec\.tokenSecret\.name/],
    ['an empty tokenSecret name', { userGroupId: 'x', name: 'X', tokenSecret: { name: '' } }, /spec\.tokenSecret\.name/],
    ['a too-long tokenSecret name', { userGroupId: 'x', name: 'X', tokenSecret: { name: 'a'.repeat(254) } }, /spec\.tokenSecret\.name/],
    ['a tokenSecret key with a slash', { userGroupId: 'x', name: 'X', tokenSecret: { key: 'a/b' } }, /spec\.tokenSecret\.key/],
    ['a tokenSecret that is a string', { userGroupId: 'x', name: 'X', tokenSecret: 'acme' }, /spec\.tokenSecret/],
    ['non-string tokenSecret labels', { userGroupId: 'x', name: 'X', tokenSecret: { labels: { a: true } } }, /labels and annotations/],
    ['non-string tokenSecret annotations', { userGroupId: 'x', name: 'X', tokenSecret: { annotations: { a: 1 } } }, /labels and annotations/],
    ['a serviceRef without name', { userGroupId: 'x', name: 'X', serviceRef: {} }, /spec\.serviceRef\.name/],
    ['a string suspend', { userGroupId: 'x', name: 'X', suspend: 'yes' }, /spec\.suspend/],
  ])('reports %s as an invalid spec with valid metadata', (_what, spec, error) => {
    expect(specError(spec)).toMatch(error);
    expect(ug(spec).metadata.uid).toBe('uid-acme');
  });

  it('accepts a 255-character userGroupId and a dotted Secret name', () => {
    expect(ug({ userGroupId: 'x'.repeat(255), name: 'X', tokenSecret: { name: 'acme.token-1' } }).spec.ok).toBe(true);
  });

  it('counts userGroupId in characters (code points), as admission and the service do', () => {
    expect(ug({ userGroupId: '\u{1F600}'.repeat(255), name: 'X' }).spec.ok).toBe(true);
    expect(specError({ userGroupId: '\u{1F600}'.repeat(256), name: 'X' })).toMatch(/1 to 255 characters/);
  });

  it('refuses properties nested deeper than 100 levels, without recursing (10,000 levels pass admission)', () => {
    const nest = (depth: number): Record<string, unknown> => {
      let value: Record<string, unknown> = {};
      for (let i = 1; i < depth; i++) value = { a: value };
      return value;
    };
    expect(ug({ userGroupId: 'a', name: 'A', properties: nest(100) }).spec.ok).toBe(true);
    expect(specError({ userGroupId: 'a', name: 'A', properties: nest(101) })).toBe('spec.properties is nested more than 100 levels deep');
    expect(specError({ userGroupId: 'a', name: 'A', properties: { list: [nest(100)] } })).toMatch(/nested more than 100/);
    expect(specError({ userGroupId: 'a', name: 'A', properties: nest(100_000) })).toMatch(/nested more than 100/);
  });

  describe('size limits (docs/usergroup-reference.md "Limits"): an over-limit spec is invalid and keeps none of its payload', () => {
    const base = { userGroupId: 'a', name: 'A' };
    const entries = (n: number, value: (i: number) => unknown): Record<string, unknown> =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value(i)]));

    /** The spec is refused with this message, and the parsed object is small whatever the payload was. */
    function refused(spec: Record<string, unknown>, error: string | RegExp, annotations?: Record<string, string>): void {
      const parsed = parseUserGroup({ metadata: meta(annotations ? { annotations } : {}), spec });
      if (!parsed.ok) throw new Error(parsed.error);
      expect(parsed.value.spec.ok).toBe(false);
      expect(parsed.value.spec.ok ? '' : parsed.value.spec.error).toMatch(error);
      expect(JSON.stringify(parsed.value).length, 'parsed object size').toBeLessThan(1000);
    }

    it('properties: 64 top-level entries and 16384 bytes of JSON pass, one more of either does not', () => {
      expect(ug({ ...base, properties: entries(64, (i) => i) }).spec.ok).toBe(true);
      refused({ ...base, properties: entries(65, (i) => i) }, 'spec.properties has 65 entries; at most 64 are allowed');
      // {"blob":"…"} is 11 bytes of JSON around the string.
      expect(ug({ ...base, properties: { blob: 'x'.repeat(16_384 - 11) } }).spec.ok).toBe(true);
      refused({ ...base, properties: { blob: 'x'.repeat(16_384 - 10) } }, 'spec.properties is 16385 bytes as JSON; at most 16384 are allowed');
      // Nested, where admission cannot see it; counted in UTF-8 bytes (ü is 2).
      refused({ ...base, properties: { a: { b: ['ü'.repeat(9000)] } } }, /^spec\.properties is 180\d\d bytes as JSON; at most 16384 are allowed$/);
      refused({ ...base, properties: { a: { blob: 'x'.repeat(1_100_000) } } }, /spec\.properties is 1100\d{3} bytes as JSON/);
    });

    it('mapping: 64 entries, keys of 1 to 253 characters, values of at most 1024, 16384 characters in all', () => {
      expect(ug({ ...base, mapping: entries(64, () => 'ds') }).spec.ok).toBe(true);
      refused({ ...base, mapping: entries(65, () => 'ds') }, 'spec.mapping has 65 entries; at most 64 are allowed');
      expect(ug({ ...base, mapping: { ['k'.repeat(253)]: 'v'.repeat(1024) } }).spec.ok).toBe(true);
      refused({ ...base, mapping: { ['k'.repeat(254)]: 'v' } }, 'spec.mapping keys must be 1 to 253 characters');
      refused({ ...base, mapping: { '': 'v' } }, 'spec.mapping keys must be 1 to 253 characters');
      refused({ ...base, mapping: { k: 'v'.repeat(1025) } }, 'spec.mapping values must be at most 1024 characters');
      // Characters are code points, as CEL's size() and maxLength count them: 1024 emoji are 2048 UTF-16 units.
      expect(ug({ ...base, mapping: { k: '\u{1F600}'.repeat(1024) } }).spec.ok).toBe(true);
      // 16 × (3 + 1021) = 16384 characters pass; 17 entries do not.
      expect(ug({ ...base, mapping: entries(16, () => 'v'.repeat(1021)) }).spec.ok).toBe(true);
      refused({ ...base, mapping: entries(17, () => 'v'.repeat(1021)) }, 'spec.mapping must be at most 16384 characters in total (keys and values)');
    });

    it('tokenSecret: 64 labels, 64 annotations, 16384 characters of annotations', () => {
      expect(ug({ ...base, tokenSecret: { labels: entries(64, () => 'v'), annotations: entries(64, () => 'v') } }).spec.ok).toBe(true);
      refused({ ...base, tokenSecret: { labels: entries(65, () => 'v') } }, 'spec.tokenSecret.labels has 65 entries; at most 64 are allowed');
      refused({ ...base, tokenSecret: { annotations: entries(65, () => 'v') } }, 'spec.tokenSecret.annotations has 65 entries; at most 64 are allowed');
      expect(ug({ ...base, tokenSecret: { annotations: { k: 'v'.repeat(16_383) } } }).spec.ok).toBe(true);
      refused(
        { ...base, tokenSecret: { annotations: { k: 'v'.repeat(16_384) } } },
        'spec.tokenSecret.annotations must be at most 16384 characters in total (keys and values)',
      );
    });

    it('a rotation request of more than 256 characters makes the spec invalid and is not kept', () => {
      const rotate = 'usergroup.dev/rotate-requested-at';
      const ok = parseUserGroup({ metadata: meta({ annotations: { [rotate]: 'r'.repeat(256) } }), spec: base });
      expect(ok.ok && ok.value.spec.ok && ok.value.metadata.annotations[rotate]).toBe('r'.repeat(256));
      refused(base, `the ${rotate} annotation is longer than 256 characters; use a short value such as a timestamp`, { [rotate]: 'r'.repeat(257) });
      // Only a short stand-in is kept, one that changes with the value, so the change is still noticed.
      const standIn = (value: string): string | undefined => {
        const parsed = parseUserGroup({ metadata: meta({ annotations: { [rotate]: value } }), spec: base });
        if (!parsed.ok) throw new Error(parsed.error);
        expect(objectKey(parsed.value.metadata)).toBe('team-a/acme');
        return parsed.value.metadata.annotations[rotate];
      };
      expect(standIn('r'.repeat(250_000))).toMatch(/^\(over 256 characters\) sha256:[0-9a-f]{64}$/);
      expect(standIn('r'.repeat(250_000))).toBe(standIn('r'.repeat(250_000)));
      expect(standIn('r'.repeat(250_000))).not.toBe(standIn('s'.repeat(250_000)));
      expect(standIn('r'.repeat(250_000))?.length).toBeLessThanOrEqual(256);
    });
  });

  it('fails only for unusable metadata', () => {
    expect(parseUserGroup('nope')).toEqual({ ok: false, error: 'UserGroup is not an object' });
    expect(parseUserGroup({ metadata: meta({ name: undefined }), spec: {} }).ok).toBe(false);
    expect(parseUserGroup({ metadata: meta({ uid: undefined }), spec: {} }).ok).toBe(false);
    expect(parseUserGroup({ metadata: meta({ annotations: { 'usergroup.dev/rotate-requested-at': 1 } }), spec: {} }).ok).toBe(false);
    // Labels are not kept on UserGroups, so a malformed one (the apiserver never sends one) costs nothing.
    expect(parseUserGroup({ metadata: meta({ labels: { a: 1 } }), spec: {} }).ok).toBe(true);
    expect(parseMeta(meta({ labels: { a: 1 } })).ok).toBe(false);
  });

  it('reads a complete status', () => {
    const status = {
      observedGeneration: 2,
      conditions: [{ type: 'Ready', status: 'True', reason: 'Synced', message: 'ok', lastTransitionTime: '2025-01-01T00:00:00Z', observedGeneration: 2 }],
      teamId: 17,
      providedId: 'acme-1',
      environmentTag: 'Customer',
      tokenSecretName: 'acme',
      lastSyncTime: '2025-01-01T00:00:00Z',
      syncedHash: 'sha256:abc',
      rotation: { lastHandledRequest: '1700000000', lastRotationTime: '2025-01-01T00:00:00Z' },
    };
    const u = ug({ userGroupId: 'x', name: 'X' }, { status });
    expect(u.status).toEqual(status);
    expect(findReadyCondition(u.status)?.reason).toBe('Synced');
  });

  it('tolerates a garbage status', () => {
    for (const status of [null, 'x', 5, [], true]) expect(ug({ userGroupId: 'x', name: 'X' }, { status }).status).toEqual({});
    const u = ug(
      { userGroupId: 'x', name: 'X' },
      {
        status: {
          observedGeneration: 'two',
          conditions: [
            null,
            'x',
            { type: 'Ready', status: 'Maybe' },
            { status: 'True' },
            { type: 'Ready', status: 'False', reason: 5, observedGeneration: 'x' },
          ],
          teamId: '17',
          providedId: 3,
          lastSyncTime: {},
          syncedHash: [],
          rotation: 'yesterday',
          unknownField: 1,
        },
      },
    );
    expect(u.status).toEqual({ conditions: [{ type: 'Ready', status: 'False', reason: '', message: '', lastTransitionTime: '' }] });
    expect(ug({ userGroupId: 'x', name: 'X' }, { status: { conditions: 'x', rotation: { lastHandledRequest: 5 } } }).status).toEqual({ rotation: {} });
    expect(findReadyCondition({})).toBeUndefined();
  });
});

describe('parseMeta', () => {
  it('keeps only well-formed owner references and normalises controller', () => {
    const m = parseMeta(
      meta({
        ownerReferences: [
          { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'a', uid: 'u1', controller: true },
          { kind: 'UserGroup', name: 'b', uid: 'u2', controller: 'true' },
          { kind: 'UserGroup', name: 'c' },
          'junk',
        ],
        deletionTimestamp: '2025-02-02T00:00:00Z',
      }),
    );
    expect(m.ok && m.value.ownerReferences).toEqual([
      { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'a', uid: 'u1', controller: true },
      { apiVersion: '', kind: 'UserGroup', name: 'b', uid: 'u2', controller: false },
    ]);
    expect(m.ok && m.value.deletionTimestamp).toBe('2025-02-02T00:00:00Z');
  });

  it('objectKey and splitKey are inverse', () => {
    expect(objectKey({ namespace: 'ns', name: 'n' })).toBe('ns/n');
    expect(splitKey('ns/n')).toEqual({ namespace: 'ns', name: 'n' });
    expect(splitKey('cluster-scoped')).toEqual({ namespace: '', name: 'cluster-scoped' });
  });

  it('gives parsed metadata its key, without adding a visible field', () => {
    const m = parseMeta(meta());
    if (!m.ok) throw new Error(m.error);
    expect(objectKey(m.value)).toBe('team-a/acme');
    expect(Object.keys(m.value)).not.toContain('key');
    expect(JSON.stringify(m.value)).not.toContain('team-a/acme');
    // Metadata copied or built by hand still has its key.
    expect(objectKey({ ...m.value, name: 'other' })).toBe('team-a/other');
  });

  it("keeps only the rotation request of a UserGroup's metadata; other kinds keep all of it", () => {
    const lastApplied = '{"apiVersion":"usergroup.dev/v1"}';
    const raw = meta({
      annotations: {
        'kubectl.kubernetes.io/last-applied-configuration': lastApplied,
        'usergroup.dev/rotate-requested-at': 'r1',
        'example.com/big': 'x'.repeat(200_000),
      },
      labels: { team: 'a', 'example.com/big': 'y'.repeat(63) },
      ownerReferences: [{ apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name: 'app', uid: 'u9', controller: true }],
    });
    const parsed = parseUserGroup({ metadata: raw, spec: { userGroupId: 'g', name: 'G' } });
    if (!parsed.ok) throw new Error(parsed.error);
    expect(parsed.value.metadata.annotations).toEqual({ 'usergroup.dev/rotate-requested-at': 'r1' });
    expect(parsed.value.metadata.labels).toEqual({});
    expect(parsed.value.metadata.ownerReferences).toEqual([]);
    // What the controller and the plugin read is all there.
    expect(parsed.value.metadata).toMatchObject({
      name: 'acme',
      namespace: 'team-a',
      uid: 'uid-acme',
      resourceVersion: '5',
      generation: 2,
      creationTimestamp: '2025-01-01T00:00:00Z',
    });
    expect(objectKey(parsed.value.metadata)).toBe('team-a/acme');
    expect(JSON.stringify(parsed.value).length).toBeLessThan(1000);

    const withoutRotation = parseUserGroup({
      metadata: meta({ annotations: { 'kubectl.kubernetes.io/last-applied-configuration': lastApplied } }),
      spec: { userGroupId: 'g', name: 'G' },
    });
    expect(withoutRotation.ok && withoutRotation.value.metadata.annotations).toEqual({});

    const secret = parseSecret({ metadata: raw, data: {} });
    expect(secret.ok && Object.keys(secret.value.metadata.annotations).sort()).toEqual([
      'example.com/big',
      'kubectl.kubernetes.io/last-applied-configuration',
      'usergroup.dev/rotate-requested-at',
    ]);
    expect(secret.ok && secret.value.metadata.labels).toEqual({ team: 'a', 'example.com/big': 'y'.repeat(63) });
    expect(secret.ok && secret.value.metadata.ownerReferences).toHaveLength(1);
  });

  it('parseMeta keeps only what it is asked to keep', () => {
    const raw = meta({ annotations: { a: '1', b: '2' }, labels: { l: 'v' }, ownerReferences: [{ kind: 'K', name: 'n', uid: 'u' }] });
    const all = parseMeta(raw);
    expect(all.ok && all.value.annotations).toEqual({ a: '1', b: '2' });
    const some = parseMeta(raw, { annotations: ['b', 'absent'], labels: false, ownerReferences: false });
    if (!some.ok) throw new Error(some.error);
    expect(some.value.annotations).toEqual({ b: '2' });
    expect(some.value.labels).toEqual({});
    expect(some.value.ownerReferences).toEqual([]);
    // A kept annotation must still be a string; one that is not kept is not looked at.
    expect(parseMeta(meta({ annotations: { a: 1, b: '2' } }), { annotations: ['b'] }).ok).toBe(true);
    expect(parseMeta(meta({ annotations: { a: 1, b: '2' } }), { annotations: ['a'] }).ok).toBe(false);
  });
});

describe('parseUserGroupService', () => {
  const svc = (spec: unknown) => {
    const p = parseUserGroupService({ metadata: meta({ name: 'own-account' }), spec });
    if (!p.ok) throw new Error(p.error);
    return p.value;
  };

  it('defaults the API key key to apiKey and allowInsecure to false', () => {
    expect(svc({ url: 'https://svc.example', apiKeySecretRef: { name: 'creds' } }).spec).toEqual({
      ok: true,
      value: { url: 'https://svc.example', apiKeySecretRef: { name: 'creds', key: 'apiKey' }, allowInsecure: false },
    });
  });

  it('reads an explicit key and allowInsecure', () => {
    expect(svc({ url: 'http://svc', apiKeySecretRef: { name: 'creds', key: 'k' }, allowInsecure: true }).spec).toEqual({
      ok: true,
      value: { url: 'http://svc', apiKeySecretRef: { name: 'creds', key: 'k' }, allowInsecure: true },
    });
  });

  it.each<[string, unknown, RegExp]>([
    ['no spec', undefined, /spec is missing/],
    ['no url', { apiKeySecretRef: { name: 'c' } }, /spec\.url/],
    ['no apiKeySecretRef', { url: 'https://x' }, /spec\.apiKeySecretRef\.name/],
    ['an empty key', { url: 'https://x', apiKeySecretRef: { name: 'c', key: '' } }, /spec\.apiKeySecretRef\.key/],
    ['a string allowInsecure', { url: 'https://x', apiKeySecretRef: { name: 'c' }, allowInsecure: 'yes' }, /spec\.allowInsecure/],
  ])('reports %s as an invalid spec', (_what, spec, error) => {
    const s = svc(spec);
    expect(s.spec.ok).toBe(false);
    expect(s.spec.ok ? '' : s.spec.error).toMatch(error);
    expect(s.metadata.name).toBe('own-account');
  });
});

describe('parseSecret', () => {
  it('decodes values through secretValue', () => {
    const p = parseSecret({
      metadata: meta({ name: 'acme' }),
      data: { token: Buffer.from('tök€n-1').toString('base64'), empty: '', bad: 5 },
    });
    expect(p.ok).toBe(true);
    if (!p.ok) return;
    expect(p.value.type).toBe('Opaque');
    expect(secretValue(p.value, 'token')).toBe('tök€n-1');
    expect(secretValue(p.value, 'empty')).toBe('');
    expect(secretValue(p.value, 'bad')).toBeUndefined();
    expect(secretValue(p.value, 'absent')).toBeUndefined();
    expect(p.value.metadata.labels).toEqual({});
  });

  it('keeps the type and tolerates a missing data map', () => {
    const p = parseSecret({ metadata: meta(), type: 'kubernetes.io/tls' });
    expect(p.ok && p.value.type).toBe('kubernetes.io/tls');
    expect(p.ok && p.value.data).toEqual({});
    expect(parseSecret(null).ok).toBe(false);
  });
});

describe('UserGroupIdIndex', () => {
  const group = (name: string, spec: unknown, namespace = 'team-a'): UserGroup => {
    const p = parseUserGroup({ metadata: meta({ name, namespace, uid: `uid-${namespace}-${name}` }), spec });
    if (!p.ok) throw new Error(p.error);
    return p.value;
  };

  it('indexes added groups by userGroupId across namespaces', () => {
    const index = new UserGroupIdIndex();
    index.update('added', group('a', { userGroupId: 'id-1', name: 'A' }));
    index.update('added', group('b', { userGroupId: 'id-1', name: 'B' }, 'team-b'));
    index.update('added', group('c', { userGroupId: 'id-2', name: 'C' }));
    expect(index.keys('id-1').sort()).toEqual(['team-a/a', 'team-b/b']);
    expect(index.keys('id-2')).toEqual(['team-a/c']);
    expect(index.keys('id-3')).toEqual([]);
    expect(index.idFor('team-a/a')).toBe('id-1');
  });

  it('moves a group whose id changes', () => {
    const index = new UserGroupIdIndex();
    index.update('added', group('a', { userGroupId: 'id-1', name: 'A' }));
    index.update('updated', group('a', { userGroupId: 'id-2', name: 'A' }));
    expect(index.keys('id-1')).toEqual([]);
    expect(index.keys('id-2')).toEqual(['team-a/a']);
    expect(index.idFor('team-a/a')).toBe('id-2');
  });

  it('is idempotent for repeated updates', () => {
    const index = new UserGroupIdIndex();
    index.update('added', group('a', { userGroupId: 'id-1', name: 'A' }));
    index.update('updated', group('a', { userGroupId: 'id-1', name: 'A2' }));
    expect(index.keys('id-1')).toEqual(['team-a/a']);
  });

  it('forgets deleted groups', () => {
    const index = new UserGroupIdIndex();
    index.update('added', group('a', { userGroupId: 'id-1', name: 'A' }));
    index.update('added', group('b', { userGroupId: 'id-1', name: 'B' }));
    index.update('deleted', group('a', { userGroupId: 'id-1', name: 'A' }));
    expect(index.keys('id-1')).toEqual(['team-a/b']);
    expect(index.idFor('team-a/a')).toBeUndefined();
    index.update('deleted', group('b', { userGroupId: 'id-1', name: 'B' }));
    expect(index.keys('id-1')).toEqual([]);
  });

  it('removes a group whose spec became invalid', () => {
    const index = new UserGroupIdIndex();
    index.update('added', group('a', { userGroupId: 'id-1', name: 'A' }));
    index.update('updated', group('a', { userGroupId: 'id-1' }));
    expect(index.keys('id-1')).toEqual([]);
    expect(index.idFor('team-a/a')).toBeUndefined();
  });
});
