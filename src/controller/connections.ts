// The service connections: which account a UserGroup uses, through which gates (egress, tenancy, breaker, bucket).
import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { Adoption, ClusterUserGroupService, FleetRole } from '../api/clusterusergroupservice.js';
import { objectKey } from '../api/meta.js';
import { secretValue, type ObservedSecret } from '../api/secret.js';
import type { ServiceRef } from '../api/usergroup.js';
import type { UserGroupService } from '../api/usergroupservice.js';
import { CircuitBreaker, type Admission, type CircuitBreakerOptions } from '../service/circuit-breaker.js';
import { ServiceClient, type ServiceClientOptions } from '../service/client.js';
import { validateServiceUrl } from '../service/connection.js';
import { checkEgress, type EgressPolicy } from '../service/egress-policy.js';
import { SecretValue } from '../service/secret-value.js';
import { TokenBucket } from '../platform/token-bucket.js';
import type { ServiceCallResult, ServiceFailure, ServiceResult, UpsertRequest } from '../service/types.js';
import type { ObjectCache } from '../kube/cache.js';
import { Reason } from './policies/conditions.js';
import { sha256Hex } from './hash.js';
import { jittered, THROTTLED_SPREAD_MS } from './retry-policy.js';
import { admit } from './policies/tenancy.js';
import { adoptionIn } from './policies/adoption.js';

/** A resolved way to reach the service for one UserGroup: one account (URL + API key), rate-limited as a whole. */
export interface Connection {
  /** Same URL and API key → same id, whichever object declared it. Not reversible to the key. */
  readonly id: string;
  /**
   * The account, whatever URL spelling reaches it: a digest of the API key alone (the service scopes groups
   * by key). userGroupIds are claimed per account. Not reversible to the key.
   */
  readonly account: string;
  /** For messages: "ClusterUserGroupService <name>" or "UserGroupService <ns>/<name>". */
  readonly description: string;
  /** A cluster admin's shared connection (tenant rules apply), or a namespace's own account. */
  readonly shared: boolean;
  /** What the first sync may do with a group that already exists: the tenant rule's policy; Keep on an own account. */
  readonly adoption: Adoption;
  /** This cluster's role when the account is shared by a fleet (ClusterUserGroupService spec.fleet); else undefined. */
  readonly fleet: FleetRole | undefined;
  /** The Secret the API key came from, "namespace/name" (to forget it after a 401). */
  readonly apiKeySecret: string;
  /** MAC of a token record under a key derived from this account's API key (see policies/token-secret.ts). */
  readonly seal: (message: string) => string;
  upsert(request: UpsertRequest, context: CallContext): Promise<CallResult>;
  rotate(token: SecretValue, context: CallContext): Promise<CallResult>;
  /** A deferral when no call could go out now (the connection is paused or trying one call at a time). */
  unavailable(context: CallContext): Deferral | undefined;
}

/** Who is calling: one reconcile of one UserGroup. */
export interface CallContext {
  /** The UserGroup's key: a token reserved for it waits for it, and a turned-away caller is woken by it. */
  readonly key: string;
  /** A later call of a reconcile that already made one: it is never deferred (that would strand the first). */
  readonly followUp: boolean;
  /**
   * Aborted when the worker must stop (shutdown, lost leadership). No call starts after it, one in flight is
   * cut off (its connection closed), and either way the call throws the signal's reason: an answer that comes
   * after it is not acted on, since another leader may already be acting on the same groups.
   */
  readonly signal?: AbortSignal | undefined;
  /** Queues the key again; run when a deferred call may go out. */
  readonly wake: () => void;
}

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

export type CallResult = ServiceResult | { readonly ok: false; readonly deferred: Deferral };

export type ResolutionFailureReason =
  | typeof Reason.ConnectionNotFound
  | typeof Reason.ConnectionInvalid
  | typeof Reason.ServiceNotAllowed
  | typeof Reason.NamespaceNotAllowed
  | typeof Reason.UserGroupIdNotAllowed;

export type Resolution =
  { readonly ok: true; readonly connection: Connection } | { readonly ok: false; readonly reason: ResolutionFailureReason; readonly message: string };

export interface ConnectionsOptions {
  /** The ClusterUserGroupService for UserGroups without spec.serviceRef (--default-service). */
  readonly defaultService: string | undefined;
  readonly services: ObjectCache<UserGroupService>;
  readonly clusterServices: ObjectCache<ClusterUserGroupService>;
  /** Labels of a namespace, undefined when it is not known. */
  readonly namespaceLabels: (namespace: string) => Readonly<Record<string, string>> | undefined;
  readonly readSecret: (namespace: string, name: string) => Promise<ObservedSecret | undefined>;
  readonly clientOptions: ServiceClientOptions;
  readonly qps: number;
  readonly burst: number;
  readonly log: Logger;
  /** Where namespaced UserGroupServices may point (validated at startup). */
  readonly egress: EgressPolicy;
  readonly breaker?: CircuitBreakerOptions;
  /** Runs before every call goes out; throws when the work must stop (a lease lost by the clock). */
  readonly beforeCall?: () => void;
  /** When 429s are reported instead of waited out (default PERSISTENT_RATE_LIMIT). */
  readonly persistentRateLimit?: { readonly ms: number; readonly answers: number };
}

/** The Secret type that lets a Secret serve as a UserGroupService's API key (see docs/tenancy.md). */
export const API_KEY_SECRET_TYPE = 'usergroup.dev/api-key';

/** Per-URL-and-key state. Idle ones are dropped after a while, so tenants cannot grow it without bound. */
interface Endpoint {
  readonly client: ServiceClient;
  readonly bucket: TokenBucket;
  readonly breaker: CircuitBreaker;
  readonly account: string;
  readonly recordKey: Buffer;
  /** Key → when the bucket token reserved for it exists (ms, performance.now()). */
  readonly prepaid: Map<string, number>;
  /** The service asked everyone to wait (429 with Retry-After) until then. */
  pausedUntil: number;
  /** Since when every answer has been a 429 with Retry-After, and how many (undefined: the last answer was not one). */
  limited: { readonly since: number; answers: number } | undefined;
  /** The last connection-level failure, reported to those whose calls its breaker holds back. */
  lastFailure: ServiceFailure | undefined;
  lastUsed: number;
}

const ENDPOINT_IDLE_MS = 15 * 60_000;
/** How long an API-key Secret read is reused (a 401 drops it sooner). */
const API_KEY_SECRET_TTL_MS = 30_000;
const SWEEP_EVERY_MS = 60_000;
/** Reserved tokens whose key never came back (deleted meanwhile) are forgotten this long after their slot. */
const PREPAID_GRACE_MS = 60_000;
/**
 * 429s with Retry-After are the account's rate limit, shared with every other cluster and shard on it: a call
 * they turn away waits (deferred, no failure on the UserGroup) unless nothing but 429s came back for this long and
 * this many times: then it is reported (RateLimited), since no share of the rate is left to this cluster.
 */
export const PERSISTENT_RATE_LIMIT = { ms: 30_000, answers: 3 } as const;

/**
 * Resolves a UserGroup's connection: a shared ClusterUserGroupService (named in spec.serviceRef, or the
 * operator's default) whose tenant rules must admit the UserGroup's namespace and userGroupId, or a
 * UserGroupService in the UserGroup's own namespace whose API key comes from a Secret in that same namespace.
 * Clients and token buckets are shared per URL and key.
 */
export class Connections {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly apiKeys = new Map<string, { readonly secret: ObservedSecret | undefined; readonly at: number }>();
  /** API-key Secrets being read now: the workers that need one at the same moment (a start) share one GET. */
  private readonly apiKeyReads = new Map<string, Promise<ObservedSecret | undefined>>();
  private lastSweep = performance.now();

  constructor(private readonly options: ConnectionsOptions) {}

  async resolve(namespace: string, ref: ServiceRef | undefined, userGroupId: string): Promise<Resolution> {
    if (!ref) {
      const name = this.options.defaultService;
      if (name === undefined) {
        return {
          ok: false,
          reason: Reason.ConnectionNotFound,
          message: 'spec.serviceRef is not set and the operator has no default ClusterUserGroupService (--default-service)',
        };
      }
      return this.resolveShared(name, namespace, userGroupId);
    }
    return ref.kind === 'ClusterUserGroupService' ? this.resolveShared(ref.name, namespace, userGroupId) : this.resolveOwn(namespace, ref.name);
  }

  /** Forget cached API keys of one namespace (a UserGroupService there changed). */
  forgetNamespace(namespace: string): void {
    for (const key of [...this.apiKeys.keys()]) if (key.startsWith(`${namespace}/`)) this.apiKeys.delete(key);
  }

  /** Forget one cached API-key Secret, "namespace/name" (after a 401, or when a ClusterUserGroupService changed). */
  forgetSecret(key: string): void {
    this.apiKeys.delete(key);
  }

  private async resolveShared(name: string, namespace: string, userGroupId: string): Promise<Resolution> {
    const description = `ClusterUserGroupService ${name}`;
    const service = this.options.clusterServices.get(objectKey({ namespace: '', name }));
    if (!service) return { ok: false, reason: Reason.ConnectionNotFound, message: `${description} does not exist` };
    if (!service.spec.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${description}: ${service.spec.error}` };
    const spec = service.spec.value;
    // Decided before the API key is even read: a namespace the rules do not admit gets nothing from this connection.
    const admission = admit({ service: description, tenants: spec.tenants, namespace, namespaceLabels: this.options.namespaceLabels(namespace), userGroupId });
    if (!admission.ok) return admission;
    const { namespace: secretNamespace, name: secretName, key } = spec.apiKeySecretRef;
    const apiKey = await this.apiKey(secretNamespace, secretName, key, description);
    if (!apiKey.ok) return apiKey;
    return this.connect(spec.url, apiKey.value, spec.allowInsecure, {
      description,
      shared: true,
      adoption: adoptionIn(spec.fleet, admission.adoption),
      fleet: spec.fleet?.role,
      apiKeySecret: `${secretNamespace}/${secretName}`,
    });
  }

  private async resolveOwn(namespace: string, name: string): Promise<Resolution> {
    const key = objectKey({ namespace, name });
    const description = `UserGroupService ${key}`;
    const service = this.options.services.get(key);
    if (!service)
      return { ok: false, reason: Reason.ConnectionNotFound, message: `${description} does not exist (a UserGroup can only use one in its own namespace)` };
    if (!service.spec.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${description}: ${service.spec.error}` };
    const { apiKeySecretRef, url, allowInsecure } = service.spec.value;
    // The tenant's URL is checked before its Secret is even read: nothing leaves for a host the admins did not allow.
    const checked = validateServiceUrl(url, allowInsecure);
    if (!checked.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${description}: ${checked.message}` };
    const egress = checkEgress(checked.url, allowInsecure, this.options.egress);
    if (!egress.ok) return { ok: false, reason: Reason.ServiceNotAllowed, message: `${description}: ${egress.message}` };
    const apiKey = await this.apiKey(namespace, apiKeySecretRef.name, apiKeySecretRef.key, description, API_KEY_SECRET_TYPE);
    if (!apiKey.ok) return apiKey;
    // The namespace's own account: the groups in it are its own, so no tenant rule applies and adopting one is fine.
    return this.connect(url, apiKey.value, allowInsecure, {
      description,
      shared: false,
      adoption: 'Keep',
      fleet: undefined,
      apiKeySecret: `${namespace}/${apiKeySecretRef.name}`,
    });
  }

  /**
   * The API key from a Secret. `requiredType`: a tenant's connection may only use a Secret made for it. A
   * Secret's type cannot change after creation, so this keeps the namespace's other Secrets (database
   * passwords, other apps' keys) from ever being sent to the service as "the API key".
   */
  private async apiKey(
    namespace: string,
    name: string,
    key: string,
    description: string,
    requiredType?: string,
  ): Promise<{ ok: true; value: SecretValue } | { ok: false; reason: typeof Reason.ConnectionNotFound | typeof Reason.ConnectionInvalid; message: string }> {
    const secret = await this.readApiKeySecret(namespace, name);
    if (secret && requiredType !== undefined && secret.type !== requiredType) {
      return {
        ok: false,
        reason: Reason.ConnectionInvalid,
        message: `${description}: Secret ${namespace}/${name} is not an API-key Secret (its type must be ${requiredType}; the operator sends no other Secret to the service)`,
      };
    }
    const value = secret && secretValue(secret, key)?.trim();
    if (value) return { ok: true, value: new SecretValue(value) };
    return {
      ok: false,
      reason: Reason.ConnectionNotFound,
      message: `${description}: Secret ${namespace}/${name} ${secret ? `has no key "${key}"` : 'does not exist'}`,
    };
  }

  private connect(
    rawUrl: string,
    apiKey: SecretValue,
    allowInsecure: boolean,
    about: Pick<Connection, 'description' | 'shared' | 'adoption' | 'fleet' | 'apiKeySecret'>,
  ): Resolution {
    const checked = validateServiceUrl(rawUrl, allowInsecure);
    if (!checked.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${about.description}: ${checked.message}` };
    const id = sha256Hex(`${checked.url}\n${apiKey.reveal()}`).slice(0, 32);
    const now = performance.now();
    this.sweep(now);
    let endpoint = this.endpoints.get(id);
    if (!endpoint) {
      endpoint = {
        client: new ServiceClient({ url: checked.url, apiKey }, this.options.clientOptions),
        bucket: new TokenBucket(this.options.qps, this.options.burst),
        breaker: new CircuitBreaker(this.options.breaker),
        account: sha256Hex(`usergroup-operator account\n${apiKey.reveal()}`).slice(0, 32),
        recordKey: createHmac('sha256', apiKey.reveal()).update('usergroup-operator token record v1').digest(),
        prepaid: new Map(),
        pausedUntil: 0,
        limited: undefined,
        lastFailure: undefined,
        lastUsed: now,
      };
      this.endpoints.set(id, endpoint);
    }
    endpoint.lastUsed = now;
    const { client, account, recordKey } = endpoint;
    const at = endpoint;
    return {
      ok: true,
      connection: {
        id,
        account,
        ...about,
        seal: (message) => createHmac('sha256', recordKey).update(message).digest('hex'),
        upsert: (request, context) => this.call(at, about.description, context, (signal) => client.upsert(request, { signal })),
        unavailable: (context) => {
          const turned = at.breaker.wouldTurnAway(context.key, context.wake);
          return turned && !turned.ok ? this.deferral(turned, at, about.description) : undefined;
        },
        rotate: (token, context) => this.call(at, about.description, context, (signal) => client.rotate(token, { signal })),
      },
    };
  }

  /**
   * One call through the connection's gates: its breaker (is the service there?), then its token bucket
   * (may this account call now?). A caller that may not go now is deferred, never kept waiting.
   */
  private async call(
    endpoint: Endpoint,
    description: string,
    context: CallContext,
    send: (signal: AbortSignal | undefined) => Promise<ServiceCallResult>,
  ): Promise<CallResult> {
    this.options.beforeCall?.();
    const { signal } = context;
    signal?.throwIfAborted();
    const now = performance.now();
    endpoint.lastUsed = now;
    if (!context.followUp && now < endpoint.pausedUntil) {
      return {
        ok: false,
        deferred: {
          why: 'throttled',
          afterMs: jittered(endpoint.pausedUntil - now, THROTTLED_SPREAD_MS),
          message: `${description}: the service asked to wait (HTTP 429)`,
        },
      };
    }
    const admission = endpoint.breaker.admit(context.key, context.wake, context.followUp);
    if (!admission.ok) return { ok: false, deferred: this.deferral(admission, endpoint, description) };
    if (!context.followUp) {
      const wait = this.reservation(endpoint, context.key, now);
      if (wait > 0) {
        endpoint.breaker.release();
        return { ok: false, deferred: { why: 'throttled', afterMs: wait, message: `${description}: waiting for the account's rate limit` } };
      }
    } else {
      // A follow-up goes now and is charged to the bucket: later first calls wait for it.
      endpoint.bucket.reserve();
    }
    let result: ServiceCallResult;
    try {
      result = await send(signal);
    } catch (err) {
      endpoint.breaker.record('failure');
      throw err;
    }
    if ('aborted' in result) {
      // Withdrawn by us, not failed by the service: its slot is freed without a verdict.
      endpoint.breaker.release();
      throw withdrawn(signal);
    }
    const failed = connectionLevelFailure(result);
    endpoint.breaker.record(failed ? 'failure' : 'success');
    if (failed && !result.ok) endpoint.lastFailure = result.failure;
    const retryAfterMs = !result.ok && result.failure.kind === 'rate-limited' ? result.failure.retryAfterMs : undefined;
    if (retryAfterMs === undefined) {
      endpoint.limited = undefined;
      // An answer that raced the abort is the service's truth (recorded above) but no longer ours to act on.
      signal?.throwIfAborted();
      return result;
    }
    // The account is limited, not this key: every caller of the connection waits.
    const answeredAt = performance.now();
    endpoint.pausedUntil = Math.max(endpoint.pausedUntil, answeredAt + retryAfterMs);
    endpoint.limited ??= { since: answeredAt, answers: 0 };
    endpoint.limited.answers += 1;
    signal?.throwIfAborted();
    const { since, answers } = endpoint.limited;
    const persistent = this.options.persistentRateLimit ?? PERSISTENT_RATE_LIMIT;
    if (answeredAt - since >= persistent.ms && answers >= persistent.answers) return result;
    const message = `${description}: the service asked to wait (HTTP 429)`;
    return { ok: false, deferred: { why: 'throttled', afterMs: jittered(retryAfterMs, THROTTLED_SPREAD_MS), message } };
  }

  private deferral(admission: Exclude<Admission, { ok: true }>, endpoint: Endpoint, description: string): Deferral {
    return admission.why === 'open'
      ? // No counts or times in the message: it goes into status, and an unchanged status is not written again.
        {
          why: 'paused',
          afterMs: admission.afterMs,
          message:
            'not sent: calls are paused after failures in a row (one call probes the service from time to time; every UserGroup resumes once one succeeds)',
          lastFailure: endpoint.lastFailure,
        }
      : { why: 'busy', afterMs: admission.afterMs, message: `${description} is failing; one call at a time until one succeeds` };
  }

  /** 0 when the key may call now (a token now, or one it reserved earlier that is due); else ms to wait. */
  private reservation(endpoint: Endpoint, key: string, now: number): number {
    const due = endpoint.prepaid.get(key);
    if (due !== undefined) {
      // Woken or re-queued early: the slot it holds is still ahead; no second reservation.
      if (due > now + 5) return due - now;
      endpoint.prepaid.delete(key);
      return 0;
    }
    const wait = endpoint.bucket.reserve();
    if (wait > 0) endpoint.prepaid.set(key, now + wait);
    return wait;
  }

  /** Drops idle endpoints and forgotten reservations, at most once a minute. */
  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    for (const [id, endpoint] of this.endpoints) {
      for (const [key, due] of endpoint.prepaid) if (due + PREPAID_GRACE_MS < now) endpoint.prepaid.delete(key);
      if (now - endpoint.lastUsed > ENDPOINT_IDLE_MS && endpoint.breaker.idle && endpoint.prepaid.size === 0) {
        endpoint.breaker.dispose();
        this.endpoints.delete(id);
      }
    }
    const wall = Date.now();
    for (const [key, cached] of this.apiKeys) if (wall - cached.at >= API_KEY_SECRET_TTL_MS) this.apiKeys.delete(key);
  }

  private async readApiKeySecret(namespace: string, name: string): Promise<ObservedSecret | undefined> {
    const key = `${namespace}/${name}`;
    const cached = this.apiKeys.get(key);
    if (cached && Date.now() - cached.at < API_KEY_SECRET_TTL_MS) return cached.secret;
    const inFlight = this.apiKeyReads.get(key);
    if (inFlight) return inFlight;
    const reading = this.options.readSecret(namespace, name).then((secret) => {
      this.apiKeys.set(key, { secret, at: Date.now() });
      return secret;
    });
    this.apiKeyReads.set(key, reading);
    try {
      return await reading;
    } finally {
      this.apiKeyReads.delete(key);
    }
  }
}

/** The signal's reason, as throwIfAborted would throw it; a call is only aborted through its signal. */
function withdrawn(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new DOMException('service call withdrawn', 'AbortError');
}

/**
 * Failures that say something about the service as a whole (no answer, 5xx, garbage, a 429 without a
 * Retry-After) rather than about this request: they feed the breaker. A refusal (4xx, success 0, 401) is
 * an answer: the service is there.
 */
function connectionLevelFailure(result: ServiceResult): boolean {
  if (result.ok) return false;
  switch (result.failure.kind) {
    case 'unavailable':
    case 'invalid-response':
      return true;
    case 'rate-limited':
      return result.failure.retryAfterMs === undefined;
    case 'rejected':
    case 'unauthorized':
      return false;
  }
}
