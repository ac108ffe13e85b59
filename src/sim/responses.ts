// The simulator's answer bodies, with the hidden fields named as configured.
import type { JsonObject } from './json.js';
import type { GroupRecord } from './store.js';
import type { EnvironmentTag } from './teams.js';

/**
 * What the service calls the two fields the spec leaves unnamed. The defaults are the names of the public API the
 * spec describes; `sim --created-field` / `--environment-tag-field` stand for a service that names them otherwise.
 */
export interface HiddenFieldNames {
  readonly created: string;
  readonly environmentTag: string;
}

export const DEFAULT_HIDDEN_FIELDS: HiddenFieldNames = { created: 'new_user_group', environmentTag: 'api_environment_tag' };

/** The user_group fields the spec names: a hidden field may not take one of them. */
const SPEC_FIELDS = new Set(['team_id', 'token', 'name', 'provided_id', 'properties']);

/** The defaults with the given names over them. @throws RangeError when two fields would share a name */
export function hiddenFieldNames(given: Partial<HiddenFieldNames> = {}): HiddenFieldNames {
  const names = { ...DEFAULT_HIDDEN_FIELDS, ...given };
  for (const name of [names.created, names.environmentTag]) {
    if (name === '' || SPEC_FIELDS.has(name)) throw new RangeError(`a hidden field needs a name the spec does not use, got "${name}"`);
  }
  if (names.created === names.environmentTag)
    throw new RangeError(`the created indicator and the environment tag need two names, got "${names.created}" twice`);
  return names;
}

/** The user_group of a PUT /api/user answer: the spec's fields, and the two hidden ones under their configured names. */
export interface UpsertedGroup {
  readonly team_id: number;
  readonly token?: string;
  readonly name: string;
  readonly provided_id: string;
  readonly properties?: JsonObject;
  readonly [hiddenField: string]: unknown;
}

/** The user_group of a POST /api/user answer. */
export interface RotatedGroup {
  readonly team_id: number;
  readonly token?: string;
  readonly name: string;
  readonly provided_id: string;
}

/** The hidden fields under the names this simulator uses. */
export function hiddenFields(names: HiddenFieldNames, created: boolean, environmentTag: EnvironmentTag): Record<string, unknown> {
  return { [names.created]: created, [names.environmentTag]: environmentTag };
}

export function upsertedGroup(group: GroupRecord, created: boolean, names: HiddenFieldNames): UpsertedGroup {
  return {
    team_id: group.teamId,
    token: group.token,
    name: group.name,
    provided_id: group.userGroupId,
    // Spec 4.1 rule 3: properties only when the request sent them.
    ...(group.properties === undefined ? {} : { properties: group.properties }),
    ...hiddenFields(names, created, group.environmentTag),
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
