// Classifies the service's answers (status, headers, body) into a user group or a typed failure.
import { sanitizeText } from './redact.js';
import { parseBooleanLike } from './boolean-like.js';
import { readHiddenFields } from './hidden-fields.js';
import { parseRetryAfter } from './retry-after.js';
import { SecretValue } from './secret-value.js';
import type { ResponseHeaders, ServiceFailure, ServiceResult, ServiceUserGroup } from './types.js';
import { isRecord } from '../platform/json-value.js';

/** The most of a service-supplied message we repeat; the rest only bloats status fields and Events. */
const SERVICE_MESSAGE_LIMIT = 500;

type JsonObject = Record<string, unknown>;

function fail(failure: ServiceFailure): ServiceResult {
  return { ok: false, failure };
}

function header(headers: ResponseHeaders, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) {
      return Array.isArray(value) ? value[0] : value;
    }
  }
  return undefined;
}

function parseJson(body: string): { ok: true; value: unknown } | { ok: false } {
  try {
    // A byte-order mark is legal in front of a UTF-8 body but not in front of JSON.
    return { ok: true, value: JSON.parse(body.replace(/^\uFEFF/, '')) };
  } catch {
    return { ok: false };
  }
}

/** The service's own explanation, if the body carries one; the raw body itself is never repeated. */
function serviceMessage(parsed: unknown): string | undefined {
  if (!isRecord(parsed)) {
    return undefined;
  }
  const { message, error } = parsed;
  const candidate =
    typeof message === 'string'
      ? message
      : typeof error === 'string'
        ? error
        : isRecord(error) && typeof error.message === 'string'
          ? error.message
          : undefined;
  if (candidate === undefined) {
    return undefined;
  }
  // A service that echoes the token back in its message must not get it into our logs.
  const cleaned = sanitizeText(candidate, SERVICE_MESSAGE_LIMIT, [echoedToken(parsed)]);
  return cleaned === '' ? undefined : cleaned;
}

function echoedToken(parsed: JsonObject): SecretValue | undefined {
  const group = parsed.user_group;
  return isRecord(group) && typeof group.token === 'string' ? new SecretValue(group.token) : undefined;
}

function withServiceMessage(summary: string, body: string): string {
  const parsed = parseJson(body);
  const detail = parsed.ok ? serviceMessage(parsed.value) : undefined;
  return detail === undefined ? summary : `${summary}: ${detail}`;
}

function describeBody(status: number, headers: ResponseHeaders, body: string): string {
  const contentType = header(headers, 'content-type');
  const type = contentType === undefined ? '' : `, content-type ${sanitizeText(contentType, 100)}`;
  return `HTTP ${status}, ${Buffer.byteLength(body)} bytes${type}`;
}

function parseTeamId(value: unknown): number | undefined {
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) ? value : undefined;
  }
  if (typeof value === 'string' && /^\s*-?\d+\s*$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : undefined;
  }
  return undefined;
}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function parseUserGroup(raw: JsonObject, token: string): ServiceUserGroup {
  const group: ServiceUserGroup = {
    teamId: parseTeamId(raw.team_id),
    token: new SecretValue(token),
    name: optionalString(raw.name),
    providedId: optionalString(raw.provided_id),
    ...readHiddenFields(raw),
  };
  if (isRecord(raw.properties)) {
    group.properties = { ...raw.properties };
  }
  return group;
}

function parseSuccessBody(status: number, headers: ResponseHeaders, body: string): ServiceResult {
  const parsed = parseJson(body);
  if (!parsed.ok) {
    return fail({
      kind: 'invalid-response',
      status,
      message: `response body is not JSON (${describeBody(status, headers, body)})`,
    });
  }
  const doc = parsed.value;
  if (!isRecord(doc)) {
    return fail({
      kind: 'invalid-response',
      status,
      message: `response body is JSON but not an object (HTTP ${status}, ${Array.isArray(doc) ? 'array' : doc === null ? 'null' : typeof doc})`,
    });
  }
  const success = parseBooleanLike(doc.success);
  if (success === undefined) {
    return fail({
      kind: 'invalid-response',
      status,
      message: `response has no valid "success" field (expected 1 or 0, HTTP ${status})`,
    });
  }
  if (!success) {
    return fail({
      kind: 'rejected',
      status,
      message: withServiceMessage(`service reported failure (success 0, HTTP ${status})`, body),
    });
  }
  const raw = doc.user_group;
  if (!isRecord(raw)) {
    return fail({
      kind: 'invalid-response',
      status,
      message: `response reports success but "user_group" is ${raw === undefined ? 'missing' : 'not an object'} (HTTP ${status})`,
    });
  }
  const token = raw.token;
  if (typeof token !== 'string' || token.trim() === '') {
    const what = token === undefined ? 'missing' : typeof token === 'string' ? 'empty' : 'not a string';
    return fail({
      kind: 'invalid-response',
      status,
      message: `response reports success but "user_group.token" is ${what} (HTTP ${status})`,
    });
  }
  return { ok: true, group: parseUserGroup(raw, token) };
}

/**
 * Classifies one HTTP exchange with the service. The status decides the class for non-2xx answers (the
 * body only contributes the service's message); a 2xx answer must carry `success` and, on success, a
 * user group with a token. Messages never contain the raw body or a token.
 */
export function parseServiceResponse(status: number, headers: ResponseHeaders, body: string, nowMs: number = Date.now()): ServiceResult {
  if (status === 401 || status === 403) {
    return fail({
      kind: 'unauthorized',
      status,
      message: withServiceMessage(`service refused the API key (HTTP ${status})`, body),
    });
  }
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(header(headers, 'retry-after'), nowMs);
    const wait = retryAfterMs === undefined ? '' : `, retry after ${retryAfterMs} ms`;
    return fail({
      kind: 'rate-limited',
      status,
      retryAfterMs,
      message: withServiceMessage(`service rate limit reached (HTTP 429${wait})`, body),
    });
  }
  if (status >= 500 && status <= 599) {
    return fail({
      kind: 'unavailable',
      status,
      message: withServiceMessage(`service unavailable (HTTP ${status})`, body),
    });
  }
  if (status >= 400 && status <= 499) {
    return fail({
      kind: 'rejected',
      status,
      message: withServiceMessage(`service rejected the request (HTTP ${status})`, body),
    });
  }
  if (status >= 300 && status <= 399) {
    // Redirects are not followed: they would carry the API key to wherever the service points.
    return fail({
      kind: 'rejected',
      status,
      message: `service answered with a redirect (HTTP ${status}); configure the URL it redirects to instead`,
    });
  }
  if (status < 200 || status > 599) {
    return fail({ kind: 'invalid-response', status, message: `unexpected HTTP status ${status}` });
  }
  return parseSuccessBody(status, headers, body);
}

/**
 * Classifies an answer whose body was cut off at `limit` bytes. A non-2xx status still says what
 * happened (a 429 keeps its Retry-After); a 2xx answer cannot be trusted without its whole body.
 */
export function parseOversizedResponse(status: number, headers: ResponseHeaders, limit: number, nowMs: number = Date.now()): ServiceResult {
  if (status >= 200 && status <= 299) {
    return fail({
      kind: 'invalid-response',
      status,
      message: `response body exceeds the limit of ${limit} bytes (HTTP ${status})`,
    });
  }
  const result = parseServiceResponse(status, headers, '', nowMs);
  if (result.ok) {
    return result;
  }
  const note = ` (body over ${limit} bytes not read)`;
  return { ok: false, failure: { ...result.failure, message: result.failure.message + note } };
}
