import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseClaim, type ClaimSpec, type UserGroupClaim } from '../../src/api/claim.js';
import { parseSecret, type ObservedSecret } from '../../src/api/secret.js';
import { ApiError } from '../../src/kube/api-error.js';
import { ClaimWriter } from '../../src/kube/claim-writer.js';
import { EventRecorder } from '../../src/kube/event-recorder.js';
import type { KubeClient, KubeResponse, RequestOptions } from '../../src/kube/http.js';
import { LeaderElector } from '../../src/kube/leader-election.js';
import { SecretWriter } from '../../src/kube/secret-writer.js';
import { StatusWriter } from '../../src/kube/status-writer.js';
import { userGroup } from '../support/reconciler-harness.js';

/**
 * The apiserver writers over a scripted apiserver: what each makes of a refusal. Every refusal that is not the
 * expected race (404 on a read, 409 on a write) surfaces with the apiserver's own message, never a generic one,
 * and never with the request body (a token Secret's data).
 */

type Answer = KubeResponse | ((method: string, path: string, options: RequestOptions) => KubeResponse);

/** Answers each request with the next of `answers` (the last one repeats), recording what was asked. */
function scripted(...answers: Answer[]) {
  const sent: { method: string; path: string; options: RequestOptions }[] = [];
  const client = {
    request: (method: string, path: string, options: RequestOptions = {}): Promise<KubeResponse> => {
      sent.push({ method, path, options });
      const next = answers.length > 1 ? answers.shift() : answers[0];
      if (!next) throw new Error('no answer scripted');
      return Promise.resolve(typeof next === 'function' ? next(method, path, options) : next);
    },
  };
  return { client: client as unknown as KubeClient, sent };
}

function status(code: number, reason: string, message: string): KubeResponse {
  return { status: code, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message } };
}

async function refusal(promise: Promise<unknown>): Promise<ApiError> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(err)}`);
  return err;
}

const NS = 'team-a';
const SECRET_PATH = `/api/v1/namespaces/${NS}/secrets/acme-token`;
const TOKEN_B64 = Buffer.from('s3cret-token').toString('base64');
const SA = 'User "system:serviceaccount:ugo:ugo-usergroup-operator"';

function secretObject(resourceVersion = '7'): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'acme-token', namespace: NS, uid: 'uid-s', resourceVersion },
    type: 'Opaque',
    data: { token: TOKEN_B64 },
  };
}

const OWNER = { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: 'uid-ug', controller: true };
const desired = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'acme-token', namespace: NS, ownerReferences: [OWNER] },
  type: 'Opaque',
  data: { token: TOKEN_B64 },
};

/** The Secret as stored at `resourceVersion`, holding `token`, with the one owner reference a token Secret has. */
function stored(resourceVersion: string, token: string): ObservedSecret {
  const parsed = parseSecret({
    ...secretObject(resourceVersion),
    metadata: {
      name: 'acme-token',
      namespace: NS,
      uid: 'uid-s',
      resourceVersion,
      ownerReferences: [OWNER],
    },
    data: { token: Buffer.from(token).toString('base64') },
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

describe('SecretWriter', () => {
  it('read: a missing Secret is undefined; any other refusal keeps the apiserver\'s message (was "reading a Secret failed")', async () => {
    expect(await new SecretWriter(scripted(status(404, 'NotFound', 'secrets "acme-token" not found')).client).read(NS, 'acme-token')).toBeUndefined();
    const message = `secrets "acme-token" is forbidden: ${SA} cannot get resource "secrets" in API group "" in the namespace "team-a"`;
    const err = await refusal(new SecretWriter(scripted(status(403, 'Forbidden', message)).client).read(NS, 'acme-token'));
    expect(err).toMatchObject({ code: 403, reason: 'Forbidden', serverMessage: message });
    expect(err.message).toBe(`GET ${SECRET_PATH}: 403 Forbidden: ${message}`);
  });

  it('apply: a create that meets 409 is "exists", a replace that meets 409 is "changed"', async () => {
    const create = scripted(status(409, 'AlreadyExists', 'secrets "acme-token" already exists'));
    expect(await new SecretWriter(create.client).apply(desired, undefined)).toEqual({
      kind: 'conflict',
      conflict: 'exists',
      message: 'Secret team-a/acme-token already exists',
    });
    expect(create.sent[0]).toMatchObject({ method: 'POST', path: `/api/v1/namespaces/${NS}/secrets` });
    const replace = scripted(status(409, 'Conflict', 'Operation cannot be fulfilled on secrets "acme-token": the object has been modified'));
    expect(await new SecretWriter(replace.client).apply(desired, stored('7', 'older'))).toEqual({
      kind: 'conflict',
      conflict: 'changed',
      message: 'Secret team-a/acme-token changed underneath us',
    });
    expect(replace.sent[0]).toMatchObject({ method: 'PUT', path: SECRET_PATH, options: { body: { metadata: { resourceVersion: '7' } } } });
  });

  it("apply: a refusal carries the apiserver's message and never the token it was sent", async () => {
    const refused = async (answer: KubeResponse, current: ObservedSecret | undefined): Promise<ApiError> => {
      const applied = await new SecretWriter(scripted(answer).client).apply(desired, current);
      if (applied.kind !== 'refused') throw new Error(`expected a refusal, got ${applied.kind}`);
      return applied.error;
    };
    const message = `secrets "acme-token" is forbidden: ${SA} cannot update resource "secrets" in API group "" in the namespace "team-a"`;
    const err = await refused(status(403, 'Forbidden', message), stored('7', 'older'));
    expect(err.message).toBe(`PUT ${SECRET_PATH}: 403 Forbidden: ${message}`);
    // An answer that is not a Status (a proxy's page, a JSON echo) may repeat the request: only its code is told.
    const echo = await refused({ status: 400, body: { ...desired } }, undefined);
    expect(echo.message).toBe(`POST /api/v1/namespaces/${NS}/secrets: 400 BadRequest: the server rejected our request for an unknown reason`);
    const page = await refused({ status: 502, body: `<pre>${JSON.stringify(desired)}</pre>` }, stored('7', 'older'));
    expect(page.message).toBe(`PUT ${SECRET_PATH}: 502 InternalError: an error on the server has prevented the request from succeeding`);
    for (const e of [err, echo, page]) expect(e.message).not.toContain(TOKEN_B64);
  });

  it('apply: a 2xx is the Secret as stored, "created" or "updated"', async () => {
    const created = await new SecretWriter(scripted({ status: 201, body: secretObject('8') }).client).apply(desired, undefined);
    expect(created.kind === 'created' && created.secret.metadata.resourceVersion).toBe('8');
    const updated = await new SecretWriter(scripted({ status: 200, body: secretObject('9') }).client).apply(desired, stored('8', 'older'));
    expect(updated.kind === 'updated' && updated.secret.metadata.resourceVersion).toBe('9');
  });

  it("apply: a replace carries the operator's rotate-on-delete finalizer over (a PUT without it would drop it), and no other", async () => {
    const withFinalizers = (finalizers: string[]): ObservedSecret => {
      const parsed = parseSecret({ ...secretObject('8'), metadata: { ...(secretObject('8')['metadata'] as object), finalizers } });
      if (!parsed.ok) throw new Error(parsed.error);
      return parsed.value;
    };
    const ours = scripted({ status: 200, body: secretObject('9') });
    await new SecretWriter(ours.client).apply(desired, withFinalizers(['usergroup.dev/rotate-on-delete', 'example.com/other']));
    expect((ours.sent[0]?.options.body as { metadata: { finalizers?: string[] } }).metadata.finalizers).toEqual(['usergroup.dev/rotate-on-delete']);
    const none = scripted({ status: 200, body: secretObject('9') });
    await new SecretWriter(none.client).apply(desired, withFinalizers(['example.com/other']));
    expect((none.sent[0]?.options.body as { metadata: { finalizers?: string[] } }).metadata.finalizers).toBeUndefined();
  });

  it('apply: the Secret already is the desired one: "unchanged", and no request at all', async () => {
    const none = scripted();
    const current = stored('7', 's3cret-token');
    expect(await new SecretWriter(none.client).apply(desired, current)).toEqual({ kind: 'unchanged', secret: current });
    expect(none.sent).toEqual([]);
  });

  it('delete: gone already (404) or a newer object of that name (409) is quiet; anything else is thrown with its message', async () => {
    for (const answer of [
      { status: 200, body: {} },
      { status: 202, body: {} },
      status(404, 'NotFound', 'gone'),
      status(409, 'Conflict', 'Precondition failed: UID in precondition: uid-s, UID in object meta: uid-t'),
    ]) {
      await expect(new SecretWriter(scripted(answer).client).delete(stored('7', 'older'))).resolves.toBeUndefined();
    }
    const err = await refusal(
      new SecretWriter(scripted(status(403, 'Forbidden', 'secrets "acme-token" is forbidden: no')).client).delete(stored('7', 'older')),
    );
    expect(err.message).toBe(`DELETE ${SECRET_PATH}: 403 Forbidden: secrets "acme-token" is forbidden: no`);
  });
});

describe('ClaimWriter', () => {
  const spec: ClaimSpec = { userGroupId: 'acme', account: 'acct', namespace: NS, userGroup: { name: 'acme', uid: 'uid-ug' } };
  const claimBody = (rv: string): Record<string, unknown> => ({
    apiVersion: 'usergroup.dev/v1alpha1',
    kind: 'UserGroupClaim',
    metadata: { name: 'c', uid: 'uid-c', resourceVersion: rv },
    spec,
  });
  const parsedClaim = (rv: string): UserGroupClaim => {
    const parsed = parseClaim(claimBody(rv));
    if (!parsed.ok) throw new Error(parsed.error);
    return parsed.value;
  };

  it("a lost race is ok: false with what won, read again; a create's 409, a replace's 409 or 404", async () => {
    const gone = status(404, 'NotFound', 'gone');
    expect(await new ClaimWriter(scripted(status(409, 'AlreadyExists', 'exists'), gone).client).write(undefined, spec)).toEqual({
      ok: false,
      claim: undefined,
    });
    expect(await new ClaimWriter(scripted(status(409, 'Conflict', 'modified'), gone).client).write(parsedClaim('3'), spec)).toEqual({
      ok: false,
      claim: undefined,
    });
    expect(await new ClaimWriter(scripted(gone).client).write(parsedClaim('3'), spec)).toEqual({ ok: false, claim: undefined });
    const won = scripted(status(409, 'AlreadyExists', 'exists'), { status: 200, body: claimBody('5') });
    expect(await new ClaimWriter(won.client).write(undefined, spec)).toEqual({ ok: false, claim: parsedClaim('5') });
    expect(won.sent.map((r) => r.method)).toEqual(['POST', 'GET']);
    expect(await new ClaimWriter(scripted(gone).client).get('c')).toBeUndefined();
    const created = await new ClaimWriter(scripted({ status: 201, body: claimBody('4') }).client).write(undefined, spec);
    expect(created.ok && created.claim.metadata.resourceVersion).toBe('4');
  });

  it("any other refusal keeps the apiserver's message", async () => {
    const message = `usergroupclaims.usergroup.dev is forbidden: ${SA} cannot create resource "usergroupclaims" in API group "usergroup.dev" at the cluster scope`;
    const err = await refusal(new ClaimWriter(scripted(status(403, 'Forbidden', message)).client).write(undefined, spec));
    expect(err.message).toBe(`POST /apis/usergroup.dev/v1alpha1/usergroupclaims: 403 Forbidden: ${message}`);
    await expect(new ClaimWriter(scripted(status(500, 'InternalError', 'etcdserver: request timed out')).client).write(parsedClaim('3'), spec)).rejects.toThrow(
      '500 InternalError: etcdserver: request timed out',
    );
    await expect(new ClaimWriter(scripted(status(409, 'Conflict', 'precondition')).client).release(parsedClaim('3'))).resolves.toBeUndefined();
    await expect(new ClaimWriter(scripted({ status: 503, body: '' }).client).release(parsedClaim('3'))).rejects.toThrow(
      '503 ServiceUnavailable: the server is currently unable to handle the request',
    );
  });
});

describe('StatusWriter', () => {
  it("a UserGroup gone meanwhile is undefined; an invalid status is refused with the apiserver's field errors", async () => {
    expect(await new StatusWriter(scripted(status(404, 'NotFound', 'not found')).client).patch(userGroup({ namespace: NS }), {})).toBeUndefined();
    const message = 'UserGroup.usergroup.dev "acme" is invalid: status.conditions[0].reason: Invalid value: "": must match ^[A-Za-z]';
    const err = await refusal(new StatusWriter(scripted(status(422, 'Invalid', message)).client).patch(userGroup({ namespace: NS }), {}));
    expect(err).toMatchObject({ reason: 'Invalid', serverMessage: message });
  });
});

function logLines() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

describe('LeaderElector', () => {
  function elector(client: KubeClient, log: pino.Logger, onStartedLeading = (): void => {}) {
    return new LeaderElector({
      client,
      namespace: 'ugo',
      name: 'ugo-lock',
      identity: 'me',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 10,
      log,
      onStartedLeading,
      onStoppedLeading: () => {},
    });
  }
  const lease = (holder: string, rv: string) => ({
    status: 200,
    body: {
      metadata: { name: 'ugo-lock', namespace: 'ugo', resourceVersion: rv },
      spec: { holderIdentity: holder, leaseDurationSeconds: 15, leaseTransitions: 0 },
    },
  });

  it("a refused Lease create is logged with the apiserver's message (it was dropped); losing the create race is not", async () => {
    const message = `leases.coordination.k8s.io is forbidden: ${SA} cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "ugo"`;
    const { log, lines } = logLines();
    const refused = scripted((method) => (method === 'GET' ? status(404, 'NotFound', 'not found') : status(403, 'Forbidden', message)));
    const e = elector(refused.client, log);
    e.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    await e.stop();
    expect(lines.find((l) => l['msg'] === 'leader election: lease request failed')?.['err']).toContain(message);

    const raced = logLines();
    const lost = scripted((method) =>
      method === 'GET' ? status(404, 'NotFound', 'not found') : status(409, 'AlreadyExists', 'leases.coordination.k8s.io "ugo-lock" already exists'),
    );
    const second = elector(lost.client, raced.log);
    second.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    await second.stop();
    expect(raced.lines.filter((l) => l['msg'] === 'leader election: lease request failed')).toEqual([]);
  });

  it('a renew that meets 409 lost the race quietly; a refused GET is logged with its message (was "HTTP 403")', async () => {
    const { log, lines } = logLines();
    let started = 0;
    const api = scripted((method) => (method === 'GET' ? lease('', '5') : status(409, 'Conflict', 'the object has been modified')));
    const e = elector(api.client, log, () => started++);
    e.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    await e.stop();
    expect(started).toBe(0);
    expect(lines.filter((l) => l['level'] === 40)).toEqual([]);

    const forbidden = logLines();
    const message = `leases.coordination.k8s.io "ugo-lock" is forbidden: ${SA} cannot get resource "leases"`;
    const denied = elector(scripted(status(403, 'Forbidden', message)).client, forbidden.log);
    denied.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    await denied.stop();
    expect(forbidden.lines.find((l) => l['msg'] === 'leader election: lease request failed')?.['err']).toBe(
      `Error: GET /apis/coordination.k8s.io/v1/namespaces/ugo/leases/ugo-lock: 403 Forbidden: ${message}`,
    );
  });

  it('judged by the clock: past the renew deadline holdsLease steps down at once, before any timer runs, and only once', async () => {
    let clock = 1_000_000;
    let stopped = 0;
    const { log, lines } = logLines();
    const e = new LeaderElector({
      client: scripted(() => lease('me', '7')).client,
      namespace: 'ugo',
      name: 'ugo-lock',
      identity: 'me',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      // The loop sleeps after its first renew: only the clock moves.
      retryPeriodMs: 3_600_000,
      log,
      now: () => clock,
      onStartedLeading: () => {},
      onStoppedLeading: () => stopped++,
    });
    e.start();
    await expect.poll(() => e.isLeader).toBe(true);
    clock += 9_999;
    expect(e.holdsLease()).toBe(true);
    expect(stopped).toBe(0);
    clock += 1;
    expect(e.holdsLease()).toBe(false);
    expect(stopped).toBe(1);
    expect(e.isLeader).toBe(false);
    expect(e.holdsLease()).toBe(false);
    expect(stopped).toBe(1);
    expect(lines.filter((l) => l['msg'] === 'lease not renewed within the renew deadline; stopping work')).toHaveLength(1);
    await e.stop();
    expect(stopped).toBe(1);
  });

  it("carries state for the next leader: takes over the last holder's annotations (handed to onStartedLeading and written back as they are), then writes its own with every renewal and the release", async () => {
    const { log } = logLines();
    let rv = 5;
    let stored: { holder: string; annotations: Record<string, string> | undefined } = {
      holder: 'gone',
      annotations: { 'x/state': 'theirs', 'x/self': 'their own' },
    };
    const api = scripted((method, _path, options) => {
      if (method === 'PUT') {
        const body = options.body as { metadata: { annotations?: Record<string, string> }; spec: { holderIdentity: string } };
        stored = { holder: body.spec.holderIdentity, annotations: body.metadata.annotations };
        rv++;
      }
      return {
        status: 200,
        body: {
          metadata: { name: 'ugo-lock', namespace: 'ugo', resourceVersion: String(rv), ...(stored.annotations ? { annotations: stored.annotations } : {}) },
          // Released by its last holder: free to take at once.
          spec: { holderIdentity: stored.holder === 'gone' ? '' : stored.holder, leaseDurationSeconds: 15, leaseTransitions: 0 },
        },
      };
    });
    const taken: Readonly<Record<string, string>>[] = [];
    const puts = (): Record<string, string>[] =>
      api.sent
        .filter((s) => s.method === 'PUT')
        .map((s) => (s.options.body as { metadata: { annotations?: Record<string, string> } }).metadata.annotations ?? {});
    const e = new LeaderElector({
      client: api.client,
      namespace: 'ugo',
      name: 'ugo-lock',
      identity: 'me',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 10,
      log,
      onStartedLeading: (annotations) => taken.push(annotations),
      onStoppedLeading: () => {},
      annotations: () => ({ 'x/state': 'mine' }),
      // What describes the writer itself (the rotate-on-delete state) is its own from the takeover on.
      state: () => ({ 'x/self': 'my own' }),
    });
    e.start();
    await expect.poll(() => puts().length).toBeGreaterThanOrEqual(2);
    await e.stop();
    expect(taken).toEqual([{ 'x/state': 'theirs', 'x/self': 'their own' }]);
    const written = puts();
    expect(written[0]).toEqual({ 'x/state': 'theirs', 'x/self': 'my own' });
    expect(written.slice(1)).toEqual(written.slice(1).map(() => ({ 'x/state': 'mine', 'x/self': 'my own' })));
    // The release (holder cleared) carries the last state too.
    expect(stored).toEqual({ holder: '', annotations: { 'x/state': 'mine', 'x/self': 'my own' } });
  });

  it('a release the apiserver refuses is logged with its message (it was silent)', async () => {
    const { log, lines } = logLines();
    const holder = (options: RequestOptions): unknown => (options.body as { spec?: { holderIdentity?: unknown } } | undefined)?.spec?.holderIdentity;
    const api = scripted((method, _path, options) => {
      if (method === 'GET') return lease('me', '6');
      // Renewals are accepted; the release (the holder cleared) is refused.
      return holder(options) === '' ? status(403, 'Forbidden', 'leases.coordination.k8s.io "ugo-lock" is forbidden: no update') : lease('me', '6');
    });
    const e = elector(api.client, log);
    e.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    await e.stop();
    expect(lines.some((l) => l['msg'] === 'became leader')).toBe(true);
    expect(lines.find((l) => l['msg'] === 'could not release the lease')?.['err']).toContain(
      '403 Forbidden: leases.coordination.k8s.io "ugo-lock" is forbidden: no update',
    );
  });
});

describe('EventRecorder: what is retried', () => {
  const regarding = { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', namespace: NS, name: 'acme', uid: 'uid-acme' };

  it("a 4xx is given up at once, logged with the apiserver's message; a 5xx or 429 is retried", async () => {
    const { log, lines } = logLines();
    const forbidden = scripted(status(403, 'Forbidden', 'events.events.k8s.io is forbidden: no create'));
    const recorder = new EventRecorder(forbidden.client, { controller: 'c', instance: 'i', log, retries: 3 });
    recorder.emit(regarding, 'Warning', 'SyncFailed', 'Sync', 'x');
    await recorder.flush();
    expect(forbidden.sent).toHaveLength(1);
    expect(lines.find((l) => l['msg'] === 'event not recorded')).toMatchObject({
      status: 403,
      attempts: 1,
      err: expect.stringContaining('events.events.k8s.io is forbidden: no create') as unknown,
    });

    for (const first of [status(429, 'TooManyRequests', 'slow down'), { status: 503, body: '' }]) {
      const busy = scripted(first, { status: 201, body: {} });
      const again = new EventRecorder(busy.client, { controller: 'c', instance: 'i', log, retries: 3 });
      again.emit(regarding, 'Warning', 'SyncFailed', 'Sync', 'x');
      await again.flush();
      expect(busy.sent.map((s) => s.method)).toEqual(['POST', 'POST']);
    }
  });
});
