// Adds or removes one finalizer on an object with a resourceVersion-checked merge patch.
import { FIELD_MANAGER } from '../api/constants.js';
import { isRecord } from '../platform/json-value.js';
import { isConflict, isNotFound } from './api-error.js';
import { call, type KubeClient } from './http.js';

/** What set() did: the list already was as asked (no write), was patched, or the object (that uid) is gone. */
export type FinalizerWriteResult =
  | { readonly kind: 'unchanged'; readonly metadata: unknown }
  /** `before`: the resourceVersion the patch was made on. */
  | { readonly kind: 'patched'; readonly metadata: unknown; readonly before: unknown }
  | { readonly kind: 'gone' }
  | { readonly kind: 'conflict' };

const PARTIAL_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/**
 * Adds or removes one finalizer on an object, leaving everyone else's alone. The cache keeps only the operator's
 * own finalizers, so the list is read first (metadata only: a Secret's data never comes back) and written with a
 * merge patch that names the resourceVersion read: a change in between is a conflict, decided again by the caller.
 * A merge patch (not a replace) records only metadata.finalizers as the operator's field: GitOps tools' own fields
 * stay theirs.
 */
export class FinalizerWriter {
  constructor(private readonly client: KubeClient) {}

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
  async set(path: string, uid: string, finalizer: string, present: boolean): Promise<FinalizerWriteResult> {
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
