// Writes UserGroupClaims at the apiserver: create, take over (resourceVersion) and release (uid precondition).
import { claimName, claimObject, parseClaim, type ClaimSpec, type UserGroupClaim } from '../api/claim.js';
import { FIELD_MANAGER } from '../api/constants.js';
import { isAlreadyExists, isConflict, isNotFound } from './api-error.js';
import type { LocalCache } from './cache.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

/**
 * What write() came to: the claim as written, or someone else wrote it first (a create found it, or a replace found
 * a newer version, or it is gone meanwhile): then `claim` is the one stored, read again (undefined: none), to
 * decide again on.
 */
export type ClaimWriteResult = { readonly ok: true; readonly claim: UserGroupClaim } | { readonly ok: false; readonly claim: UserGroupClaim | undefined };

export interface ClaimWriterOptions {
  /** Runs before every write; throws when this replica does not hold its Lease (by the clock). */
  readonly fence?: () => void;
  /**
   * The claim cache: every claim this writer writes or reads goes in before it returns (the next reconcile must not
   * create it again; a shard's cache may not hold another namespace's claim, and must hear when it is released).
   */
  readonly cache?: LocalCache<UserGroupClaim>;
}

/** Creates, takes over and releases UserGroupClaims, with optimistic concurrency. */
export class ClaimWriter {
  constructor(
    private readonly client: KubeClient,
    private readonly options: ClaimWriterOptions = {},
  ) {}

  async get(name: string): Promise<UserGroupClaim | undefined> {
    const res = await call(this.client, 'GET', paths.claim(name));
    if (!res.ok && isNotFound(res.error)) return undefined;
    if (!res.ok) throw res.error;
    const claim = parsed(res.body);
    this.options.cache?.upsertLocal(claim);
    return claim;
  }

  /**
   * Creates the claim `spec` describes when there is none (`current` undefined), else replaces exactly the version
   * `current` is: of two UserGroups taking one claim, one wins. The loser is handed what won, read again.
   */
  async write(current: UserGroupClaim | undefined, spec: ClaimSpec): Promise<ClaimWriteResult> {
    this.options.fence?.();
    const written = current ? await this.replace(current, spec) : await this.create(spec);
    if (written) {
      this.options.cache?.upsertLocal(written);
      return { ok: true, claim: written };
    }
    return { ok: false, claim: await this.get(claimName(spec.account, spec.userGroupId)) };
  }

  /** Releases a claim only if it is still that object (never one made since). */
  async release(claim: UserGroupClaim): Promise<void> {
    this.options.fence?.();
    const res = await call(this.client, 'DELETE', paths.claim(claim.metadata.name), {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: claim.metadata.uid } },
    });
    // Gone already, or a newer claim of that name (the uid precondition failed): not ours to release.
    if (!res.ok && !isNotFound(res.error) && !isConflict(res.error)) throw res.error;
  }

  /** The claim created, or undefined when another UserGroup created it first. */
  private async create(spec: ClaimSpec): Promise<UserGroupClaim | undefined> {
    const res = await call(this.client, 'POST', paths.claims(), { query: { fieldManager: FIELD_MANAGER }, body: claimObject(spec) });
    if (res.ok) return parsed(res.body);
    // A 409 of either reason: another UserGroup created it first.
    if (isAlreadyExists(res.error) || isConflict(res.error)) return undefined;
    throw res.error;
  }

  /** The claim as replaced, or undefined when it changed or went after the read. */
  private async replace(current: UserGroupClaim, spec: ClaimSpec): Promise<UserGroupClaim | undefined> {
    const body = claimObject(spec);
    const res = await call(this.client, 'PUT', paths.claim(current.metadata.name), {
      query: { fieldManager: FIELD_MANAGER },
      body: { ...body, metadata: { ...(body['metadata'] as object), resourceVersion: current.metadata.resourceVersion } },
    });
    if (res.ok) return parsed(res.body);
    // Changed or released since it was read: read again and decide.
    if (isConflict(res.error) || isNotFound(res.error)) return undefined;
    throw res.error;
  }
}

function parsed(body: unknown): UserGroupClaim {
  const claim = parseClaim(body);
  if (!claim.ok) throw new Error(`the apiserver returned a UserGroupClaim that cannot be parsed: ${claim.error}`);
  return claim.value;
}
