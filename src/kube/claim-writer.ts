import { claimObject, parseClaim, type ClaimSpec, type UserGroupClaim } from '../api/claim.js';
import { FIELD_MANAGER } from '../api/constants.js';
import { KubeApiError, type KubeClient } from './http.js';
import { paths } from './paths.js';

/** Someone else wrote the claim first (a create found it, or a replace found a newer version): read it and decide again. */
export type ClaimWriteResult = { readonly ok: true; readonly claim: UserGroupClaim } | { readonly ok: false };

/** Creates, takes over and releases UserGroupClaims, with optimistic concurrency. */
export class ClaimWriter {
  constructor(private readonly client: KubeClient) {}

  async get(name: string): Promise<UserGroupClaim | undefined> {
    const res = await this.client.request('GET', paths.claim(name));
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw failure('GET', paths.claim(name), res.status, res.body, 'reading a UserGroupClaim failed');
    return parsed(res.body);
  }

  async create(spec: ClaimSpec): Promise<ClaimWriteResult> {
    const res = await this.client.request('POST', paths.claims(), { query: { fieldManager: FIELD_MANAGER }, body: claimObject(spec) });
    if (res.status === 409) return { ok: false };
    if (res.status < 200 || res.status >= 300) throw failure('POST', paths.claims(), res.status, res.body, 'creating a UserGroupClaim failed');
    return { ok: true, claim: parsed(res.body) };
  }

  /** Replaces exactly the version that was read: of two UserGroups taking over one claim, one wins. */
  async replace(current: UserGroupClaim, spec: ClaimSpec): Promise<ClaimWriteResult> {
    const body = claimObject(spec);
    const path = paths.claim(current.metadata.name);
    const res = await this.client.request('PUT', path, {
      query: { fieldManager: FIELD_MANAGER },
      body: { ...body, metadata: { ...(body['metadata'] as object), resourceVersion: current.metadata.resourceVersion } },
    });
    if (res.status === 409 || res.status === 404) return { ok: false };
    if (res.status < 200 || res.status >= 300) throw failure('PUT', path, res.status, res.body, 'taking over a UserGroupClaim failed');
    return { ok: true, claim: parsed(res.body) };
  }

  /** Releases a claim only if it is still that object (never one made since). */
  async delete(claim: UserGroupClaim): Promise<void> {
    const path = paths.claim(claim.metadata.name);
    const res = await this.client.request('DELETE', path, { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: claim.metadata.uid } } });
    if (res.status !== 200 && res.status !== 202 && res.status !== 404 && res.status !== 409) {
      throw failure('DELETE', path, res.status, res.body, 'releasing a UserGroupClaim failed');
    }
  }
}

function failure(method: string, path: string, status: number, body: unknown, fallback: string): KubeApiError {
  const err = body as { reason?: unknown; message?: unknown } | undefined;
  return new KubeApiError(method, path, status, typeof err?.reason === 'string' ? err.reason : 'Unknown', typeof err?.message === 'string' ? err.message : fallback);
}

function parsed(body: unknown): UserGroupClaim {
  const claim = parseClaim(body);
  if (!claim.ok) throw new Error(`the apiserver returned a UserGroupClaim that cannot be parsed: ${claim.error}`);
  return claim.value;
}
