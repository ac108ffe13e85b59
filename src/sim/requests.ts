// The simulator's request bodies (PUT and POST /api/user), parsed and checked as the service would.
import { describeJson, isJsonObject, parsed, rejected, unknownField, type JsonObject, type Parsed } from './json.js';

/** Schema identifier to data source (an id string or a number). */
export type Mapping = Readonly<Record<string, string | number>>;

/** The body of PUT /api/user. */
export interface UpsertRequest {
  readonly userGroupId: string;
  readonly name: string;
  readonly mapping: Mapping | undefined;
  readonly properties: JsonObject | undefined;
}

/** The body of POST /api/user. */
export interface RotateRequest {
  readonly currentToken: string;
}

const MAX_USER_GROUP_ID_LENGTH = 255;

const UPSERT_FIELDS = ['user_group_id', 'name', 'mapping', 'properties'] as const;
const ROTATE_FIELDS = ['current_token'] as const;

function checkFields(body: JsonObject, allowed: readonly string[]): string | undefined {
  const extra = unknownField(body, allowed);
  return extra === undefined ? undefined : `unknown field "${extra}"; allowed fields: ${allowed.join(', ')}`;
}

function requiredString(body: JsonObject, field: string): Parsed<string> {
  const value = body[field];
  if (value === undefined) return rejected(`${field} is required`);
  if (typeof value !== 'string') return rejected(`${field} must be a string, got ${describeJson(value)}`);
  if (value === '') return rejected(`${field} must not be empty`);
  return parsed(value);
}

function parseMapping(value: JsonObject[string] | undefined): Parsed<Mapping | undefined> {
  if (value === undefined) return parsed(undefined);
  if (!isJsonObject(value)) return rejected(`mapping must be an object, got ${describeJson(value)}`);
  const entries: [string, string | number][] = [];
  for (const [schema, target] of Object.entries(value)) {
    if (typeof target !== 'string' && typeof target !== 'number') {
      return rejected(`mapping["${schema}"] must be a string or a number, got ${describeJson(target)}`);
    }
    entries.push([schema, target]);
  }
  return parsed(Object.fromEntries(entries));
}

export function parseUpsertRequest(body: JsonObject): Parsed<UpsertRequest> {
  const extra = checkFields(body, UPSERT_FIELDS);
  if (extra !== undefined) return rejected(extra);
  const userGroupId = requiredString(body, 'user_group_id');
  if (!userGroupId.ok) return userGroupId;
  // Counted in code points, so an id of 255 emoji is as long as one of 255 letters.
  const idLength = Array.from(userGroupId.value).length;
  if (idLength > MAX_USER_GROUP_ID_LENGTH) {
    return rejected(`user_group_id must be at most ${MAX_USER_GROUP_ID_LENGTH} characters, got ${idLength}`);
  }
  const name = requiredString(body, 'name');
  if (!name.ok) return name;
  const mapping = parseMapping(body.mapping);
  if (!mapping.ok) return mapping;
  const properties = body.properties;
  if (properties !== undefined && !isJsonObject(properties)) {
    return rejected(`properties must be an object, got ${describeJson(properties)}`);
  }
  return parsed({ userGroupId: userGroupId.value, name: name.value, mapping: mapping.value, properties });
}

export function parseRotateRequest(body: JsonObject): Parsed<RotateRequest> {
  const extra = checkFields(body, ROTATE_FIELDS);
  if (extra !== undefined) return rejected(extra);
  const currentToken = requiredString(body, 'current_token');
  return currentToken.ok ? parsed({ currentToken: currentToken.value }) : currentToken;
}
