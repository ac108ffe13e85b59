// Network failures as short, credential-free explanations for status and Events.
import { sanitizeText } from './redact.js';
import type { SecretValue } from './secret-value.js';

const DETAIL_LIMIT = 200;

/** Short explanations of the network errors an operator will actually see. */
const KNOWN_CODES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed temporarily',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed while sending',
  ERR_STREAM_PREMATURE_CLOSE: 'connection closed before the response ended',
  CERT_HAS_EXPIRED: 'TLS certificate has expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate is self-signed',
  SELF_SIGNED_CERT_IN_CHAIN: 'TLS certificate chain is self-signed',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate could not be verified',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not match the host',
};

function timeoutEvent(error: unknown): string | undefined {
  if (!(error instanceof Error) || error.name !== 'TimeoutError' || stringProperty(error, 'code') !== 'ETIMEDOUT') {
    return undefined;
  }
  const event: unknown = (error as Error & { event?: unknown }).event;
  return typeof event === 'string' ? event : 'request';
}

function stringProperty(value: unknown, key: 'code' | 'message'): string | undefined {
  if (typeof value !== 'object' || value === null) {
    return undefined;
  }
  const property: unknown = (value as Record<string, unknown>)[key];
  return typeof property === 'string' ? property : undefined;
}

/**
 * Turns an error from the HTTP layer into a short message. Only the error's code and message text are
 * read: a got error also carries the request options, Authorization header included, so the object
 * itself must never be logged, wrapped or rethrown.
 */
export function describeTransportError(error: unknown, context: { timeoutMs: number; secrets: readonly (SecretValue | undefined)[] }): string {
  // got's TimeoutError, recognised by shape so that this module does not load got (see client.ts).
  const event = timeoutEvent(error);
  if (event !== undefined) {
    return event === 'request' ? `request timed out after ${context.timeoutMs} ms` : `request timed out waiting for ${sanitizeText(event, 40)}`;
  }
  const code = stringProperty(error, 'code');
  const message = stringProperty(error, 'message');
  const detail = message === undefined ? '' : sanitizeText(message, DETAIL_LIMIT, context.secrets);
  const known = code === undefined ? undefined : KNOWN_CODES[code];
  const summary = known ?? 'request failed';
  // Error codes are identifiers like ECONNRESET; anything else in that slot is not worth repeating.
  const codePart = code !== undefined && /^[A-Z][A-Z0-9_]{0,59}$/.test(code) ? ` (${code})` : '';
  return detail === '' ? `${summary}${codePart}` : `${summary}${codePart}: ${detail}`;
}
