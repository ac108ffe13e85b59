// Finds the two user_group fields the spec leaves unnamed (created indicator, environment tag) by their values.
import { parseBooleanLike } from './boolean-like.js';

/**
 * The two user_group fields the spec leaves unnamed (the created indicator, the environment tag), found by shape.
 * The spec names team_id, token, name, provided_id and properties; anything else is the service's own. A real
 * service may call the hidden fields anything, so each is recognised by what its value looks like, the public
 * API's names first:
 *
 * - created indicator: `new_user_group` if present; else the one other boolean-like field (true/false, 1/0,
 *   "true"/"false", "1"/"0") whose name says created or new, or failing that the only boolean-like field. A name that
 *   says the opposite (exist, already, found: `existed: true`) is read inverted. Anything else is undefined:
 *   unknown, which the adoption step treats as neither "created" nor "was there".
 * - environment tag: `api_environment_tag` if present; else the one other field whose value is one of the
 *   documented tags (Customer, Testing, any case).
 */
const SPEC_NAMED = new Set(['team_id', 'token', 'name', 'provided_id', 'properties']);
const PUBLIC_CREATED = 'new_user_group';
const PUBLIC_ENVIRONMENT_TAG = 'api_environment_tag';
const ENVIRONMENT_TAGS = new Set(['customer', 'testing']);
const SAYS_CREATED = /creat|new/i;
const SAYS_EXISTED = /exist|already|found/i;

export interface HiddenFields {
  readonly created: boolean | undefined;
  readonly environmentTag: string | undefined;
}

export function readHiddenFields(group: Readonly<Record<string, unknown>>): HiddenFields {
  const own = Object.entries(group).filter(([name]) => !SPEC_NAMED.has(name));
  const environmentTag = readEnvironmentTag(group, own);
  const tagField = environmentTag?.field;
  return {
    created: readCreated(
      group,
      own.filter(([name]) => name !== tagField),
    ),
    environmentTag: environmentTag?.value,
  };
}

function readCreated(group: Readonly<Record<string, unknown>>, own: readonly (readonly [string, unknown])[]): boolean | undefined {
  if (PUBLIC_CREATED in group) return parseBooleanLike(group[PUBLIC_CREATED]);
  const candidates = own.flatMap(([name, value]) => {
    const flag = parseBooleanLike(value);
    return flag === undefined ? [] : [{ name, flag }];
  });
  const named = candidates.filter(({ name }) => SAYS_CREATED.test(name) || SAYS_EXISTED.test(name));
  const chosen = named.length > 0 ? named : candidates;
  if (chosen.length !== 1) return undefined;
  const [{ name, flag }] = chosen as [{ name: string; flag: boolean }];
  return SAYS_EXISTED.test(name) ? !flag : flag;
}

function readEnvironmentTag(
  group: Readonly<Record<string, unknown>>,
  own: readonly (readonly [string, unknown])[],
): { field: string; value: string | undefined } | undefined {
  if (PUBLIC_ENVIRONMENT_TAG in group) {
    const published = group[PUBLIC_ENVIRONMENT_TAG];
    return { field: PUBLIC_ENVIRONMENT_TAG, value: typeof published === 'string' ? published : undefined };
  }
  const tagged = own.filter(([, value]) => typeof value === 'string' && ENVIRONMENT_TAGS.has(value.trim().toLowerCase()));
  if (tagged.length !== 1) return undefined;
  const [[field, value]] = tagged as [[string, string]];
  return { field, value };
}
