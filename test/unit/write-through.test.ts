// The writers write through: what a writer wrote, the caches it was given know when it returns; the Lease fence runs first.
import { describe, expect, it } from 'vitest';
import { parseClaim, type ClaimSpec, type UserGroupClaim } from '../../src/api/claim.js';
import { objectKey } from '../../src/api/meta.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import { parseUserGroup, type UserGroup } from '../../src/api/usergroup.js';
import type { LocalCache, ObjectCache } from '../../src/kube/cache.js';
import { ClaimWriter } from '../../src/kube/claim-writer.js';
import { FinalizerWriter } from '../../src/kube/finalizer-writer.js';
import type { KubeClient, KubeResponse } from '../../src/kube/http.js';
import { SecretWriter } from '../../src/kube/secret-writer.js';
import { StatusWriter } from '../../src/kube/status-writer.js';

/** Answers each request with the next of `answers`, recording the methods asked. */
function scripted(...answers: KubeResponse[]): { client: KubeClient; sent: string[] } {
  const sent: string[] = [];
  const client = {
    request: (method: string): Promise<KubeResponse> => {
      sent.push(method);
      const next = answers.shift();
      if (!next) throw new Error('no answer scripted');
      return Promise.resolve(next);
    },
  };
  return { client: client as unknown as KubeClient, sent };
}

/** A cache as the informers' are: by key, written locally. */
function cache<T extends { readonly metadata: { readonly namespace: string; readonly name: string } }>(...objects: T[]): ObjectCache<T> & LocalCache<T> {
  const store = new Map(objects.map((o) => [objectKey(o.metadata), o]));
  return { get: (key) => store.get(key), list: () => [...store.values()], upsertLocal: (o) => store.set(objectKey(o.metadata), o) };
}

const NS = 'team-a';
const OWNER = { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: 'uid-ug', controller: true };
const TOKEN_B64 = Buffer.from('s3cret').toString('base64');
const secretBody = (resourceVersion: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'acme-token', namespace: NS, uid: 'uid-s', resourceVersion, ownerReferences: [OWNER], ...extra },
  type: 'Opaque',
  data: { token: TOKEN_B64 },
});
const observed = (resourceVersion: string): ObservedSecret => {
  const parsed = parseSecret(secretBody(resourceVersion));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
};
const desired = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'acme-token', namespace: NS, ownerReferences: [OWNER] },
  type: 'Opaque',
  data: { token: TOKEN_B64 },
};
const userGroupBody = (resourceVersion: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'usergroup.dev/v1',
  kind: 'UserGroup',
  metadata: { name: 'acme', namespace: NS, uid: 'uid-ug', resourceVersion, generation: 1, ...extra },
  spec: { userGroupId: 'acme-1', name: 'Acme' },
  status: { observedGeneration: 1 },
});
const parsedUserGroup = (resourceVersion: string): UserGroup => {
  const parsed = parseUserGroup(userGroupBody(resourceVersion));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
};
const partial = (resourceVersion: string, finalizers: string[]): KubeResponse => ({
  status: 200,
  body: { kind: 'PartialObjectMetadata', metadata: { name: 'acme', uid: 'uid-ug', resourceVersion, finalizers } },
});
const F = 'usergroup.dev/rotate-on-delete';
const refused = (): never => {
  throw new DOMException('the Lease was not renewed within the renew deadline', 'AbortError');
};

describe('SecretWriter writes through', () => {
  it('a created Secret is in the token-Secret cache as metadata, its data recorded as ours, when apply returns', async () => {
    const secrets = cache<ObservedSecret>();
    const wrote: unknown[] = [];
    const { client } = scripted({ status: 201, body: secretBody('8') });
    const writer = new SecretWriter(client, { through: { cache: secrets, wrote: (...args) => wrote.push(args) } });
    expect((await writer.apply(desired, undefined)).kind).toBe('created');
    const cached = secrets.get(`${NS}/acme-token`);
    expect(cached?.metadata.resourceVersion).toBe('8');
    expect(cached?.data).toBeUndefined();
    expect(wrote).toEqual([[`${NS}/acme-token`, '8', { token: TOKEN_B64 }]]);
  });

  it('an unchanged Secret writes nothing through; a fence that refuses stops the apply and the delete before any request', async () => {
    const secrets = cache<ObservedSecret>();
    const wrote: unknown[] = [];
    const current = observed('8');
    const none = scripted();
    expect((await new SecretWriter(none.client, { through: { cache: secrets, wrote: (...args) => wrote.push(args) } }).apply(desired, current)).kind).toBe(
      'unchanged',
    );
    expect([secrets.list(), wrote]).toEqual([[], []]);
    const fenced = scripted({ status: 201, body: secretBody('8') });
    const writer = new SecretWriter(fenced.client, { fence: refused });
    await expect(writer.apply(desired, undefined)).rejects.toThrow('renew deadline');
    await expect(writer.delete(current)).rejects.toThrow('renew deadline');
    expect(fenced.sent).toEqual([]);
  });
});

describe('FinalizerWriter writes through', () => {
  it("a UserGroup's patch goes onto the cached copy only if that copy is the version patched", async () => {
    const ug = parsedUserGroup('7');
    const atPatched = cache(ug);
    await new FinalizerWriter(scripted(partial('7', []), partial('8', [F])).client, { userGroups: atPatched }).set({ userGroup: ug }, true);
    const after = atPatched.get(`${NS}/acme`);
    expect([after?.metadata.resourceVersion, after?.metadata.finalizers, after?.status]).toEqual(['8', [F], ug.status]);
    // A cached copy already past the version patched came from the watch and is right as it is.
    const newer = parsedUserGroup('9');
    const past = cache(newer);
    await new FinalizerWriter(scripted(partial('7', []), partial('8', [F])).client, { userGroups: past }).set({ userGroup: ug }, true);
    expect(past.get(`${NS}/acme`)).toBe(newer);
  });

  it("a token Secret's patch goes into its cache; the verified record is carried over only from the version the caller knew", async () => {
    const secretMeta = (resourceVersion: string, finalizers: string[]): KubeResponse => ({
      status: 200,
      body: {
        kind: 'PartialObjectMetadata',
        metadata: { name: 'acme-token', namespace: NS, uid: 'uid-s', resourceVersion, ownerReferences: [OWNER], finalizers },
      },
    });
    for (const [known, carried] of [
      ['7', [[`${NS}/acme-token`, '7', '8']]],
      ['6', []],
    ] as const) {
      const secrets = cache<ObservedSecret>();
      const carry: unknown[] = [];
      const writer = new FinalizerWriter(scripted(secretMeta('7', []), secretMeta('8', [F])).client, {
        secrets: { cache: secrets, record: { carry: (...args) => carry.push(args) } },
      });
      expect(await writer.set({ secret: observed(known) }, true)).toBe(true);
      expect(secrets.get(`${NS}/acme-token`)?.metadata.resourceVersion).toBe('8');
      expect(carry).toEqual(carried);
    }
  });
});

describe('StatusWriter and ClaimWriter write through', () => {
  it('a status write puts the UserGroup as written into the cache and tells the controller (before, after)', async () => {
    const ug = parsedUserGroup('7');
    const userGroups = cache(ug);
    const written: [string, string][] = [];
    const writer = new StatusWriter(scripted({ status: 200, body: userGroupBody('8') }).client, {
      cache: userGroups,
      written: (before, after) => written.push([before.metadata.resourceVersion, after.metadata.resourceVersion]),
    });
    expect((await writer.patch(ug, {}))?.metadata.resourceVersion).toBe('8');
    expect(userGroups.get(`${NS}/acme`)?.metadata.resourceVersion).toBe('8');
    expect(written).toEqual([['7', '8']]);
  });

  it('a claim written, or read after a lost race, is in the claim cache when write returns', async () => {
    const spec: ClaimSpec = { userGroupId: 'acme-1', account: 'acct', namespace: NS, userGroup: { name: 'acme', uid: 'uid-ug' } };
    const claimBody = (rv: string): Record<string, unknown> => ({
      apiVersion: 'usergroup.dev/v1alpha1',
      kind: 'UserGroupClaim',
      metadata: { name: 'acct.acme-1', uid: 'uid-c', resourceVersion: rv },
      spec,
    });
    const claims = cache<UserGroupClaim>();
    const created = await new ClaimWriter(scripted({ status: 201, body: claimBody('4') }).client, { cache: claims }).write(undefined, spec);
    expect(created.ok && claims.get(objectKey(created.claim.metadata))?.metadata.resourceVersion).toBe('4');
    const lost = { status: 409, body: { kind: 'Status', code: 409, reason: 'Conflict', message: 'modified' } };
    const current = parseClaim(claimBody('4'));
    if (!current.ok) throw new Error(current.error);
    const raced = await new ClaimWriter(scripted(lost, { status: 200, body: claimBody('6') }).client, { cache: claims }).write(current.value, spec);
    expect(raced.ok).toBe(false);
    expect(raced.claim && claims.get(objectKey(raced.claim.metadata))?.metadata.resourceVersion).toBe('6');
  });
});
