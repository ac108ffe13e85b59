import type { Logger } from 'pino';
import { objectKey } from '../api/meta.js';
import { secretValue, type ObservedSecret } from '../api/secret.js';
import type { UserGroupService } from '../api/usergroupservice.js';
import { ServiceClient, type ServiceClientOptions } from '../service/client.js';
import { validateServiceUrl } from '../service/connection.js';
import { SecretValue } from '../service/secret-value.js';
import { TokenBucket } from '../service/token-bucket.js';
import type { ServiceResult, UpsertRequest } from '../service/types.js';
import type { ObjectCache } from '../kube/cache.js';
import { Reason } from './conditions.js';
import { sha256Hex } from './hash.js';

export interface DefaultConnection {
  readonly url: string;
  readonly apiKey: SecretValue;
  readonly allowInsecure: boolean;
}

/** A resolved way to reach the service: one account (URL + API key), rate-limited as a whole. */
export interface Connection {
  /** Same URL and API key → same id, whichever object declared it. Not reversible to the key. */
  readonly id: string;
  /** For messages: "the default connection" or "UserGroupService ns/name". */
  readonly description: string;
  upsert(request: UpsertRequest, signal?: AbortSignal): Promise<ServiceResult>;
  rotate(token: SecretValue, signal?: AbortSignal): Promise<ServiceResult>;
}

export type Resolution =
  | { readonly ok: true; readonly connection: Connection }
  | { readonly ok: false; readonly reason: typeof Reason.ConnectionNotFound | typeof Reason.ConnectionInvalid; readonly message: string };

export interface ConnectionsOptions {
  readonly defaultConnection: DefaultConnection | undefined;
  readonly services: ObjectCache<UserGroupService>;
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
}

/**
 * Resolves a UserGroup's connection: the operator-wide default, or a
 * UserGroupService in the UserGroup's own namespace whose API key comes from a
 * Secret in that same namespace. Clients and token buckets are shared per account.
 */
export class Connections {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly apiKeys = new Map<string, { readonly secret: ObservedSecret | undefined; readonly at: number }>();

  constructor(private readonly options: ConnectionsOptions) {}

  async resolve(namespace: string, ref: { readonly name: string } | undefined): Promise<Resolution> {
    if (!ref) {
      const def = this.options.defaultConnection;
      if (!def) {
        return { ok: false, reason: Reason.ConnectionNotFound, message: 'spec.serviceRef is not set and the operator has no default connection (--service-url and an API key)' };
      }
      return this.connect(def.url, def.apiKey, def.allowInsecure, 'the default connection');
    }
    const key = objectKey({ namespace, name: ref.name });
    const service = this.options.services.get(key);
    if (!service) return { ok: false, reason: Reason.ConnectionNotFound, message: `UserGroupService ${key} does not exist (a UserGroup can only use one in its own namespace)` };
    if (!service.spec.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `UserGroupService ${key}: ${service.spec.error}` };
    const { apiKeySecretRef } = service.spec.value;
    const secret = await this.readApiKeySecret(namespace, apiKeySecretRef.name);
    const apiKey = secret && secretValue(secret, apiKeySecretRef.key)?.trim();
    if (!apiKey) {
      return {
        ok: false,
        reason: Reason.ConnectionNotFound,
        message: `UserGroupService ${key}: Secret ${namespace}/${apiKeySecretRef.name} ${secret ? `has no key "${apiKeySecretRef.key}"` : 'does not exist'}`,
      };
    }
    return this.connect(service.spec.value.url, new SecretValue(apiKey), service.spec.value.allowInsecure, `UserGroupService ${key}`);
  }

  /** Forget cached API keys, e.g. after a 401 or when a UserGroupService changes. */
  invalidate(namespace?: string): void {
    if (namespace === undefined) this.apiKeys.clear();
    else for (const key of [...this.apiKeys.keys()]) if (key.startsWith(`${namespace}/`)) this.apiKeys.delete(key);
  }

  private connect(rawUrl: string, apiKey: SecretValue, allowInsecure: boolean, description: string): Resolution {
    const checked = validateServiceUrl(rawUrl, allowInsecure);
    if (!checked.ok) return { ok: false, reason: Reason.ConnectionInvalid, message: `${description}: ${checked.message}` };
    const id = sha256Hex(`${checked.url}\n${apiKey.reveal()}`).slice(0, 32);
    let endpoint = this.endpoints.get(id);
    if (!endpoint) {
      endpoint = {
        client: new ServiceClient({ url: checked.url, apiKey }, this.options.clientOptions),
        bucket: new TokenBucket(this.options.qps, this.options.burst),
      };
      this.endpoints.set(id, endpoint);
    }
    const { client, bucket } = endpoint;
    return {
      ok: true,
      connection: {
        id,
        description,
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
