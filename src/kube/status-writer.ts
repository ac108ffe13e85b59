// Writes UserGroup status, through the status subresource only.
import { FIELD_MANAGER } from '../api/constants.js';
import { parseUserGroup, type UserGroup, type UserGroupStatus } from '../api/usergroup.js';
import { isNotFound } from './api-error.js';
import type { LocalCache } from './cache.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

export interface StatusWriterOptions {
  /** Runs before every write; throws when this replica does not hold its Lease (by the clock). */
  readonly fence?: () => void;
  /** The UserGroup cache: the UserGroup as written goes in before patch() returns (the next reconcile must not write it again). */
  readonly cache?: LocalCache<UserGroup>;
  /** A status write's answer, newer than the cache may be: the controller decides whether it calls for a reconcile. */
  readonly written?: (before: UserGroup, after: UserGroup) => void;
}

/**
 * Writes UserGroup status through the status subresource only: the controller
 * never writes spec or metadata, so GitOps tools see no diff. A merge patch with
 * the whole status; fields to clear are sent as null.
 */
export class StatusWriter {
  constructor(
    private readonly client: KubeClient,
    private readonly options: StatusWriterOptions = {},
  ) {}

  /** The UserGroup as written; undefined when it is gone (or its answer cannot be parsed). */
  async patch(ug: UserGroup, status: UserGroupStatus, clear: readonly (keyof UserGroupStatus)[] = []): Promise<UserGroup | undefined> {
    this.options.fence?.();
    const body: Record<string, unknown> = { ...status };
    for (const field of clear) if (!(field in status)) body[field] = null;
    const res = await call(this.client, 'PATCH', paths.userGroupStatus(ug.metadata.namespace, ug.metadata.name), {
      query: { fieldManager: FIELD_MANAGER },
      body: { status: body },
      contentType: 'application/merge-patch+json',
    });
    if (!res.ok) {
      if (isNotFound(res.error)) return undefined;
      throw res.error;
    }
    const parsed = parseUserGroup(res.body);
    if (!parsed.ok) return undefined;
    this.options.cache?.upsertLocal(parsed.value);
    this.options.written?.(ug, parsed.value);
    return parsed.value;
  }
}
