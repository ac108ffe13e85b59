// Writes UserGroupClaims at the apiserver: create, take over (resourceVersion) and release (uid precondition).
import { claimObject, parseClaim, type ClaimSpec, type UserGroupClaim } from '../api/claim.js';
import { FIELD_MANAGER } from '../api/constants.js';
import { isAlreadyExists, isConflict, isNotFound } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

/** Someone else wrote the claim first (a create found it, or a replace found a newer version): read it and decide again. */
export type ClaimWriteResult = { readonly ok: true; readonly claim: UserGroupClaim } | { readonly ok: false };

/** Creates, takes over and releases UserGroupClaims, with optimistic concurrency. */
export class ClaimWriter {
  constructor(private readonly client: KubeClient) {}

  async get(name: string): Promise<UserGroupClaim | undefined> {
    const res = await call(this.client, 'GET', paths.claim(name));
    if (res.ok) return parsed(res.body);
    if (isNotFound(res.error)) return undefined;
    throw res.error;
  }

  async create(spec: ClaimSpec): Promise<ClaimWriteResult> {
    const res = await call(this.client, 'POST', paths.claims(), { query: { fieldManager: FIELD_MANAGER }, body: claimObject(spec) });
    if (res.ok) return { ok: true, claim: parsed(res.body) };
    // A 409 of either reason: another UserGroup created it first.
    if (isAlreadyExists(res.error) || isConflict(res.error)) return { ok: false };
    throw res.error;
  }

  /** Replaces exactly the version that was read: of two UserGroups taking over one claim, one wins. */
  async replace(current: UserGroupClaim, spec: ClaimSpec): Promise<ClaimWriteResult> {
    const body = claimObject(spec);
    const res = await call(this.client, 'PUT', paths.claim(current.metadata.name), {
      query: { fieldManager: FIELD_MANAGER },
      body: { ...body, metadata: { ...(body['metadata'] as object), resourceVersion: current.metadata.resourceVersion } },
    });
    if (res.ok) return { ok: true, claim: parsed(res.body) };
    // Changed or released since it was read: read again and decide.
    if (isConflict(res.error) || isNotFound(res.error)) return { ok: false };
    throw res.error;
  }

  /** Releases a claim only if it is still that object (never one made since). */
  async delete(claim: UserGroupClaim): Promise<void> {
    const res = await call(this.client, 'DELETE', paths.claim(claim.metadata.name), {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: claim.metadata.uid } },
    });
    // Gone already, or a newer claim of that name (the uid precondition failed): not ours to release.
    if (!res.ok && !isNotFound(res.error) && !isConflict(res.error)) throw res.error;
  }
}

function parsed(body: unknown): UserGroupClaim {
  const claim = parseClaim(body);
  if (!claim.ok) throw new Error(`the apiserver returned a UserGroupClaim that cannot be parsed: ${claim.error}`);
  return claim.value;
}
