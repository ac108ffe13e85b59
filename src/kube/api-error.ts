// The apiserver's non-2xx answers as one typed ApiError, and the predicates (isNotFound, isConflict…) callers ask.
import { isRecord } from '../platform/json-value.js';

/**
 * The apiserver's refusals as one typed error, in the spirit of k8s.io/apimachinery/pkg/api/errors: a non-2xx
 * answer is parsed once, where it arrives (call() in http.ts), and callers ask isNotFound(err), isConflict(err)…
 * instead of reading status codes, so whatever they report carries what the apiserver said.
 */
export class ApiError extends Error {
  constructor(
    readonly method: string,
    /** The request path, without its query. */
    readonly path: string,
    /** The HTTP status code. */
    readonly code: number,
    /** The Status reason (NotFound, Forbidden…); when the answer was not a Status, the one client-go derives from the code. */
    readonly reason: string,
    /** The apiserver's own words (Status.message), bounded; client-go's generic text for the code when it sent none. */
    readonly serverMessage: string,
  ) {
    super(`${method} ${path}: ${code} ${reason}: ${serverMessage}`);
  }
}

/** Long enough for an Invalid answer listing several fields; an Event's note holds 1024 characters. */
const MAX_MESSAGE_CHARS = 1024;

/**
 * Parses a non-2xx answer. Only a Status's reason and message are read: any other body, JSON or a proxy's page, may
 * echo the request (a TokenReview echoes the token it was sent, a Secret write carries one), so none of it reaches a
 * message; the code says what happened.
 */
export function apiErrorFrom(method: string, path: string, code: number, body: unknown): ApiError {
  const status = isRecord(body) && body['kind'] === 'Status' ? body : undefined;
  const derived = fromCode(method, code);
  const reason = nonEmpty(status?.['reason']) ?? derived.reason;
  const message = nonEmpty(status?.['message']);
  return new ApiError(method, path, code, reason, message === undefined ? derived.message : bounded(message, MAX_MESSAGE_CHARS));
}

/** The reasons of metav1.StatusReason. Any other (a webhook's, an aggregated API's) is judged by its code. */
const KNOWN_REASONS: ReadonlySet<string> = new Set([
  'Unauthorized',
  'Forbidden',
  'NotFound',
  'AlreadyExists',
  'Conflict',
  'Gone',
  'Invalid',
  'ServerTimeout',
  'StoreReadError',
  'Timeout',
  'TooManyRequests',
  'BadRequest',
  'MethodNotAllowed',
  'NotAcceptable',
  'RequestEntityTooLarge',
  'UnsupportedMediaType',
  'InternalError',
  'Expired',
  'ServiceUnavailable',
]);

/** The object is not there (404). */
export function isNotFound(err: unknown): boolean {
  return hasReason(err, 'NotFound', 404);
}

/** A create found an object of that name (409 to a POST). */
export function isAlreadyExists(err: unknown): boolean {
  return err instanceof ApiError && err.reason === 'AlreadyExists';
}

/** A write lost an optimistic-concurrency race: the object changed since it was read, or a precondition failed (409). */
export function isConflict(err: unknown): boolean {
  return hasReason(err, 'Conflict', 409);
}

/** RBAC, an admission policy or a terminating namespace refused the request (403). */
export function isForbidden(err: unknown): boolean {
  return hasReason(err, 'Forbidden', 403);
}

/** The credentials were not accepted (401). */
export function isUnauthorized(err: unknown): boolean {
  return hasReason(err, 'Unauthorized', 401);
}

/** The object failed validation (422). */
export function isInvalid(err: unknown): boolean {
  return hasReason(err, 'Invalid', 422);
}

/** A resourceVersion or continue token too old to serve (410, reason Expired or Gone): list afresh. */
export function isGone(err: unknown): boolean {
  return err instanceof ApiError && (err.reason === 'Expired' || hasReason(err, 'Gone', 410));
}

/** The apiserver (or its priority and fairness) asks for fewer requests (429, whatever the reason). */
export function isTooManyRequests(err: unknown): boolean {
  return err instanceof ApiError && (err.reason === 'TooManyRequests' || err.code === 429);
}

/** The apiserver, or something between us and it, failed (5xx). */
export function isServerError(err: unknown): boolean {
  return err instanceof ApiError && err.code >= 500;
}

/**
 * Worth asking again later (5xx, 429); any other refusal will be refused again. Only apiserver answers are judged
 * here: a transport failure is not an ApiError, and whether to retry it is the caller's call.
 */
export function isRetryable(err: unknown): boolean {
  return isServerError(err) || isTooManyRequests(err);
}

/** client-go's test: the reason when it is one it knows, else the code. */
function hasReason(err: unknown, reason: string, code: number): boolean {
  return err instanceof ApiError && (err.reason === reason || (!KNOWN_REASONS.has(err.reason) && err.code === code));
}

/** What client-go (NewGenericServerResponse) says for a code when the answer carried no Status. */
function fromCode(method: string, code: number): { reason: string; message: string } {
  switch (code) {
    case 400:
      return { reason: 'BadRequest', message: 'the server rejected our request for an unknown reason' };
    case 401:
      return { reason: 'Unauthorized', message: 'the server has asked for the client to provide credentials' };
    case 403:
      return { reason: 'Forbidden', message: 'the server does not allow access to the requested resource' };
    case 404:
      return { reason: 'NotFound', message: 'the server could not find the requested resource' };
    case 405:
      return { reason: 'MethodNotAllowed', message: 'the server does not allow this method on the requested resource' };
    case 406:
      return { reason: 'NotAcceptable', message: 'the server was unable to respond with a content type that the client supports' };
    // A create that meets 409 found the name taken; any other write found the object changed.
    case 409:
      return { reason: method === 'POST' ? 'AlreadyExists' : 'Conflict', message: 'the server reported a conflict' };
    case 410:
      return { reason: 'Gone', message: 'the requested resource is no longer available' };
    case 413:
      return { reason: 'RequestEntityTooLarge', message: 'the server has rejected the request due to its size' };
    case 415:
      return { reason: 'UnsupportedMediaType', message: 'the server does not support the media type of the request' };
    case 422:
      return { reason: 'Invalid', message: 'the server rejected our request due to an error in our request' };
    case 429:
      return { reason: 'TooManyRequests', message: 'the server has received too many requests and has asked us to try again later' };
    case 503:
      return { reason: 'ServiceUnavailable', message: 'the server is currently unable to handle the request' };
    case 504:
      return { reason: 'Timeout', message: 'the server was unable to return a response in the time allotted, but may still be processing the request' };
  }
  if (code >= 500) return { reason: 'InternalError', message: 'an error on the server has prevented the request from succeeding' };
  return { reason: 'Unknown', message: `the server responded with the status code ${code} but did not return more information` };
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function bounded(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
