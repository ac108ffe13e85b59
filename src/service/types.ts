// The service client's types: what is asked, the user group returned, and the failures.
import type { SecretValue } from './secret-value.js';

/** What we ask the service to create or update (PUT /api/user), in our own camelCase. */
export interface UpsertRequest {
  userGroupId: string;
  name: string;
  mapping?: Readonly<Record<string, string>>;
  properties?: Readonly<Record<string, unknown>>;
}

/**
 * A user group as the service returned it. Only the token is guaranteed: the service's other fields are
 * read tolerantly, so anything absent or of an unexpected type is undefined rather than a failure.
 */
export interface ServiceUserGroup {
  teamId: number | undefined;
  token: SecretValue;
  name: string | undefined;
  providedId: string | undefined;
  properties?: Record<string, unknown>;
  /** The created indicator, whatever the service calls it (hidden-fields.ts); undefined: unknown. */
  created: boolean | undefined;
  /** The environment tag (documented values: Customer, Testing), whatever the service calls it. */
  environmentTag: string | undefined;
}

/**
 * Why a call did not produce a user group. The kind tells the caller what to do next: fix credentials
 * (unauthorized), wait (rate-limited), retry with backoff (unavailable), fix the request (rejected), or
 * treat the service as misbehaving (invalid-response).
 */
export type ServiceFailure =
  | { kind: 'unauthorized'; status: number; message: string }
  | { kind: 'rate-limited'; status: 429; retryAfterMs: number | undefined; message: string }
  | { kind: 'unavailable'; status: number | undefined; message: string }
  | { kind: 'rejected'; status: number; message: string }
  | { kind: 'invalid-response'; status: number; message: string };

export type ServiceFailureKind = ServiceFailure['kind'];

export type ServiceResult = { ok: true; group: ServiceUserGroup } | { ok: false; failure: ServiceFailure };

/**
 * A call its caller withdrew (its signal fired: shutdown, lost leadership) before an answer came. It says
 * nothing about the service, so it is no failure; the request may or may not have been applied there.
 */
export interface AbortedCall {
  readonly ok: false;
  readonly aborted: true;
}

export type ServiceCallResult = ServiceResult | AbortedCall;

/** The headers of a response as node:http reports them. */
export type ResponseHeaders = Readonly<Record<string, string | string[] | undefined>>;
