import type { V1Secret } from '@kubernetes/client-node';
import { FIELD_MANAGER } from '../api/constants.js';
import { parseSecret, type ObservedSecret } from '../api/secret.js';
import { KubeApiError, type KubeClient } from './http.js';
import { paths } from './paths.js';

export type SecretWriteResult =
  | { readonly ok: true; readonly secret: ObservedSecret }
  /**
   * Someone else wrote first: 'exists' — a create found a Secret of that name that no cache knew of;
   * 'changed' — a replace found a newer version. Either way: re-read and decide again.
   */
  | { readonly ok: false; readonly conflict: 'exists' | 'changed'; readonly message: string };

/** Creates or replaces token Secrets, with optimistic concurrency on replace. */
export class SecretWriter {
  constructor(private readonly client: KubeClient) {}

  async get(namespace: string, name: string): Promise<ObservedSecret | undefined> {
    const res = await this.client.request('GET', paths.secret(namespace, name));
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new KubeApiError('GET', paths.secret(namespace, name), res.status, 'Unknown', 'reading a Secret failed');
    return parsed(res.body);
  }

  /** Deletes a Secret only if it is still the object with this uid (never a newer one of the same name). */
  async delete(namespace: string, name: string, uid: string): Promise<void> {
    const res = await this.client.request('DELETE', paths.secret(namespace, name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } } });
    if (res.status !== 200 && res.status !== 202 && res.status !== 404 && res.status !== 409) {
      throw new KubeApiError('DELETE', paths.secret(namespace, name), res.status, 'Unknown', 'deleting a Secret failed');
    }
  }

  /** Creates the Secret when `resourceVersion` is undefined, else replaces that exact version. */
  async write(desired: V1Secret, resourceVersion: string | undefined): Promise<SecretWriteResult> {
    const namespace = desired.metadata?.namespace ?? '';
    const name = desired.metadata?.name ?? '';
    const query = { fieldManager: FIELD_MANAGER };
    const res =
      resourceVersion === undefined
        ? await this.client.request('POST', paths.secrets(namespace), { query, body: desired })
        : await this.client.request('PUT', paths.secret(namespace, name), {
            query,
            body: { ...desired, metadata: { ...desired.metadata, resourceVersion } },
          });
    if (res.status === 409) {
      return resourceVersion === undefined
        ? { ok: false, conflict: 'exists', message: `Secret ${namespace}/${name} already exists` }
        : { ok: false, conflict: 'changed', message: `Secret ${namespace}/${name} changed underneath us` };
    }
    if (res.status < 200 || res.status >= 300) {
      // Never include the request body: it holds the token.
      const err = res.body as { reason?: unknown; message?: unknown } | undefined;
      throw new KubeApiError(resourceVersion === undefined ? 'POST' : 'PUT', paths.secret(namespace, name), res.status,
        typeof err?.reason === 'string' ? err.reason : 'Unknown', typeof err?.message === 'string' ? err.message : 'writing a Secret failed');
    }
    return { ok: true, secret: parsed(res.body) };
  }
}

function parsed(body: unknown): ObservedSecret {
  const secret = parseSecret(body);
  if (!secret.ok) throw new Error(`the apiserver returned a Secret that cannot be parsed: ${secret.error}`);
  return secret.value;
}
