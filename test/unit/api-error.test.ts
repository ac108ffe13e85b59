import { describe, expect, it } from 'vitest';
import {
  ApiError,
  apiErrorFrom,
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isInvalid,
  isNotFound,
  isRetryable,
  isServerError,
  isTooManyRequests,
  isUnauthorized,
} from '../../src/kube/api-error.js';
import { call, type KubeResponse, type RequestOptions } from '../../src/kube/http.js';

const SECRET = '/api/v1/namespaces/team-a/secrets/acme-token';

/** A Status as the apiserver sends it. */
function status(code: number, reason: string, message: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code, ...extra };
}

const FORBIDDEN =
  'secrets "acme-token" is forbidden: User "system:serviceaccount:ugo:ugo-usergroup-operator" cannot update resource "secrets" in API group "" in the namespace "team-a"';

describe('apiErrorFrom: a non-2xx answer parsed once', () => {
  it("a Status: its reason and the apiserver's own message, with the method, path and code", () => {
    const err = apiErrorFrom('PUT', SECRET, 403, status(403, 'Forbidden', FORBIDDEN, { details: { name: 'acme-token', kind: 'secrets' } }));
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ method: 'PUT', path: SECRET, code: 403, reason: 'Forbidden', serverMessage: FORBIDDEN });
    expect(err.message).toBe(`PUT ${SECRET}: 403 Forbidden: ${FORBIDDEN}`);
  });

  it("a Status without a reason gets the one the code implies; one without a message gets client-go's text for the code", () => {
    expect(apiErrorFrom('GET', SECRET, 404, status(404, '', 'secrets "acme-token" not found'))).toMatchObject({
      reason: 'NotFound',
      serverMessage: 'secrets "acme-token" not found',
    });
    expect(apiErrorFrom('GET', SECRET, 500, { kind: 'Status', code: 500 })).toMatchObject({
      reason: 'InternalError',
      serverMessage: 'an error on the server has prevented the request from succeeding',
    });
  });

  it('no body: the reason and message client-go derives from the code; 409 is AlreadyExists to a create, Conflict otherwise', () => {
    const cases: [string, number, string, string][] = [
      ['GET', 400, 'BadRequest', 'the server rejected our request for an unknown reason'],
      ['GET', 401, 'Unauthorized', 'the server has asked for the client to provide credentials'],
      ['GET', 403, 'Forbidden', 'the server does not allow access to the requested resource'],
      ['GET', 404, 'NotFound', 'the server could not find the requested resource'],
      ['POST', 409, 'AlreadyExists', 'the server reported a conflict'],
      ['PUT', 409, 'Conflict', 'the server reported a conflict'],
      ['DELETE', 409, 'Conflict', 'the server reported a conflict'],
      ['GET', 410, 'Gone', 'the requested resource is no longer available'],
      ['PUT', 422, 'Invalid', 'the server rejected our request due to an error in our request'],
      ['GET', 429, 'TooManyRequests', 'the server has received too many requests and has asked us to try again later'],
      ['GET', 500, 'InternalError', 'an error on the server has prevented the request from succeeding'],
      ['GET', 502, 'InternalError', 'an error on the server has prevented the request from succeeding'],
      ['GET', 503, 'ServiceUnavailable', 'the server is currently unable to handle the request'],
      ['GET', 504, 'Timeout', 'the server was unable to return a response in the time allotted, but may still be processing the request'],
      ['GET', 418, 'Unknown', 'the server responded with the status code 418 but did not return more information'],
    ];
    for (const [method, code, reason, message] of cases) {
      expect(apiErrorFrom(method, SECRET, code, ''), `${method} ${code}`).toMatchObject({ code, reason, serverMessage: message });
    }
  });

  it("a text body (a proxy's page) adds nothing either: it may echo the request", () => {
    const err = apiErrorFrom('PUT', SECRET, 502, `<html><title>502 Bad Gateway</title><pre>{"data":{"token":"dG9rZW4="}}</pre></html>`);
    expect(err).toMatchObject({ reason: 'InternalError', serverMessage: 'an error on the server has prevented the request from succeeding' });
    expect(err.message).not.toContain('dG9rZW4=');
  });

  it('a JSON body that is not a Status adds nothing: it may echo the request, token included', () => {
    const echoed = { kind: 'TokenReview', spec: { token: 'scraper-token' }, message: 'scraper-token', reason: 'scraper-token' };
    const err = apiErrorFrom('POST', '/apis/authentication.k8s.io/v1/tokenreviews', 400, echoed);
    expect(err).toMatchObject({ reason: 'BadRequest', serverMessage: 'the server rejected our request for an unknown reason' });
    expect(err.message).not.toContain('scraper-token');
  });

  it('a long Status message is bounded', () => {
    const err = apiErrorFrom('PUT', SECRET, 422, status(422, 'Invalid', `Secret "acme-token" is invalid: ${'metadata.labels: Invalid value, '.repeat(200)}`));
    expect(err.serverMessage.length).toBe(1024);
    expect(err.serverMessage.endsWith('…')).toBe(true);
    expect(err.serverMessage.startsWith('Secret "acme-token" is invalid: metadata.labels')).toBe(true);
  });
});

describe('predicates: the reason when it is a known one, else the code (as client-go)', () => {
  const err = (method: string, code: number, reason?: string): ApiError =>
    apiErrorFrom(method, SECRET, code, reason === undefined ? '' : status(code, reason, 'm'));
  const predicates = { isNotFound, isAlreadyExists, isConflict, isForbidden, isUnauthorized, isInvalid, isGone, isTooManyRequests, isServerError, isRetryable };
  type Name = keyof typeof predicates;
  const truths = (e: unknown): Name[] => (Object.keys(predicates) as Name[]).filter((name) => predicates[name](e));

  it.each<[string, ApiError, Name[]]>([
    ['404', err('GET', 404), ['isNotFound']],
    ['409 to a create', err('POST', 409), ['isAlreadyExists']],
    ['409 Status AlreadyExists', err('POST', 409, 'AlreadyExists'), ['isAlreadyExists']],
    ['409 to a replace', err('PUT', 409), ['isConflict']],
    ['403', err('GET', 403), ['isForbidden']],
    ['401', err('GET', 401), ['isUnauthorized']],
    ['422', err('PUT', 422), ['isInvalid']],
    ['410 Expired (a too-old continue token)', err('GET', 410, 'Expired'), ['isGone']],
    ['410', err('GET', 410), ['isGone']],
    ['429', err('GET', 429), ['isTooManyRequests', 'isRetryable']],
    ['500', err('GET', 500), ['isServerError', 'isRetryable']],
    ['503', err('GET', 503), ['isServerError', 'isRetryable']],
    ['504 Timeout', err('GET', 504), ['isServerError', 'isRetryable']],
    ['400', err('GET', 400), []],
    // A reason apimachinery does not know (a webhook's, an aggregated API's): judged by its code.
    ['404 with a reason of its own', err('GET', 404, 'NoSuchThing'), ['isNotFound']],
    ['409 with a reason of its own', err('PUT', 409, 'Mine'), ['isConflict']],
    ['403 with a reason of its own', err('GET', 403, 'PolicyDenied'), ['isForbidden']],
    // A known reason is believed over the code.
    ['a 409 that says NotFound', err('PUT', 409, 'NotFound'), ['isNotFound']],
    ['a 429 that says InternalError: still too many requests', err('GET', 429, 'InternalError'), ['isTooManyRequests', 'isRetryable']],
  ])('%s', (_name, e, expected) => {
    expect(truths(e)).toEqual(expected);
  });

  it('anything that is not an ApiError answers false', () => {
    for (const other of [new Error('connect ECONNREFUSED'), undefined, { code: 404, reason: 'NotFound' }, 'NotFound']) expect(truths(other)).toEqual([]);
  });
});

describe('call: the body of a 2xx, or the refusal as an ApiError', () => {
  function answering(res: KubeResponse | Error) {
    const seen: { method: string; path: string; options: RequestOptions | undefined }[] = [];
    const client = {
      request: (method: string, path: string, options?: RequestOptions): Promise<KubeResponse> => {
        seen.push({ method, path, options });
        return res instanceof Error ? Promise.reject(res) : Promise.resolve(res);
      },
    };
    return { client, seen };
  }

  it('a 2xx is passed on with its body', async () => {
    const { client, seen } = answering({ status: 201, body: { kind: 'Secret' }, bytes: 16 });
    expect(await call(client, 'POST', '/api/v1/namespaces/a/secrets', { query: { fieldManager: 'x' } })).toEqual({
      ok: true,
      status: 201,
      body: { kind: 'Secret' },
      bytes: 16,
    });
    expect(seen).toEqual([{ method: 'POST', path: '/api/v1/namespaces/a/secrets', options: { query: { fieldManager: 'x' } } }]);
  });

  it('anything else becomes an ApiError naming the method and path', async () => {
    const { client } = answering({ status: 403, body: status(403, 'Forbidden', FORBIDDEN) });
    const res = await call(client, 'PUT', SECRET, { body: { data: { token: 'dG9rZW4=' } } });
    if (res.ok) throw new Error('expected a refusal');
    expect(res.error).toMatchObject({ method: 'PUT', path: SECRET, code: 403, reason: 'Forbidden', serverMessage: FORBIDDEN });
    expect(res.error.message).not.toContain('dG9rZW4=');
  });

  it("a transport failure still rejects: it is not the apiserver's answer", async () => {
    const { client } = answering(new Error('connect ECONNREFUSED 127.0.0.1:6443'));
    await expect(call(client, 'GET', SECRET)).rejects.toThrow('ECONNREFUSED');
  });
});
