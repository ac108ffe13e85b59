import type { JsonObject } from './json.js';
import type { GroupRecord } from './store.js';
import type { EnvironmentTag } from './teams.js';

/**
 * The user_group of a PUT /api/user answer. The spec leaves two field names open; these
 * are the ones of the public API the spec describes.
 */
export interface UpsertedGroup {
  readonly team_id: number;
  readonly token?: string;
  readonly name: string;
  readonly provided_id: string;
  readonly properties?: JsonObject;
  readonly new_user_group: boolean;
  readonly api_environment_tag: EnvironmentTag;
}

/** The user_group of a POST /api/user answer. */
export interface RotatedGroup {
  readonly team_id: number;
  readonly token?: string;
  readonly name: string;
  readonly provided_id: string;
}

export function upsertedGroup(group: GroupRecord, created: boolean): UpsertedGroup {
  return {
    team_id: group.teamId,
    token: group.token,
    name: group.name,
    provided_id: group.userGroupId,
    // Spec 4.1 rule 3: properties only when the request sent them.
    ...(group.properties === undefined ? {} : { properties: group.properties }),
    new_user_group: created,
    api_environment_tag: group.environmentTag,
  };
}

export function rotatedGroup(group: GroupRecord): RotatedGroup {
  return { team_id: group.teamId, token: group.token, name: group.name, provided_id: group.userGroupId };
}

export function succeeded(userGroup: UpsertedGroup | RotatedGroup): { success: 1; user_group: UpsertedGroup | RotatedGroup } {
  return { success: 1, user_group: userGroup };
}

export function failed(message: string): { success: 0; message: string } {
  return { success: 0, message };
}
