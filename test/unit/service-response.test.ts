import { describe, expect, it } from 'vitest';
import { parseBooleanLike } from '../../src/service/boolean-like.js';
import { parseOversizedResponse, parseServiceResponse } from '../../src/service/response.js';
import { parseRetryAfter } from '../../src/service/retry-after.js';
import type { ServiceFailure, ServiceResult } from '../../src/service/types.js';

const TOKEN = `ugt${'0123456789abcdef'.repeat(4)}`;
const NOW = Date.parse('2026-11-05T12:00:00Z');

function json(value: unknown): string {
  return JSON.stringify(value);
}

function okBody(group: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
  return json({ success: 1, user_group: group, ...extra });
}

function failure(result: ServiceResult): ServiceFailure {
  if (result.ok) {
    throw new Error('expected a failure');
  }
  return result.failure;
}

function expectNoToken(result: ServiceResult): void {
  expect(JSON.stringify(result)).not.toContain(TOKEN);
  if (!result.ok) {
    expect(result.failure.message).not.toContain(TOKEN);
  }
}

describe('parseServiceResponse: successful answers', () => {
  it('reads every documented and hidden field', () => {
    const result = parseServiceResponse(
      200,
      { 'content-type': 'application/json' },
      okBody(
        {
          team_id: 7,
          token: TOKEN,
          name: 'Acme',
          provided_id: 'acme-1',
          properties: { tier: 'gold', seats: 5 },
          new_user_group: true,
          api_environment_tag: 'Customer',
          something_new: 'ignored',
        },
        { also_unknown: [1, 2] },
      ),
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const { token, ...rest } = result.group;
    expect(token.reveal()).toBe(TOKEN);
    expect(rest).toEqual({
      teamId: 7,
      name: 'Acme',
      providedId: 'acme-1',
      properties: { tier: 'gold', seats: 5 },
      created: true,
      environmentTag: 'Customer',
    });
    expectNoToken(result);
  });

  it('leaves absent optional fields undefined and omits properties', () => {
    const result = parseServiceResponse(201, {}, okBody({ token: TOKEN }));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.group.teamId).toBeUndefined();
    expect(result.group.name).toBeUndefined();
    expect(result.group.providedId).toBeUndefined();
    expect(result.group.created).toBeUndefined();
    expect(result.group.environmentTag).toBeUndefined();
    expect('properties' in result.group).toBe(false);
  });

  it.each<[string, unknown, number | undefined]>([
    ['a number', 42, 42],
    ['a numeric string', '42', 42],
    ['a numeric string with spaces', ' 42 ', 42],
    ['a non-numeric string', 'team-42', undefined],
    ['a fraction', 1.5, undefined],
    ['null', null, undefined],
    ['an object', { id: 1 }, undefined],
  ])('team_id as %s', (_label, teamId, expected) => {
    const result = parseServiceResponse(200, {}, okBody({ token: TOKEN, team_id: teamId }));
    expect(result.ok && result.group.teamId).toBe(expected);
  });

  it.each<[unknown, boolean | undefined]>([
    [true, true],
    [false, false],
    [1, true],
    [0, false],
    ['true', true],
    ['false', false],
    ['TRUE', true],
    ['1', true],
    ['0', false],
    ['yes', undefined],
    [2, undefined],
    [null, undefined],
  ])('new_user_group %j → created %s', (value, expected) => {
    const result = parseServiceResponse(200, {}, okBody({ token: TOKEN, new_user_group: value }));
    expect(result.ok && result.group.created).toBe(expected);
  });

  it.each<[string, unknown]>([
    ['an array', ['a']],
    ['a string', 'x'],
    ['null', null],
  ])('ignores properties that are %s', (_label, properties) => {
    const result = parseServiceResponse(200, {}, okBody({ token: TOKEN, properties }));
    expect(result.ok && 'properties' in result.group).toBe(false);
  });

  it.each<[string, unknown]>([
    ['1', 1],
    ['"1"', '1'],
    ['true', true],
  ])('accepts success %s', (_label, success) => {
    expect(parseServiceResponse(200, {}, json({ success, user_group: { token: TOKEN } })).ok).toBe(true);
  });

  it('tolerates a byte-order mark', () => {
    expect(parseServiceResponse(200, {}, `\uFEFF${okBody({ token: TOKEN })}`).ok).toBe(true);
  });

  it('keeps non-string optional fields out', () => {
    const result = parseServiceResponse(200, {}, okBody({ token: TOKEN, name: 5, provided_id: {}, api_environment_tag: 1 }));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect([result.group.name, result.group.providedId, result.group.environmentTag]).toEqual([undefined, undefined, undefined]);
  });
});

interface FailureCase {
  name: string;
  status: number;
  headers?: Record<string, string | string[] | undefined>;
  body: string;
  expected: Partial<ServiceFailure> & { kind: ServiceFailure['kind'] };
  messageContains?: string[];
  messageExcludes?: string[];
}

const longRun = 'Z'.repeat(70);

const failureCases: FailureCase[] = [
  // status classes
  { name: '401', status: 401, body: '', expected: { kind: 'unauthorized', status: 401 }, messageContains: ['HTTP 401'] },
  {
    name: '403 with a service message',
    status: 403,
    body: json({ message: 'API key disabled' }),
    expected: { kind: 'unauthorized', status: 403 },
    messageContains: ['HTTP 403', 'API key disabled'],
  },
  {
    name: '429 with Retry-After seconds',
    status: 429,
    headers: { 'retry-after': '5' },
    body: json({ error: 'slow down' }),
    expected: { kind: 'rate-limited', status: 429, retryAfterMs: 5000 },
    messageContains: ['retry after 5000 ms', 'slow down'],
  },
  { name: '429 with Retry-After 0', status: 429, headers: { 'retry-after': '0' }, body: '', expected: { kind: 'rate-limited', retryAfterMs: 0 } },
  {
    name: '429 with an HTTP-date',
    status: 429,
    headers: { 'retry-after': new Date(NOW + 30_000).toUTCString() },
    body: '',
    expected: { kind: 'rate-limited', retryAfterMs: 30_000 },
  },
  {
    name: '429 with a past HTTP-date',
    status: 429,
    headers: { 'retry-after': new Date(NOW - 30_000).toUTCString() },
    body: '',
    expected: { kind: 'rate-limited', retryAfterMs: 0 },
  },
  {
    name: '429 with an unreadable Retry-After',
    status: 429,
    headers: { 'retry-after': 'soon' },
    body: '',
    expected: { kind: 'rate-limited', retryAfterMs: undefined },
  },
  {
    name: '429 with a negative Retry-After',
    status: 429,
    headers: { 'retry-after': '-5' },
    body: '',
    expected: { kind: 'rate-limited', retryAfterMs: undefined },
  },
  { name: '429 without Retry-After', status: 429, body: '', expected: { kind: 'rate-limited', retryAfterMs: undefined } },
  {
    name: '429 with a capitalised header name',
    status: 429,
    headers: { 'Retry-After': '2' },
    body: '',
    expected: { kind: 'rate-limited', retryAfterMs: 2000 },
  },
  { name: '429 with a repeated header', status: 429, headers: { 'retry-after': ['3', '9'] }, body: '', expected: { kind: 'rate-limited', retryAfterMs: 3000 } },
  { name: '500', status: 500, body: '<html>oops</html>', expected: { kind: 'unavailable', status: 500 }, messageExcludes: ['oops'] },
  { name: '502', status: 502, body: '', expected: { kind: 'unavailable', status: 502 } },
  {
    name: '503 with a message',
    status: 503,
    body: json({ message: 'maintenance' }),
    expected: { kind: 'unavailable', status: 503 },
    messageContains: ['maintenance'],
  },
  {
    name: '400',
    status: 400,
    body: json({ message: 'name is required' }),
    expected: { kind: 'rejected', status: 400 },
    messageContains: ['HTTP 400', 'name is required'],
  },
  { name: '404', status: 404, body: 'Not Found', expected: { kind: 'rejected', status: 404 }, messageExcludes: ['Not Found'] },
  {
    name: '409 with an error object',
    status: 409,
    body: json({ error: { message: 'conflict' } }),
    expected: { kind: 'rejected', status: 409 },
    messageContains: ['conflict'],
  },
  { name: '422', status: 422, body: json({ message: 42 }), expected: { kind: 'rejected', status: 422 } },
  {
    name: '301',
    status: 301,
    headers: { location: 'https://elsewhere/api/user' },
    body: '',
    expected: { kind: 'rejected', status: 301 },
    messageContains: ['redirect'],
  },
  { name: 'status 600', status: 600, body: '', expected: { kind: 'invalid-response', status: 600 } },
  // 2xx bodies
  {
    name: 'success 0 with a message',
    status: 200,
    body: json({ success: 0, message: 'mapping refers to an unknown data source' }),
    expected: { kind: 'rejected', status: 200 },
    messageContains: ['success 0', 'unknown data source'],
  },
  { name: 'success 0 with an error field', status: 200, body: json({ success: 0, error: 'bad' }), expected: { kind: 'rejected' }, messageContains: ['bad'] },
  { name: 'success 0 without a message', status: 200, body: json({ success: 0 }), expected: { kind: 'rejected', status: 200 } },
  { name: 'success "0"', status: 200, body: json({ success: '0' }), expected: { kind: 'rejected' } },
  {
    name: 'success 0 echoing the token in its message',
    status: 200,
    body: json({ success: 0, message: `token ${TOKEN} is revoked`, user_group: { token: TOKEN } }),
    expected: { kind: 'rejected' },
    messageContains: ['is revoked', '[redacted]'],
  },
  {
    name: 'a message with a credential-shaped run',
    status: 400,
    body: json({ message: `bad key ${longRun}` }),
    expected: { kind: 'rejected' },
    messageContains: ['bad key [redacted]'],
    messageExcludes: [longRun],
  },
  {
    name: 'a message with control characters',
    status: 400,
    body: json({ message: 'line one\nFAKE LOG LINE' }),
    expected: { kind: 'rejected' },
    messageExcludes: ['\n'],
  },
  {
    name: 'success 2',
    status: 200,
    body: json({ success: 2, user_group: { token: TOKEN } }),
    expected: { kind: 'invalid-response', status: 200 },
    messageContains: ['success'],
  },
  { name: 'success missing', status: 200, body: json({ user_group: { token: TOKEN } }), expected: { kind: 'invalid-response' } },
  {
    name: 'a body that is not JSON',
    status: 200,
    headers: { 'content-type': 'text/html' },
    body: `<html>login ${TOKEN}</html>`,
    expected: { kind: 'invalid-response', status: 200 },
    messageContains: ['not JSON', 'text/html'],
    messageExcludes: ['login'],
  },
  { name: 'an empty body', status: 200, body: '', expected: { kind: 'invalid-response' }, messageContains: ['not JSON'] },
  { name: 'a truncated JSON body', status: 200, body: `{"success":1,"user_group":{"token":"${TOKEN}"`, expected: { kind: 'invalid-response' } },
  { name: 'a JSON array', status: 200, body: json([{ success: 1 }]), expected: { kind: 'invalid-response' }, messageContains: ['array'] },
  { name: 'JSON null', status: 200, body: 'null', expected: { kind: 'invalid-response' }, messageContains: ['null'] },
  { name: 'a JSON string', status: 200, body: json(TOKEN), expected: { kind: 'invalid-response' } },
  { name: 'user_group missing', status: 200, body: json({ success: 1 }), expected: { kind: 'invalid-response' }, messageContains: ['missing'] },
  {
    name: 'user_group null',
    status: 200,
    body: json({ success: 1, user_group: null }),
    expected: { kind: 'invalid-response' },
    messageContains: ['not an object'],
  },
  { name: 'user_group an array', status: 200, body: json({ success: 1, user_group: [{ token: TOKEN }] }), expected: { kind: 'invalid-response' } },
  { name: 'token missing', status: 200, body: okBody({ name: 'Acme' }), expected: { kind: 'invalid-response' }, messageContains: ['token" is missing'] },
  { name: 'token empty', status: 200, body: okBody({ token: '' }), expected: { kind: 'invalid-response' }, messageContains: ['token" is empty'] },
  { name: 'token blank', status: 200, body: okBody({ token: '   ' }), expected: { kind: 'invalid-response' } },
  { name: 'token a number', status: 200, body: okBody({ token: 12345 }), expected: { kind: 'invalid-response' }, messageContains: ['not a string'] },
];

describe('parseServiceResponse: failures', () => {
  it.each(failureCases)('$name', (c) => {
    const result = parseServiceResponse(c.status, c.headers ?? {}, c.body, NOW);
    const f = failure(result);
    expect(f).toMatchObject(c.expected);
    expect(f.message.length).toBeGreaterThan(0);
    for (const text of c.messageContains ?? []) {
      expect(f.message).toContain(text);
    }
    for (const text of c.messageExcludes ?? []) {
      expect(f.message).not.toContain(text);
    }
    expectNoToken(result);
  });

  it('truncates a long service message to 500 characters', () => {
    const message = 'word '.repeat(300);
    const f = failure(parseServiceResponse(400, {}, json({ message })));
    const detail = f.message.slice(f.message.indexOf(': ') + 2);
    expect(detail.length).toBeLessThanOrEqual(501);
    expect(detail.endsWith('…')).toBe(true);
  });

  it('has a status in every failure the status decides', () => {
    for (const status of [401, 403, 404, 429, 500, 503]) {
      expect(failure(parseServiceResponse(status, {}, '')).status).toBe(status);
    }
  });
});

describe('parseOversizedResponse', () => {
  it('is invalid-response for a 2xx answer', () => {
    expect(failure(parseOversizedResponse(200, {}, 1024))).toMatchObject({
      kind: 'invalid-response',
      status: 200,
      message: expect.stringContaining('1024 bytes') as unknown,
    });
  });

  it('keeps the class of a non-2xx answer', () => {
    expect(failure(parseOversizedResponse(503, {}, 1024)).kind).toBe('unavailable');
    expect(failure(parseOversizedResponse(429, { 'retry-after': '7' }, 1024, NOW))).toMatchObject({
      kind: 'rate-limited',
      retryAfterMs: 7000,
    });
  });
});

describe('parseRetryAfter', () => {
  it.each<[string | undefined, number | undefined]>([
    [undefined, undefined],
    ['', undefined],
    ['0', 0],
    [' 12 ', 12_000],
    ['1.5', undefined],
    ['-1', undefined],
    ['99999999999999999999', undefined],
    ['2026-11-05T12:00:10Z', 10_000],
    ['Thu, 05 Nov 2026 12:00:10 GMT', 10_000],
    ['Thu, 05 Nov 2026 11:00:00 GMT', 0],
    ['tomorrow', undefined],
  ])('%j → %s', (value, expected) => {
    expect(parseRetryAfter(value, NOW)).toBe(expected);
  });
});

describe('parseBooleanLike', () => {
  it('rejects values that are not boolean-like', () => {
    expect(parseBooleanLike(undefined)).toBeUndefined();
    expect(parseBooleanLike('')).toBeUndefined();
    expect(parseBooleanLike([])).toBeUndefined();
  });
});
