// The service connections: which account a UserGroup uses (its service object, API key and tenant rule); the call gates are the endpoint's (service/).
import type { Logger } from 'pino';
import type { Adoption, ClusterUserGroupService, FleetRole } from '../api/clusterusergroupservice.js';
import { objectKey } from '../api/meta.js';
import { secretValue, type ObservedSecret } from '../api/secret.js';
import type { ServiceRef } from '../api/usergroup.js';
import type { UserGroupService } from '../api/usergroupservice.js';
import type { CallContext } from '../service/call-gates.js';
import type { CircuitBreakerOptions } from '../service/circuit-breaker.js';
import type { ServiceClientOptions } from '../service/client.js';
import { checkEgress, type EgressPolicy } from '../service/egress-policy.js';
import { EndpointPool, type Endpoint } from '../service/endpoint-pool.js';
import { validateServiceUrl } from '../service/endpoint-url.js';
import { SecretValue } from '../service/secret-value.js';
import type { CallResult, Deferral, UpsertRequest } from '../service/types.js';
import type { ObjectCache } from '../kube/cache.js';
import { Reason } from './policies/conditions.js';
import { sha256Hex } from './hash.js';
import { jittered, THROTTLED_SPREAD_MS } from './retry-policy.js';
import { boundNamespace } from './policies/id-binding.js';
import { admit } from './policies/tenancy.js';
import { adoptionIn } from './policies/adoption.js';
import { recordSeal, type Seal } from './policies/token-secret.js';

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
  /** MAC of a token record under a key derived from this account's API key (policies/token-secret.ts recordSeal). */
  readonly seal: Seal;
  upsert(request: UpsertRequest, context: CallContext): Promise<CallResult>;
  rotate(token: SecretValue, context: CallContext): Promise<CallResult>;
  /** A deferral when no call could go out now (the connection is paused or trying one call at a time). */
  unavailable(context: CallContext): Deferral | undefined;
  /** Forget the API key read from `apiKeySecret` (after a 401): the next resolve reads it again. */
  invalidate(): void;
  /**
   * The one namespace the cluster admins' rules bind this id to, if any (policies/id-binding.ts): the rules of every
   * ClusterUserGroupService, as cached, whichever this connection is.
   */
  boundNamespace(userGroupId: string): string | undefined;
}

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
  /** When 429s are reported instead of waited out (default service/call-gates.ts PERSISTENT_RATE_LIMIT). */
  readonly persistentRateLimit?: { readonly ms: number; readonly answers: number };
}

/** The Secret type that lets a Secret serve as a UserGroupService's API key (see docs/tenancy.md). */
export const API_KEY_SECRET_TYPE = 'usergroup.dev/api-key';

/** How long an API-key Secret read is reused (a 401 drops it sooner). */
const API_KEY_SECRET_TTL_MS = 30_000;
/** How often expired API-key reads are dropped from the cache. */
const API_KEY_PRUNE_EVERY_MS = 60_000;

/**
 * Resolves a UserGroup's connection: a shared ClusterUserGroupService (named in spec.serviceRef, or the
 * operator's default) whose tenant rules must admit the UserGroup's namespace and userGroupId, or a
 * UserGroupService in the UserGroup's own namespace whose API key comes from a Secret in that same namespace.
 * Clients and call gates are the endpoint's (service/endpoint-pool.ts), shared per URL and key.
 */
export class Connections {
  private readonly endpoints: EndpointPool;
  private readonly apiKeys = new Map<string, { readonly secret: ObservedSecret | undefined; readonly at: number }>();
  /** API-key Secrets being read now: the workers that need one at the same moment (a start) share one GET. */
  private readonly apiKeyReads = new Map<string, Promise<ObservedSecret | undefined>>();
  private lastApiKeyPrune = performance.now();
  /** What an endpoint's API key derives (account, seal), made once per endpoint: every resolve would hash again. */
  private readonly derived = new WeakMap<Endpoint, Pick<Connection, 'account' | 'seal'>>();

  constructor(private readonly options: ConnectionsOptions) {
    this.endpoints = new EndpointPool({
      clientOptions: options.clientOptions,
      gates: {
        qps: options.qps,
        burst: options.burst,
        breaker: options.breaker,
        beforeCall: options.beforeCall,
        persistentRateLimit: options.persistentRateLimit,
        spreadThrottled: (afterMs) => jittered(afterMs, THROTTLED_SPREAD_MS),
      },
    });
  }

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
    this.pruneApiKeys();
    const endpoint = this.endpoints.endpoint(checked.url, apiKey);
    const { id, client, gates } = endpoint;
    const { description } = about;
    return {
      ok: true,
      connection: {
        id,
        ...about,
        ...this.derivedFrom(endpoint, apiKey),
        upsert: (request, context) => gates.call(description, context, (signal) => client.upsert(request, { signal })),
        unavailable: (context) => gates.unavailable(description, context),
        rotate: (token, context) => gates.call(description, context, (signal) => client.rotate(token, { signal })),
        invalidate: () => this.forgetSecret(about.apiKeySecret),
        boundNamespace: (userGroupId) => boundNamespace(userGroupId, this.options.clusterServices.list()),
      },
    };
  }

  private derivedFrom(endpoint: Endpoint, apiKey: SecretValue): Pick<Connection, 'account' | 'seal'> {
    let derived = this.derived.get(endpoint);
    if (!derived) {
      derived = { account: sha256Hex(`usergroup-operator account\n${apiKey.reveal()}`).slice(0, 32), seal: recordSeal(apiKey) };
      this.derived.set(endpoint, derived);
    }
    return derived;
  }

  /** Drops expired API-key reads, at most once a minute, so a Secret nothing names does not stay cached. */
  private pruneApiKeys(): void {
    const now = performance.now();
    if (now - this.lastApiKeyPrune < API_KEY_PRUNE_EVERY_MS) return;
    this.lastApiKeyPrune = now;
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
