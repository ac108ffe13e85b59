import type { V1Secret } from '@kubernetes/client-node';
import { FIELD_MANAGER } from '../api/constants.js';
import { parseSecret, type ObservedSecret } from '../api/secret.js';
import { isAlreadyExists, isConflict, isNotFound } from './api-error.js';
import { call, type KubeClient } from './http.js';
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
    const res = await call(this.client, 'GET', paths.secret(namespace, name));
    if (res.ok) return parsed(res.body);
    if (isNotFound(res.error)) return undefined;
    throw res.error;
  }

  /** Deletes a Secret only if it is still the object with this uid (never a newer one of the same name). */
  async delete(namespace: string, name: string, uid: string): Promise<void> {
    const res = await call(this.client, 'DELETE', paths.secret(namespace, name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } } });
    // Gone already, or a newer object of that name (the uid precondition failed): either way not ours to delete.
    if (!res.ok && !isNotFound(res.error) && !isConflict(res.error)) throw res.error;
  }

  /** Creates the Secret when `resourceVersion` is undefined, else replaces that exact version. */
  async write(desired: V1Secret, resourceVersion: string | undefined): Promise<SecretWriteResult> {
    const namespace = desired.metadata?.namespace ?? '';
    const name = desired.metadata?.name ?? '';
    const query = { fieldManager: FIELD_MANAGER };
    // The error of a refused write holds the apiserver's Status only, never this request's body: it holds the token.
    const res =
      resourceVersion === undefined
        ? await call(this.client, 'POST', paths.secrets(namespace), { query, body: desired })
        : await call(this.client, 'PUT', paths.secret(namespace, name), {
            query,
            // client-node's V1Secret is a plain data class: the spread copy is what goes on the wire.
            // eslint-disable-next-line @typescript-eslint/no-misused-spread
            body: { ...desired, metadata: { ...desired.metadata, resourceVersion } },
          });
    if (res.ok) return { ok: true, secret: parsed(res.body) };
    // A 409 of either reason means someone wrote first (AlreadyExists answers a create, Conflict a replace).
    if (!isAlreadyExists(res.error) && !isConflict(res.error)) throw res.error;
    return resourceVersion === undefined
      ? { ok: false, conflict: 'exists', message: `Secret ${namespace}/${name} already exists` }
      : { ok: false, conflict: 'changed', message: `Secret ${namespace}/${name} changed underneath us` };
  }
}

function parsed(body: unknown): ObservedSecret {
  const secret = parseSecret(body);
  if (!secret.ok) throw new Error(`the apiserver returned a Secret that cannot be parsed: ${secret.error}`);
  return secret.value;
}
