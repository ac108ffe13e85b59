// The service edge's types: what is asked, the user group returned, the failures, and CallResult, the one result of a call.
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

/**
 * A call not made, and why: `throttled` (the account's token bucket reserved a later slot for this key),
 * `busy` (this failing connection is trying one call at a time) or `paused` (its breaker is open after
 * failures in a row). None of them holds a worker: the key comes back when woken, or after `afterMs`.
 */
export interface Deferral {
  readonly why: 'throttled' | 'busy' | 'paused';
  readonly afterMs: number;
  readonly message: string;
  /** For `paused`: the connection's last failure, which is what the user needs to know. */
  readonly lastFailure?: ServiceFailure | undefined;
}

/**
 * What one call to the service came to, from the client through the gates (call-gates.ts) to the reconcile's steps:
 * the user group, the failure the service answered with, or a deferral (the gates did not send it now). A call its
 * caller withdrew (its signal fired: shutdown, lost leadership) is none of these: it throws the signal's reason,
 * since it says nothing about the service (the request may or may not have been applied there).
 */
export type CallResult =
  | { readonly ok: true; readonly group: ServiceUserGroup }
  | { readonly ok: false; readonly failure: ServiceFailure }
  | { readonly ok: false; readonly deferred: Deferral };

/** What the client itself answers: it sends every call it is given, so none is deferred. */
export type ServiceResult = Exclude<CallResult, { readonly deferred: Deferral }>;

/** The headers of a response as node:http reports them. */
export type ResponseHeaders = Readonly<Record<string, string | string[] | undefined>>;
