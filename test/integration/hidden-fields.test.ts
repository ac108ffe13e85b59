import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HiddenFieldNames } from '../../src/sim/responses.js';
import { TestEnv, type OperatorHandle } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/** What the simulator counted: PUTs that created or updated, good POSTs, and anything else. */
function calls(env: TestEnv): { created: number; updated: number; rotations: number; other: number } {
  const { upsert, rotate } = env.calls();
  const all = [...Object.values(upsert), ...Object.values(rotate)].reduce((a, b) => a + b, 0);
  return { created: upsert.created, updated: upsert.updated, rotations: rotate.ok, other: all - upsert.created - upsert.updated - rotate.ok };
}

/**
 * The spec does not name the created indicator or the environment tag. Against a service that names them as the
 * public API does and against one that names them otherwise, a brand-new group costs one PUT and is no adoption,
 * and a group that was there before is still adopted (adoption: Rotate: one PUT, one POST).
 */
describe.each<[string, Partial<HiddenFieldNames>]>([
  ['the public names (new_user_group, api_environment_tag)', {}],
  ['other names (is_new, environment)', { created: 'is_new', environmentTag: 'environment' }],
])('hidden fields named as %s', (_label, hiddenFields) => {
  let env: TestEnv;
  let operator: OperatorHandle;

  beforeAll(async () => {
    env = await TestEnv.create('hidden', { hiddenFields });
    await env.putClusterService(env.defaultService, {
      url: env.sim.url,
      tenants: [{ namespaces: [env.namespace], userGroupIds: { prefix: '' }, adoption: 'Rotate' }],
    });
    operator = await env.startOperator();
  });
  afterAll(async () => {
    await ifAssigned(operator)?.stop();
    await ifAssigned(env)?.close();
  });

  it('a brand-new group: one PUT, no POST, no adoption, the environment tag in status', async () => {
    await env.createUserGroup('fresh', { userGroupId: 'fresh-1', name: 'Fresh' });
    const ug = await env.waitForReady('fresh');
    expect(calls(env)).toEqual({ created: 1, updated: 0, rotations: 0, other: 0 });
    expect(ug.status?.adoption).toBeUndefined();
    expect(ug.status?.environmentTag).toBe('Customer');
    const reasons = (await env.eventsFor('fresh')).map((e) => e.reason);
    expect(reasons).toContain('Synced');
    expect(reasons).not.toContain('Adopted');
    expect(reasons).not.toContain('CreatedIndicatorUnknown');
  });

  it('a group that existed before: adopted, its token rotated, so the earlier holder loses it', async () => {
    const before = await fetch(`${env.sim.url}/api/user`, {
      method: 'PUT',
      headers: { authorization: `Token ${env.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user_group_id: 'existing-1', name: 'Made by the backend' }),
    });
    const earlierToken = ((await before.json()) as { user_group: { token: string } }).user_group.token;
    env.sim.resetStats();
    await env.createUserGroup('existing', { userGroupId: 'existing-1', name: 'Existing' });
    const ug = await env.waitForReady('existing');
    expect(calls(env)).toEqual({ created: 0, updated: 1, rotations: 1, other: 0 });
    expect(ug.status?.adoption).toMatchObject({ tokenRotated: true });
    const token = await env.secretToken('existing');
    expect(token).toBeDefined();
    expect(token).not.toBe(earlierToken);
    expect((await env.eventsFor('existing')).map((e) => e.reason)).toContain('Adopted');
  });
});
