import { describe, expect, it } from 'vitest';
import { readHiddenFields } from '../../src/service/hidden-fields.js';

const spec = { team_id: 3, token: 't', name: 'Acme', provided_id: 'acme', properties: { plan: 'gold' } };

describe('readHiddenFields: the created indicator and the environment tag, whatever the service calls them', () => {
  it.each<[string, Record<string, unknown>, boolean | undefined, string | undefined]>([
    ['the public names', { new_user_group: true, api_environment_tag: 'Customer' }, true, 'Customer'],
    ['the public names, an update', { new_user_group: 0, api_environment_tag: 'Testing' }, false, 'Testing'],
    ['other names (created)', { created: true, environment: 'Customer' }, true, 'Customer'],
    ['other names (is_new, 0/1)', { is_new: 0, env: 'testing' }, false, 'testing'],
    ['a name that says "new" among other flags', { active: true, isNew: 'true', tier: 'Customer' }, true, 'Customer'],
    ['the only boolean-like field, however named', { flag: 1, tag: 'Testing' }, true, 'Testing'],
    ['a name that says the opposite, read inverted', { existed: true, environment_tag: 'Customer' }, false, 'Customer'],
    ['"already_exists": false', { already_exists: false }, true, undefined],
    ['no indicator at all', { environment_tag: 'Customer' }, undefined, 'Customer'],
    ['two flags, neither named for it', { active: true, verified: false }, undefined, undefined],
    ['two flags both named for it', { created: true, is_new: false }, undefined, undefined],
    ['a public name with a bad value: unknown, not guessed from others', { new_user_group: 'yes', other: true }, undefined, undefined],
    ['two tag-shaped strings', { a: 'Customer', b: 'Testing' }, undefined, undefined],
  ])('%s', (_label, hidden, created, environmentTag) => {
    expect(readHiddenFields({ ...spec, ...hidden })).toEqual({ created, environmentTag });
  });

  it('never reads a field the spec names as a hidden one', () => {
    // team_id 1 and a properties object are the spec's own: not a created indicator
    expect(readHiddenFields({ ...spec, team_id: 1 })).toEqual({ created: undefined, environmentTag: undefined });
  });

  it('a non-string public environment tag is unknown and not mistaken for the created indicator', () => {
    expect(readHiddenFields({ ...spec, api_environment_tag: 1, created: false })).toEqual({ created: false, environmentTag: undefined });
  });
});
