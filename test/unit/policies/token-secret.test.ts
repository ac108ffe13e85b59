// The token-Secret policy (policies/token-secret.ts): sealed token records, inspected and written.
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ROTATION_HANDLED_ANNOTATION,
  ROTATION_PENDING_ANNOTATION,
  TOKEN_RECORD_ANNOTATION,
  TOKEN_SHA256_ANNOTATION,
  USERGROUP_LABEL,
  USERGROUP_UID_ANNOTATION,
} from '../../../src/api/constants.js';
import type { ObjectMeta, OwnerReference } from '../../../src/api/meta.js';
import { isTokenSecret, metadataDigest, parseCachedSecret, parseSecret, parseTokenSecretMeta, type ObservedSecret } from '../../../src/api/secret.js';
import type { UserGroupSpec } from '../../../src/api/usergroup.js';
import { sha256Hex } from '../../../src/controller/hash.js';
import { desiredSecret, holdsRecord, inspectSecret, keptSecret, type SecretContent } from '../../../src/controller/policies/token-secret.js';
import { secretMatches } from '../../../src/kube/secret-writer.js';
import { SecretValue } from '../../../src/service/secret-value.js';
import { OWNER, OTHER_SEAL, SEAL, storedSecret, userGroupSpec } from '../../support/fixtures.js';

const TOKEN = 'tok_4f1c9a7e2b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e';

function spec(tokenSecret: Partial<UserGroupSpec['tokenSecret']> = {}): UserGroupSpec {
  return userGroupSpec({ tokenSecret: { name: 'acme-token', key: 'token', labels: {}, annotations: {}, ...tokenSecret } });
}

function content(over: Partial<SecretContent> = {}): SecretContent {
  return { token: new SecretValue(TOKEN), handled: undefined, pending: undefined, ...over };
}

/** Builds an observed Secret from raw apiserver-shaped JSON. */
function observed(raw: {
  ownerReferences?: unknown[];
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  data?: Record<string, string>;
  type?: string;
}): ObservedSecret {
  const parsed = parseSecret({
    apiVersion: 'v1',
    kind: 'Secret',
    type: raw.type ?? 'Opaque',
    metadata: {
      name: 'acme-token',
      namespace: 'team-a',
      uid: 'uid-secret',
      resourceVersion: '42',
      labels: raw.labels,
      annotations: raw.annotations,
      ownerReferences: raw.ownerReferences,
    },
    data: raw.data,
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** What the apiserver returns after the operator wrote desiredSecret(..., SEAL). */
function roundTrip(owner: ObjectMeta, s: UserGroupSpec, c: SecretContent): ObservedSecret {
  const d = desiredSecret(owner, s, c, SEAL);
  const parsed = parseSecret(JSON.parse(JSON.stringify(storedSecret(d, '42'))));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

const RECORD = expect.stringMatching(/^[0-9a-f]{64}$/) as unknown as string;
const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const controllerRef = { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: 'uid-acme', controller: true };

describe('inspectSecret', () => {
  it('reports a missing Secret', () => {
    expect(inspectSecret(undefined, OWNER, spec(), SEAL)).toEqual({ state: 'missing' });
  });

  it('reports a Secret without owner references as foreign', () => {
    const s = observed({ data: { token: b64(TOKEN) }, annotations: { [TOKEN_SHA256_ANNOTATION]: sha256Hex(TOKEN) } });
    expect(inspectSecret(s, OWNER, spec(), SEAL)).toEqual({ state: 'foreign', ownerKind: undefined });
  });

  it('reports a Secret controlled by another object as foreign, naming its kind', () => {
    const s = observed({ ownerReferences: [{ ...controllerRef, uid: 'uid-other' }], data: { token: b64(TOKEN) } });
    expect(inspectSecret(s, OWNER, spec(), SEAL)).toEqual({ state: 'foreign', ownerKind: 'UserGroup' });
    const byDeployment = observed({ ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'x', uid: 'uid-dep', controller: true }] });
    expect(inspectSecret(byDeployment, OWNER, spec(), SEAL)).toEqual({ state: 'foreign', ownerKind: 'Deployment' });
  });

  it('reports a Secret that references this UserGroup without being controlled by it as foreign', () => {
    const s = observed({ ownerReferences: [{ ...controllerRef, controller: false }], data: { token: b64(TOKEN) } });
    expect(inspectSecret(s, OWNER, spec(), SEAL).state).toBe('foreign');
    const noFlag = observed({ ownerReferences: [{ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: 'uid-acme' }] });
    expect(inspectSecret(noFlag, OWNER, spec(), SEAL).state).toBe('foreign');
  });

  it('reads an owned, intact Secret', () => {
    const s = roundTrip(OWNER, spec(), content());
    const i = inspectSecret(s, OWNER, spec(), SEAL);
    expect(i.state).toBe('owned');
    if (i.state !== 'owned') return;
    expect(i.token?.reveal()).toBe(TOKEN);
    expect(i.handled).toBeUndefined();
    expect(i.pending).toBeUndefined();
    expect(i.resourceVersion).toBe('42');
    expect(i.secret).toBe(s);
  });

  it('reads the token under a custom key', () => {
    const s2 = spec({ key: 'api.token' });
    const i = inspectSecret(roundTrip(OWNER, s2, content()), OWNER, s2, SEAL);
    expect(i.state === 'owned' && i.token?.reveal()).toBe(TOKEN);
  });

  it('does not vouch for a token edited by hand', () => {
    const s = roundTrip(OWNER, spec(), content());
    const edited: ObservedSecret = { ...s, data: { token: b64('hand-edited') } };
    const i = inspectSecret(edited, OWNER, spec(), SEAL);
    expect(i.state).toBe('owned');
    expect(i.state === 'owned' && i.token).toBeUndefined();
  });

  it('does not vouch for a token without a record (a Secret of an earlier version, or one whose record was removed)', () => {
    const s = observed({ ownerReferences: [controllerRef], data: { token: b64(TOKEN) }, annotations: { [TOKEN_SHA256_ANNOTATION]: sha256Hex(TOKEN) } });
    const i = inspectSecret(s, OWNER, spec(), SEAL);
    expect(i.state === 'owned' && i.token).toBeUndefined();
  });

  it('does not vouch for a planted token, even with its sha256 annotation "fixed" (rotation hijack)', () => {
    const s = roundTrip(OWNER, spec(), content());
    const victim = 'tok_victim_0000000000000000000000000000000000000000000000000000000';
    const planted: ObservedSecret = {
      ...s,
      data: { token: b64(victim) },
      metadata: { ...s.metadata, annotations: { ...s.metadata.annotations, [TOKEN_SHA256_ANNOTATION]: sha256Hex(victim) } },
    };
    const i = inspectSecret(planted, OWNER, spec(), SEAL);
    expect(i.state === 'owned' && [i.token, i.handled, i.pending]).toEqual([undefined, undefined, undefined]);
  });

  it('ignores forged rotation bookkeeping: a rotation-handled or rotation-pending mark without the record', () => {
    const s = roundTrip(OWNER, spec(), content());
    for (const forged of [{ [ROTATION_HANDLED_ANNOTATION]: 'requested' }, { [ROTATION_PENDING_ANNOTATION]: 'requested' }] as Record<string, string>[]) {
      const edited: ObservedSecret = { ...s, metadata: { ...s.metadata, annotations: { ...s.metadata.annotations, ...forged } } };
      const i = inspectSecret(edited, OWNER, spec(), SEAL);
      expect(i.state === 'owned' && [i.token, i.handled, i.pending]).toEqual([undefined, undefined, undefined]);
    }
  });

  it('does not vouch for a record sealed under another account, for another UserGroup, or for another id', () => {
    const s = roundTrip(OWNER, spec(), content());
    expect(inspectSecret(s, OWNER, spec(), OTHER_SEAL)).toMatchObject({ state: 'owned', token: undefined });
    // A copy of this very Secret (data and annotations) adopted by another UserGroup of the namespace.
    const twin = { ...OWNER, name: 'acme-twin', uid: 'uid-twin' };
    const copied: ObservedSecret = { ...s, metadata: { ...s.metadata, ownerReferences: [{ ...controllerRef, uid: 'uid-twin' }] } };
    expect(inspectSecret(copied, twin, spec(), SEAL)).toMatchObject({ state: 'owned', token: undefined });
    expect(inspectSecret(s, OWNER, { ...spec(), userGroupId: 'other-id' }, SEAL)).toMatchObject({ state: 'owned', token: undefined });
  });

  it('does not vouch for a missing key or an empty token', () => {
    const missingKey = observed({
      ownerReferences: [controllerRef],
      data: { other: b64(TOKEN) },
      annotations: { [TOKEN_SHA256_ANNOTATION]: sha256Hex(TOKEN) },
    });
    const i = inspectSecret(missingKey, OWNER, spec(), SEAL);
    expect(i.state).toBe('owned');
    expect(i.state === 'owned' && i.token).toBeUndefined();
    const empty = observed({ ownerReferences: [controllerRef], data: { token: '' }, annotations: { [TOKEN_SHA256_ANNOTATION]: sha256Hex('') } });
    const e = inspectSecret(empty, OWNER, spec(), SEAL);
    expect(e.state).toBe('owned');
    expect(e.state === 'owned' && e.token).toBeUndefined();
  });

  it('reads handled and pending from a sealed record only', () => {
    const s = roundTrip(OWNER, spec(), content({ handled: 'v1', pending: 'v2' }));
    const i = inspectSecret(s, OWNER, spec(), SEAL);
    expect(i.state === 'owned' && [i.handled, i.pending]).toEqual(['v1', 'v2']);
    const raw = observed({ ownerReferences: [controllerRef], annotations: { [ROTATION_HANDLED_ANNOTATION]: 'h', [ROTATION_PENDING_ANNOTATION]: 'p' } });
    const j = inspectSecret(raw, OWNER, spec(), SEAL);
    expect(j.state === 'owned' && [j.handled, j.pending, j.token]).toEqual([undefined, undefined, undefined]);
  });
});

describe('holdsRecord', () => {
  it("recognises this account's record on an owned Secret, even after spec.tokenSecret moved on", () => {
    const old = roundTrip(OWNER, spec({ name: 'acme-old', key: 'old.key' }), content());
    expect(holdsRecord(old, OWNER, 'acme-1', SEAL)).toBe(true);
    expect(holdsRecord(old, OWNER, 'acme-1', OTHER_SEAL)).toBe(false);
    expect(holdsRecord(old, { ...OWNER, uid: 'uid-other' }, 'acme-1', SEAL)).toBe(false);
    expect(holdsRecord({ ...old, data: { ...old.data, extra: b64('x') } }, OWNER, 'acme-1', SEAL)).toBe(false);
  });
});

describe('desiredSecret', () => {
  const userSpec = spec({
    labels: { team: 'payments', [MANAGED_BY_LABEL]: 'helm', [USERGROUP_LABEL]: 'spoof' },
    annotations: { note: 'hello', [TOKEN_SHA256_ANNOTATION]: 'spoofed-hash' },
  });

  it('is an Opaque Secret of the configured name in the owner namespace', () => {
    const d = desiredSecret(OWNER, userSpec, content(), SEAL);
    expect(d.apiVersion).toBe('v1');
    expect(d.kind).toBe('Secret');
    expect(d.type).toBe('Opaque');
    expect(d.metadata?.name).toBe('acme-token');
    expect(d.metadata?.namespace).toBe('team-a');
  });

  it('carries user labels plus the managed labels, which win on the same key', () => {
    const d = desiredSecret(OWNER, userSpec, content(), SEAL);
    expect(d.metadata?.labels).toEqual({ team: 'payments', [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [USERGROUP_LABEL]: 'acme' });
  });

  it('carries user annotations plus the token hash (which wins), and handled/pending only when defined', () => {
    const d = desiredSecret(OWNER, userSpec, content(), SEAL);
    expect(d.metadata?.annotations).toEqual({
      note: 'hello',
      [TOKEN_SHA256_ANNOTATION]: sha256Hex(TOKEN),
      [TOKEN_RECORD_ANNOTATION]: RECORD,
      [USERGROUP_UID_ANNOTATION]: OWNER.uid,
    });
    const withBoth = desiredSecret(OWNER, userSpec, content({ handled: 'v1', pending: 'v2' }), SEAL);
    expect(withBoth.metadata?.annotations).toEqual({
      note: 'hello',
      [TOKEN_SHA256_ANNOTATION]: sha256Hex(TOKEN),
      [TOKEN_RECORD_ANNOTATION]: RECORD,
      [USERGROUP_UID_ANNOTATION]: OWNER.uid,
      [ROTATION_HANDLED_ANNOTATION]: 'v1',
      [ROTATION_PENDING_ANNOTATION]: 'v2',
    });
    // The record covers the bookkeeping: a different mark is a different record.
    expect(withBoth.metadata?.annotations?.[TOKEN_RECORD_ANNOTATION]).not.toBe(d.metadata?.annotations?.[TOKEN_RECORD_ANNOTATION]);
    const handledOnly = desiredSecret(OWNER, userSpec, content({ handled: 'v1' }), SEAL);
    expect(handledOnly.metadata?.annotations).not.toHaveProperty([ROTATION_PENDING_ANNOTATION]);
  });

  it('never lets user annotations set the rotation bookkeeping annotations', () => {
    // spec.tokenSecret.annotations is user input; the bookkeeping annotations decide whether a rotation
    // request counts as handled, so a user value must not stand in for "handled" or "pending".
    const sneaky = spec({
      annotations: { [ROTATION_HANDLED_ANNOTATION]: 'v9', [ROTATION_PENDING_ANNOTATION]: 'v8', [TOKEN_RECORD_ANNOTATION]: 'f'.repeat(64) },
    });
    const d = desiredSecret(OWNER, sneaky, content(), SEAL);
    expect(d.metadata?.annotations?.[TOKEN_RECORD_ANNOTATION]).not.toBe('f'.repeat(64));
    expect(d.metadata?.annotations).not.toHaveProperty([ROTATION_HANDLED_ANNOTATION]);
    expect(d.metadata?.annotations).not.toHaveProperty([ROTATION_PENDING_ANNOTATION]);
  });

  it('is controlled by the UserGroup', () => {
    const d = desiredSecret(OWNER, userSpec, content(), SEAL);
    expect(d.metadata?.ownerReferences).toEqual([{ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: 'uid-acme', controller: true }]);
  });

  it('stores the token base64-encoded under the configured key only', () => {
    const d = desiredSecret(OWNER, spec({ key: 'dashboard.token' }), content(), SEAL);
    expect(d.data).toEqual({ 'dashboard.token': b64(TOKEN) });
    expect(Buffer.from(d.data!['dashboard.token']!, 'base64').toString('utf8')).toBe(TOKEN);
    const utf8 = desiredSecret(OWNER, spec(), content({ token: new SecretValue('tök€n') }), SEAL);
    expect(Buffer.from(utf8.data!['token']!, 'base64').toString('utf8')).toBe('tök€n');
  });

  it('does not leak the token through its inputs', () => {
    const token = new SecretValue(TOKEN);
    const c = content({ token, handled: 'v1' });
    // eslint-disable-next-line @typescript-eslint/restrict-template-expressions -- what a template literal makes of the secret is under test
    for (const text of [JSON.stringify(c), String(token), `${token}`, inspect(c), inspect(c, { depth: 10, showHidden: true }), JSON.stringify(token)]) {
      expect(text).not.toContain(TOKEN);
    }
    expect(JSON.stringify(c)).toContain('[redacted]');
    expect(c.token instanceof SecretValue && c.token.reveal()).toBe(TOKEN);
  });
});

describe('secretMatches', () => {
  const s = spec({ labels: { team: 'payments' }, annotations: { note: 'hello' } });
  const c = content({ handled: 'v1' });
  const desired = desiredSecret(OWNER, s, c, SEAL);
  const same = roundTrip(OWNER, s, c);

  it('is true for the Secret the operator wrote', () => {
    expect(secretMatches(same, desired)).toBe(true);
  });

  it.each<[string, (o: ObservedSecret) => ObservedSecret]>([
    ['a label value differs', (o) => ({ ...o, metadata: { ...o.metadata, labels: { ...o.metadata.labels, team: 'billing' } } })],
    ['a label is extra', (o) => ({ ...o, metadata: { ...o.metadata, labels: { ...o.metadata.labels, extra: 'x' } } })],
    ['a label is missing', (o) => ({ ...o, metadata: { ...o.metadata, labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [USERGROUP_LABEL]: 'acme' } } })],
    ['an annotation differs', (o) => ({ ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, note: 'bye' } } })],
    [
      'the handled annotation is missing',
      (o) => {
        const rest = Object.fromEntries(Object.entries(o.metadata.annotations).filter(([k]) => k !== ROTATION_HANDLED_ANNOTATION));
        return { ...o, metadata: { ...o.metadata, annotations: rest } };
      },
    ],
    ['the token differs', (o) => ({ ...o, data: { token: b64('other') } })],
    ['there is an extra data key', (o) => ({ ...o, data: { ...o.data, more: b64('x') } })],
    ['the type differs', (o) => ({ ...o, type: 'kubernetes.io/basic-auth' })],
  ])('is false when %s', (_what, change) => {
    const changed = change(same);
    expect(secretMatches({ ...changed, metaDigest: metadataDigest(changed.metadata.labels, changed.metadata.annotations) }, desired)).toBe(false);
  });

  /** The Secret as the apiserver returns it: what the operator sent, plus the fields the server sets. */
  const served = (extra: Record<string, unknown> = {}): Record<string, unknown> => {
    const copy = JSON.parse(JSON.stringify(desired)) as { metadata: Record<string, unknown> };
    return { ...copy, metadata: { ...copy.metadata, uid: 'secret-uid', resourceVersion: '7', creationTimestamp: '2026-01-01T00:00:00Z', ...extra } };
  };

  it('compares a Secret seen as metadata only by its digest, with the token by digest too', () => {
    const meta = parseTokenSecretMeta(served());
    expect(meta?.data).toBeUndefined();
    expect(secretMatches(meta!, desired)).toBe(true);
    expect(secretMatches(meta!, desiredSecret(OWNER, s, { ...c, token: { sha256: meta!.metadata.annotations[TOKEN_SHA256_ANNOTATION]! } }, SEAL))).toBe(true);
    const relabelled = parseTokenSecretMeta(served({ labels: { ...desired.metadata!.labels, team: 'billing' } }));
    expect(secretMatches(relabelled!, desired)).toBe(false);
  });

  it('keeps nothing of a Secret no UserGroup controls, and only the bookkeeping of one it does', () => {
    const big = 'x'.repeat(200_000);
    expect(
      parseTokenSecretMeta({
        metadata: { name: 'n', namespace: 'ns', uid: 'u', resourceVersion: '1', labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE }, annotations: { big } },
      }),
    ).toBeUndefined();
    const forged = parseTokenSecretMeta(served({ annotations: { ...desired.metadata!.annotations, big } }));
    expect(JSON.stringify(forged).length).toBeLessThan(2_000);
    expect(forged?.metadata.annotations[TOKEN_RECORD_ANNOTATION]).toBe(desired.metadata!.annotations![TOKEN_RECORD_ANNOTATION]);
  });

  it('caches a Secret as a token Secret only with our label and a UserGroup as its controller; any other by name alone', () => {
    const token = parseCachedSecret(served());
    expect(token !== undefined && isTokenSecret(token)).toBe(true);
    expect(token).toEqual(parseTokenSecretMeta(served()));
    // Our label without a controlling UserGroup (a tenant can label any Secret of its own), 200 KiB of annotations on it.
    const labelled = parseCachedSecret({
      metadata: {
        name: 'n',
        namespace: 'ns',
        uid: 'u',
        resourceVersion: '1',
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
        annotations: { big: 'x'.repeat(200_000) },
      },
    });
    expect(labelled).toEqual({ metadata: { namespace: 'ns', name: 'n', resourceVersion: '1' } });
    // A UserGroup as controller but without our label: not a token Secret either.
    const unlabelled = parseCachedSecret(served({ labels: {} }));
    expect(unlabelled !== undefined && isTokenSecret(unlabelled)).toBe(false);
    expect(parseCachedSecret({ metadata: { name: 'n' } })).toBeUndefined();
  });

  it('is false when the desired content changed (a rotation)', () => {
    expect(secretMatches(same, desiredSecret(OWNER, s, content({ token: new SecretValue('new'), handled: 'v2' }), SEAL))).toBe(false);
  });
});

describe('deletionPolicy Retain: the namespace keeps the token Secret, and a UserGroup applied again knows it', () => {
  const NAMESPACE: OwnerReference = { apiVersion: 'v1', kind: 'Namespace', name: 'team-a', uid: 'uid-ns', controller: false };
  const retained = spec();
  const gone = (): boolean => false;
  /** The Secret the operator wrote for OWNER, then with `owners` as the garbage collector left them. */
  const kept = (owners: unknown[] | undefined, over: { annotations?: Record<string, string> } = {}): ObservedSecret => {
    const d = desiredSecret(OWNER, retained, content({ handled: 'r1', issuedAt: '2026-11-01T00:00:00.000Z' }), SEAL, NAMESPACE);
    const stored = storedSecret(d, '42');
    const raw = JSON.parse(JSON.stringify(stored)) as { metadata: Record<string, unknown> };
    raw.metadata['ownerReferences'] = owners;
    if (over.annotations) raw.metadata['annotations'] = { ...(raw.metadata['annotations'] as object), ...over.annotations };
    const parsed = parseSecret(raw);
    if (!parsed.ok) throw new Error(parsed.error);
    return parsed.value;
  };

  it('gives a Retain Secret the namespace as a second owner, a Rotate one not (its token dies with the UserGroup)', () => {
    const owners = (policy: 'Retain' | 'Rotate'): unknown =>
      desiredSecret(OWNER, userGroupSpec({ ...retained, deletionPolicy: policy }), content(), SEAL, NAMESPACE).metadata?.ownerReferences?.map((o) => o.kind);
    expect(owners('Retain')).toEqual(['UserGroup', 'Namespace']);
    expect(owners('Rotate')).toEqual(['UserGroup']);
    // The owners are compared: a Secret written before this release (the UserGroup alone) is written once more.
    const before = roundTrip(OWNER, retained, content());
    expect(secretMatches(before, desiredSecret(OWNER, retained, content(), SEAL))).toBe(true);
    expect(secretMatches(before, desiredSecret(OWNER, retained, content(), SEAL, NAMESPACE))).toBe(false);
  });

  it('a spec.tokenSecret.annotations entry cannot set the uid annotation the kept record is checked by', () => {
    const d = desiredSecret(OWNER, spec({ annotations: { [USERGROUP_UID_ANNOTATION]: 'uid-other' } }), content(), SEAL);
    expect(d.metadata?.annotations?.[USERGROUP_UID_ANNOTATION]).toBe(OWNER.uid);
  });

  it('knows a kept Secret with or without the deleted UserGroup still named as its controller', () => {
    const expected = { state: 'kept', tokenSha256: sha256Hex(TOKEN), handled: 'r1', issuedAt: '2026-11-01T00:00:00.000Z', from: 'acme' };
    expect(keptSecret(kept([NAMESPACE]), 'team-a', retained, SEAL, gone)).toMatchObject(expected);
    expect(keptSecret(kept([controllerRef, NAMESPACE]), 'team-a', retained, SEAL, gone)).toMatchObject(expected);
    expect(keptSecret(kept(undefined), 'team-a', retained, SEAL, gone)).toMatchObject(expected);
  });

  it.each<[string, () => ObservedSecret | undefined, Partial<{ namespace: string; spec: UserGroupSpec; alive: boolean; seal: typeof SEAL }>]>([
    ['its UserGroup lives', () => kept([controllerRef, NAMESPACE]), { alive: true }],
    ['another kind controls it', () => kept([{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'x', uid: 'uid-d', controller: true }]), {}],
    ['another namespace asks', () => kept([NAMESPACE]), { namespace: 'team-b' }],
    ['another userGroupId asks', () => kept([NAMESPACE]), { spec: userGroupSpec({ ...retained, userGroupId: 'acme-2' }) }],
    ['another key is asked for', () => kept([NAMESPACE]), { spec: spec({ key: 'other' }) }],
    ['another account sealed it', () => kept([NAMESPACE]), { seal: OTHER_SEAL }],
    ['its uid annotation was changed', () => kept([NAMESPACE], { annotations: { [USERGROUP_UID_ANNOTATION]: 'uid-x' } }), {}],
    ['its handled mark was changed', () => kept([NAMESPACE], { annotations: { [ROTATION_HANDLED_ANNOTATION]: 'r2' } }), {}],
  ])('is not a kept Secret when %s', (_why, secret, over) => {
    const s = secret();
    if (!s) throw new Error('no secret');
    expect(keptSecret(s, over.namespace ?? 'team-a', over.spec ?? retained, over.seal ?? SEAL, () => over.alive ?? false)).toBeUndefined();
  });

  it('is not a kept Secret while it is being deleted', () => {
    const s = kept([NAMESPACE]);
    expect(keptSecret({ ...s, metadata: { ...s.metadata, deletionTimestamp: '2026-11-27T00:00:00Z' } }, 'team-a', retained, SEAL, gone)).toBeUndefined();
  });

  it('the metadata-only cache keeps both owners of a token Secret, and a third that someone added', () => {
    const d = desiredSecret(OWNER, retained, content(), SEAL, NAMESPACE);
    const extra = { apiVersion: 'v1', kind: 'ConfigMap', name: 'c', uid: 'uid-c' };
    const metadata = JSON.parse(JSON.stringify(d.metadata)) as Record<string, unknown>;
    const cached = parseTokenSecretMeta({
      metadata: { ...metadata, uid: 'u', resourceVersion: '1', ownerReferences: [...d.metadata!.ownerReferences!, extra] },
    });
    expect(cached?.metadata.ownerReferences.map((o) => o.kind)).toEqual(['UserGroup', 'Namespace', 'ConfigMap']);
    expect(secretMatches(cached!, d)).toBe(false);
  });
});
