// Writes UserGroup status, through the status subresource only.
import { FIELD_MANAGER } from '../api/constants.js';
import { parseUserGroup, type UserGroup, type UserGroupStatus } from '../api/usergroup.js';
import { isNotFound } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

/**
 * Writes UserGroup status through the status subresource only: the controller
 * never writes spec or metadata, so GitOps tools see no diff. A merge patch with
 * the whole status; fields to clear are sent as null.
 */
export class StatusWriter {
  constructor(private readonly client: KubeClient) {}

  async patch(namespace: string, name: string, status: UserGroupStatus, clear: readonly (keyof UserGroupStatus)[] = []): Promise<UserGroup | undefined> {
    const body: Record<string, unknown> = { ...status };
    for (const field of clear) if (!(field in status)) body[field] = null;
    const res = await call(this.client, 'PATCH', paths.userGroupStatus(namespace, name), {
      query: { fieldManager: FIELD_MANAGER },
      body: { status: body },
      contentType: 'application/merge-patch+json',
    });
    if (!res.ok) {
      if (isNotFound(res.error)) return undefined;
      throw res.error;
    }
    const parsed = parseUserGroup(res.body);
    return parsed.ok ? parsed.value : undefined;
  }
}
