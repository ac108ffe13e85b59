// Adds or removes one finalizer on an object with a resourceVersion-checked merge patch.
import { FIELD_MANAGER, ROTATE_ON_DELETE_FINALIZER } from '../api/constants.js';
import { objectKey, parseMeta, withFinalizers } from '../api/meta.js';
import { parseTokenSecretMeta, type ObservedSecret } from '../api/secret.js';
import type { UserGroup } from '../api/usergroup.js';
import { isRecord } from '../platform/json-value.js';
import { isConflict, isNotFound } from './api-error.js';
import type { LocalCache, ObjectCache } from './cache.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

/** What set() did: the list already was as asked (no write), was patched, or the object (that uid) is gone. */
export type FinalizerWriteResult =
  | { readonly kind: 'unchanged'; readonly metadata: unknown }
  /** `before`: the resourceVersion the patch was made on. */
  | { readonly kind: 'patched'; readonly metadata: unknown; readonly before: unknown }
  | { readonly kind: 'gone' }
  | { readonly kind: 'conflict' };

const PARTIAL_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/** What carries the rotate-on-delete finalizer (spec.deletionPolicy Rotate): a UserGroup, or one of its token Secrets. */
export type FinalizerTarget = { readonly userGroup: UserGroup } | { readonly secret: Pick<ObservedSecret, 'metadata'> };

export interface FinalizerWriterOptions {
  /** Runs before every write (the read before it included); throws when this replica does not hold its Lease (by the clock). */
  readonly fence?: () => void;
  /** The UserGroup cache: a patch goes onto its copy (set). */
  readonly userGroups?: ObjectCache<UserGroup> & LocalCache<UserGroup>;
  /** The token-Secret cache, and the record of which versions' data this process knows (controller/verified-secrets.ts). */
  readonly secrets?: { readonly cache: LocalCache<ObservedSecret>; readonly record: VerifiedRecord };
}

/** The record of which token Secret versions' data this process wrote or checked. */
export interface VerifiedRecord {
  /** Only metadata changed from `from` to `to`: what is known of the data at `from` holds at `to`. */
  carry(key: string, from: string, to: string): void;
}

/**
 * Adds or removes one finalizer on an object, leaving everyone else's alone. The cache keeps only the operator's
 * own finalizers, so the list is read first (metadata only: a Secret's data never comes back) and written with a
 * merge patch that names the resourceVersion read: a change in between is a conflict, decided again by the caller.
 * A merge patch (not a replace) records only metadata.finalizers as the operator's field: GitOps tools' own fields
 * stay theirs.
 */
export class FinalizerWriter {
  constructor(
    private readonly client: KubeClient,
    private readonly options: FinalizerWriterOptions = {},
  ) {}

  /**
   * Adds or removes the rotate-on-delete finalizer; false when the object changed meanwhile (decide again), gone
   * counting as done. What it patched, the caches it is given know when it returns.
   */
  async set(on: FinalizerTarget, present: boolean): Promise<boolean> {
    if ('userGroup' in on) {
      const { metadata } = on.userGroup;
      const written = await this.setAt(paths.userGroup(metadata.namespace, metadata.name), metadata.uid, ROTATE_ON_DELETE_FINALIZER, present);
      if (written.kind === 'conflict') return false;
      if (written.kind === 'patched') this.patchedUserGroup(objectKey(metadata), written);
      return true;
    }
    const { namespace, name, uid, resourceVersion } = on.secret.metadata;
    const written = await this.setAt(paths.secret(namespace, name), uid, ROTATE_ON_DELETE_FINALIZER, present);
    if (written.kind === 'conflict') return false;
    if (written.kind === 'patched') this.patchedSecret(resourceVersion, written);
    return true;
  }

  /**
   * Known at once, as a status write is: the next reconcile must not write it again. The answer is metadata only,
   * so it goes onto the cached object, and only if that is the version the patch was made on: the reconcile's own
   * object predates its status write, and a stale status under a newer resourceVersion would hide the write from
   * the cache until the next event (the UserGroup then looks never synced: one more PUT). A cached object already
   * past it came from the watch and is right as it is.
   */
  private patchedUserGroup(key: string, written: Extract<FinalizerWriteResult, { kind: 'patched' }>): void {
    const cache = this.options.userGroups;
    const meta = parseMeta(written.metadata);
    const current = cache?.get(key);
    if (cache && meta.ok && current && current.metadata.resourceVersion === written.before) {
      cache.upsertLocal({ ...current, metadata: withFinalizers(current.metadata, meta.value.finalizers, meta.value.resourceVersion) });
    }
  }

  /** `resourceVersion`: the version the caller knew. Only metadata.finalizers changed: data known at the version before is still known. */
  private patchedSecret(resourceVersion: string, written: Extract<FinalizerWriteResult, { kind: 'patched' }>): void {
    const through = this.options.secrets;
    const cached = parseTokenSecretMeta({ metadata: written.metadata });
    if (!through || !cached) return;
    through.cache.upsertLocal(cached);
    if (written.before === resourceVersion) through.record.carry(objectKey(cached.metadata), resourceVersion, cached.metadata.resourceVersion);
  }

  /** Whether the object (metadata only) is being deleted; a missing one counts as deleted. */
  async deleting(path: string): Promise<boolean> {
    const read = await call(this.client, 'GET', path, { accept: PARTIAL_OBJECT });
    if (!read.ok) {
      if (isNotFound(read.error)) return true;
      throw read.error;
    }
    const metadata = isRecord(read.body) && isRecord(read.body['metadata']) ? read.body['metadata'] : {};
    return metadata['deletionTimestamp'] !== undefined;
  }

  /** `path` is the object's (paths.userGroup, paths.secret); `uid` the object meant: a newer one of the name is not touched. */
  async setAt(path: string, uid: string, finalizer: string, present: boolean): Promise<FinalizerWriteResult> {
    this.options.fence?.();
    // A namespace deletion or garbage collection writes the object while we do: read it again, a few times.
    for (let attempt = 1; ; attempt++) {
      const written = await this.setOnce(path, uid, finalizer, present);
      if (written.kind !== 'conflict' || attempt === 3) return written;
    }
  }

  private async setOnce(path: string, uid: string, finalizer: string, present: boolean): Promise<FinalizerWriteResult> {
    const read = await call(this.client, 'GET', path, { accept: PARTIAL_OBJECT });
    if (!read.ok) {
      if (isNotFound(read.error)) return { kind: 'gone' };
      throw read.error;
    }
    const metadata = isRecord(read.body) && isRecord(read.body['metadata']) ? read.body['metadata'] : {};
    if (metadata['uid'] !== uid) return { kind: 'gone' };
    const list = Array.isArray(metadata['finalizers']) ? metadata['finalizers'].filter((f): f is string => typeof f === 'string') : [];
    if (list.includes(finalizer) === present) return { kind: 'unchanged', metadata };
    // Nothing new may be added to an object being deleted (the apiserver refuses it); removing always may.
    if (present && metadata['deletionTimestamp'] !== undefined) return { kind: 'unchanged', metadata };
    const finalizers = present ? [...list, finalizer] : list.filter((f) => f !== finalizer);
    const res = await call(this.client, 'PATCH', path, {
      query: { fieldManager: FIELD_MANAGER },
      body: { metadata: { resourceVersion: metadata['resourceVersion'], finalizers } },
      contentType: 'application/merge-patch+json',
      accept: PARTIAL_OBJECT,
    });
    if (res.ok) return { kind: 'patched', metadata: isRecord(res.body) ? res.body['metadata'] : undefined, before: metadata['resourceVersion'] };
    if (isNotFound(res.error)) return { kind: 'gone' };
    if (isConflict(res.error)) return { kind: 'conflict' };
    throw res.error;
  }
}
