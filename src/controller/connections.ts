import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { Adoption, ClusterUserGroupService } from '../api/clusterusergroupservice.js';
import { objectKey } from '../api/meta.js';
import { secretValue, type ObservedSecret } from '../api/secret.js';
import type { ServiceRef } from '../api/usergroup.js';
import type { UserGroupService } from '../api/usergroupservice.js';
import { ServiceClient, type ServiceClientOptions } from '../service/client.js';
import { validateServiceUrl } from '../service/connection.js';
import { SecretValue } from '../service/secret-value.js';
import { TokenBucket } from '../service/token-bucket.js';
import type { ServiceResult, UpsertRequest } from '../service/types.js';
import type { ObjectCache } from '../kube/cache.js';
import { Reason } from './conditions.js';
import { sha256Hex } from './hash.js';
import { admit } from './tenancy.js';

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
  /** The Secret the API key came from, "namespace/name" (to forget it after a 401). */
  readonly apiKeySecret: string;
  /** MAC of a token record under a key derived from this account's API key (see token-secret.ts). */
  seal(message: string): string;
  upsert(request: UpsertRequest, signal?: AbortSignal): Promise<ServiceResult>;
  rotate(token: SecretValue, signal?: AbortSignal): Promise<ServiceResult>;
}

export type ResolutionFailureReason =
  | typeof Reason.ConnectionNotFound
  | typeof Reason.ConnectionInvalid
  | typeof Reason.NamespaceNotAllowed
  | typeof Reason.UserGroupIdNotAllowed;

export type Resolution =
  | { readonly ok: true; readonly connection: Connection }
  | { readonly ok: false; readonly reason: ResolutionFailureReason; readonly message: string };

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
  /** How long an API-key Secret read is reused (a 401 drops it sooner). */
  readonly secretTtlMs?: number;
}

interface Endpoint {
  readonly client: ServiceClient;
  readonly bucket: TokenBucket;
  readonly account: string;
  readonly recordKey: Buffer;
}

/**
 * Resolves a UserGroup's connection: a shared ClusterUserGroupService (named in spec.serviceRef, or the
 * operator's default) whose tenant rules must admit the UserGroup's namespace and userGroupId, or a
 * UserGroupService in the UserGroup's own namespace whose API key comes from a Secret in that same namespace.
 * Clients and token buckets are shared per URL and key.
 */
export class Connections {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly apiKeys = new Map<string, { readonly secret: ObservedSecret | undefined; readonly at: number }>();

  constructor(private readonly options: ConnectionsOptions) {}

  async resolve(namespace: string, ref: ServiceRef | undefined, userGroupId: string): Promise<Resolution> {
    if (!ref) {
      const name = this.options.defaultService;
      if (name === undefined) {
        return { ok: false, reason: Reason.ConnectionNotFound, message: 'spec.serviceRef is not set and the operator has no default ClusterUserGroupService (--default-service)' };
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
    return this.connect(spec.url, apiKey.value, spec.allowInsecure, { description, shared: true, adoption: admission.adoption, apiKeySecret: `${secretNamespace}/${secretName}` });
  }

  private async resolveOwn(namespace: string, name: string): Promise<Resolution> {
    const key = objectKey({ namespace, name });
    const description = `UserGroupService ${key}`;
    const service = this.options.services.get(key);
    if (!service) return { ok: false, reason: Reason.ConnectionNotFound, message: `${description} does not exist (a UserGroup can only use one in its own namespace)` };
    if (!service.spec.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${description}: ${service.spec.error}` };
    const { apiKeySecretRef, url, allowInsecure } = service.spec.value;
    const apiKey = await this.apiKey(namespace, apiKeySecretRef.name, apiKeySecretRef.key, description);
    if (!apiKey.ok) return apiKey;
    // The namespace's own account: the groups in it are its own, so no tenant rule applies and adopting one is fine.
    return this.connect(url, apiKey.value, allowInsecure, { description, shared: false, adoption: 'Keep', apiKeySecret: `${namespace}/${apiKeySecretRef.name}` });
  }

  private async apiKey(namespace: string, name: string, key: string, description: string): Promise<{ ok: true; value: SecretValue } | { ok: false; reason: typeof Reason.ConnectionNotFound; message: string }> {
    const secret = await this.readApiKeySecret(namespace, name);
    const value = secret && secretValue(secret, key)?.trim();
    if (value) return { ok: true, value: new SecretValue(value) };
    return {
      ok: false,
      reason: Reason.ConnectionNotFound,
      message: `${description}: Secret ${namespace}/${name} ${secret ? `has no key "${key}"` : 'does not exist'}`,
    };
  }

  private connect(rawUrl: string, apiKey: SecretValue, allowInsecure: boolean, about: Pick<Connection, 'description' | 'shared' | 'adoption' | 'apiKeySecret'>): Resolution {
    const checked = validateServiceUrl(rawUrl, allowInsecure);
    if (!checked.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${about.description}: ${checked.message}` };
    const id = sha256Hex(`${checked.url}\n${apiKey.reveal()}`).slice(0, 32);
    let endpoint = this.endpoints.get(id);
    if (!endpoint) {
      endpoint = {
        client: new ServiceClient({ url: checked.url, apiKey }, this.options.clientOptions),
        bucket: new TokenBucket(this.options.qps, this.options.burst),
        account: sha256Hex(`usergroup-operator account\n${apiKey.reveal()}`).slice(0, 32),
        recordKey: createHmac('sha256', apiKey.reveal()).update('usergroup-operator token record v1').digest(),
      };
      this.endpoints.set(id, endpoint);
    }
    const { client, bucket, account, recordKey } = endpoint;
    return {
      ok: true,
      connection: {
        id,
        account,
        ...about,
        seal: (message) => createHmac('sha256', recordKey).update(message).digest('hex'),
        // A stopped worker (shutdown, lost leadership) must not start a call it was waiting to make.
        upsert: async (request, signal) => {
          await bucket.take(signal);
          signal?.throwIfAborted();
          return client.upsert(request);
        },
        rotate: async (token, signal) => {
          await bucket.take(signal);
          signal?.throwIfAborted();
          return client.rotate(token);
        },
      },
    };
  }

  private async readApiKeySecret(namespace: string, name: string): Promise<ObservedSecret | undefined> {
    const key = `${namespace}/${name}`;
    const cached = this.apiKeys.get(key);
    const ttl = this.options.secretTtlMs ?? 30_000;
    if (cached && Date.now() - cached.at < ttl) return cached.secret;
    const secret = await this.options.readSecret(namespace, name);
    this.apiKeys.set(key, { secret, at: Date.now() });
    return secret;
  }
}
