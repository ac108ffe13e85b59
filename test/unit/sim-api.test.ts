import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/sim/server.js';

const KEY = 'key-one';
const OTHER_KEY = 'key-two';
const TESTING_KEY = 'key-testing';

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, unknown>;
}

/** apiKey null sends no Authorization header. */
async function call(sim: Simulator, method: string, body: unknown, apiKey: string | null = KEY, path = '/api/user'): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey !== null) headers.authorization = `Token ${apiKey}`;
  const response = await fetch(`${sim.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

function userGroup(answer: Answer): Record<string, unknown> {
  const group = answer.body.user_group;
  if (typeof group !== 'object' || group === null) throw new Error(`no user_group in ${JSON.stringify(answer.body)}`);
  return group as Record<string, unknown>;
}

function tokenOf(answer: Answer): string {
  const token = userGroup(answer).token;
  if (typeof token !== 'string') throw new Error('no token');
  return token;
}

describe('the simulated user-group service', () => {
  let sim: Simulator;
  beforeEach(async () => {
    sim = await startSimulator({ apiKeys: [KEY, OTHER_KEY], testingApiKeys: [TESTING_KEY] });
  });
  afterEach(async () => {
    await sim.stop();
  });

  it('creates a group with a 64-character alphanumeric token', async () => {
    const answer = await call(sim, 'PUT', { user_group_id: 'acme', name: 'Acme' });
    expect(answer.status).toBe(200);
    expect(answer.body.success).toBe(1);
    const group = userGroup(answer);
    expect(group).toEqual({
      team_id: expect.any(Number) as unknown,
      token: expect.stringMatching(/^[A-Za-z0-9]{64}$/) as unknown,
      name: 'Acme',
      provided_id: 'acme',
      new_user_group: true,
      api_environment_tag: 'Customer',
    });
    expect(Number.isInteger(group.team_id) && (group.team_id as number) > 0).toBe(true);
  });

  it('updates a group in place: same token, new_user_group false, fields replaced', async () => {
    const created = await call(sim, 'PUT', { user_group_id: 'acme', name: 'Acme', mapping: { s1: 'ds-1' }, properties: { tier: 'gold' } });
    const updated = await call(sim, 'PUT', { user_group_id: 'acme', name: 'Acme Inc' });
    expect(updated.status).toBe(200);
    expect(tokenOf(updated)).toBe(tokenOf(created));
    expect(userGroup(updated).new_user_group).toBe(false);
    expect(userGroup(updated).name).toBe('Acme Inc');
    const [view] = sim.groups(KEY);
    expect(view).toMatchObject({ userGroupId: 'acme', name: 'Acme Inc', mapping: null, properties: null });
  });

  it('returns properties only when the request sent them', async () => {
    const withProps = await call(sim, 'PUT', { user_group_id: 'a', name: 'A', properties: { plan: 'pro', seats: 3, nested: { x: [1] } } });
    expect(userGroup(withProps).properties).toEqual({ plan: 'pro', seats: 3, nested: { x: [1] } });
    const without = await call(sim, 'PUT', { user_group_id: 'a', name: 'A' });
    expect(userGroup(without)).not.toHaveProperty('properties');
  });

  it('keeps mapping values that are strings or numbers', async () => {
    await call(sim, 'PUT', { user_group_id: 'a', name: 'A', mapping: { sales: 'ds-7', hr: 12 } });
    expect(sim.groups(KEY)[0]?.mapping).toEqual({ sales: 'ds-7', hr: 12 });
  });

  it('rotates a token and invalidates the old one at once', async () => {
    const old = tokenOf(await call(sim, 'PUT', { user_group_id: 'acme', name: 'Acme' }));
    const rotated = await call(sim, 'POST', { current_token: old });
    expect(rotated.status).toBe(200);
    expect(rotated.body.success).toBe(1);
    expect(userGroup(rotated)).toEqual({
      team_id: expect.any(Number) as unknown,
      token: expect.stringMatching(/^[A-Za-z0-9]{64}$/) as unknown,
      name: 'Acme',
      provided_id: 'acme',
    });
    expect(tokenOf(rotated)).not.toBe(old);

    const again = await call(sim, 'POST', { current_token: old });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ success: 0, message: 'current_token does not match any user group' });

    // An update after a rotation returns the rotated token.
    expect(tokenOf(await call(sim, 'PUT', { user_group_id: 'acme', name: 'Acme' }))).toBe(tokenOf(rotated));
  });

  it('rejects rotation with a missing, empty or mistyped current_token', async () => {
    for (const body of [{}, { current_token: '' }, { current_token: 7 }]) {
      const answer = await call(sim, 'POST', body);
      expect(answer.status).toBe(400);
      expect(answer.body.success).toBe(0);
      expect(answer.body.message).toMatch(/current_token/);
    }
  });

  it('answers 401 without a key, with a wrong key or a wrong scheme, and applies nothing', async () => {
    const missing = await call(sim, 'PUT', { user_group_id: 'a', name: 'A' }, null);
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({ success: 0, message: expect.stringContaining('missing Authorization header') as unknown });
    expect((await call(sim, 'PUT', { user_group_id: 'a', name: 'A' }, 'nope')).status).toBe(401);
    const bearer = await fetch(`${sim.url}/api/user`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user_group_id: 'a', name: 'A' }),
    });
    expect(bearer.status).toBe(401);
    expect(await bearer.text()).not.toContain(KEY);
    expect(sim.groups()).toEqual([]);
    expect(sim.stats().operations.upsert.unauthorized).toBe(3);
  });

  it('scopes groups to the API key: each key is its own team', async () => {
    const one = await call(sim, 'PUT', { user_group_id: 'shared', name: 'One' }, KEY);
    const two = await call(sim, 'PUT', { user_group_id: 'shared', name: 'Two' }, OTHER_KEY);
    expect(userGroup(two).new_user_group).toBe(true);
    expect(userGroup(one).team_id).not.toBe(userGroup(two).team_id);
    expect(tokenOf(one)).not.toBe(tokenOf(two));
    // One team cannot rotate another team's token.
    const foreign = await call(sim, 'POST', { current_token: tokenOf(one) }, OTHER_KEY);
    expect(foreign.status).toBe(400);
    expect(sim.groups(KEY).map((g) => g.name)).toEqual(['One']);
    expect(sim.groups(OTHER_KEY).map((g) => g.name)).toEqual(['Two']);
    expect(sim.groups()).toHaveLength(2);
  });

  it('keeps team ids stable per key', async () => {
    const first = userGroup(await call(sim, 'PUT', { user_group_id: 'a', name: 'A' })).team_id;
    const again = await startSimulator({ apiKeys: [OTHER_KEY, KEY] });
    try {
      expect(userGroup(await call(again, 'PUT', { user_group_id: 'a', name: 'A' })).team_id).toBe(first);
    } finally {
      await again.stop();
    }
  });

  it('tags groups of a testing key as Testing', async () => {
    const answer = await call(sim, 'PUT', { user_group_id: 't', name: 'T' }, TESTING_KEY);
    expect(userGroup(answer).api_environment_tag).toBe('Testing');
    expect(sim.groups(TESTING_KEY)[0]?.environmentTag).toBe('Testing');
  });

  it.each([
    ['not JSON', '{"user_group_id":', /not valid JSON/],
    ['an empty body', '', /empty/],
    ['an array', [], /must be a JSON object, got an array/],
    ['null', 'null', /must be a JSON object, got null/],
    ['no user_group_id', { name: 'A' }, /user_group_id is required/],
    ['an empty user_group_id', { user_group_id: '', name: 'A' }, /user_group_id must not be empty/],
    ['a numeric user_group_id', { user_group_id: 5, name: 'A' }, /user_group_id must be a string, got a number/],
    ['a user_group_id of 256 characters', { user_group_id: 'x'.repeat(256), name: 'A' }, /at most 255 characters, got 256/],
    ['no name', { user_group_id: 'a' }, /name is required/],
    ['an empty name', { user_group_id: 'a', name: '' }, /name must not be empty/],
    ['a mapping that is an array', { user_group_id: 'a', name: 'A', mapping: [] }, /mapping must be an object, got an array/],
    ['a mapping value that is an object', { user_group_id: 'a', name: 'A', mapping: { s: {} } }, /mapping\["s"\] must be a string or a number/],
    ['properties that are a string', { user_group_id: 'a', name: 'A', properties: 'x' }, /properties must be an object, got a string/],
    ['an unknown field', { user_group_id: 'a', name: 'A', propertis: {} }, /unknown field "propertis"/],
  ])('answers 400 to a PUT with %s', async (_what, body, message) => {
    const answer = await call(sim, 'PUT', body);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ success: 0, message: expect.stringMatching(message) as unknown });
    expect(sim.groups()).toEqual([]);
  });

  it('accepts a user_group_id of exactly 255 characters', async () => {
    expect((await call(sim, 'PUT', { user_group_id: 'x'.repeat(255), name: 'A' })).status).toBe(200);
  });

  it('treats "__proto__" as an ordinary user_group_id', async () => {
    const token = tokenOf(await call(sim, 'PUT', { user_group_id: '__proto__', name: 'P' }));
    expect((await call(sim, 'POST', { current_token: token })).status).toBe(200);
    expect(Object.hasOwn(sim.stats().rotationsByUserGroupId, '__proto__')).toBe(true);
    expect(sim.stats().rotationsByUserGroupId['__proto__']).toBe(1);
  });

  it('answers 404 to unknown paths and 405 to wrong methods, with success 0 bodies', async () => {
    const notFound = await call(sim, 'GET', undefined, KEY, '/api/users');
    expect(notFound.status).toBe(404);
    expect(notFound.body.success).toBe(0);
    const wrongMethod = await call(sim, 'DELETE', undefined, KEY, '/api/user');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('PUT, POST');
    expect(wrongMethod.body.success).toBe(0);
    expect((await call(sim, 'DELETE', undefined, KEY, '/_sim/stats')).status).toBe(405);
    expect((await call(sim, 'GET', undefined, KEY, '/_sim/nothing')).status).toBe(404);
  });

  it('answers 413 to a body over 1 MiB, declared or streamed', async () => {
    const declared = await call(sim, 'PUT', 'x'.repeat(1024 * 1024 + 1));
    expect(declared.status).toBe(413);
    expect(declared.body.success).toBe(0);
    const chunks = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 20; i += 1) controller.enqueue(new Uint8Array(64 * 1024).fill(0x20));
        controller.close();
      },
    });
    const streamed = await fetch(`${sim.url}/api/user`, {
      method: 'PUT',
      headers: { authorization: `Token ${KEY}` },
      body: chunks,
      duplex: 'half',
    });
    expect(streamed.status).toBe(413);
    expect(sim.stats().operations.upsert.payload_too_large).toBe(2);
  });

  it('accepts a body of exactly 1 MiB', async () => {
    const head = JSON.stringify({ user_group_id: 'big', name: 'Big', properties: { pad: '' } });
    const body = head.replace('"pad":""', `"pad":"${'p'.repeat(1024 * 1024 - head.length)}"`);
    expect(Buffer.byteLength(body)).toBe(1024 * 1024);
    expect((await call(sim, 'PUT', body)).status).toBe(200);
  });
});

describe('simulator options', () => {
  it('refuses to start without a key, with a bad key, a bad port or bad faults', async () => {
    await expect(startSimulator({ apiKeys: [] })).rejects.toThrow(/at least one API key/);
    await expect(startSimulator({ apiKeys: ['has space'] })).rejects.toThrow(/API key #1/);
    await expect(startSimulator({ apiKeys: ['k'], port: 70_000 })).rejects.toThrow(/port/);
    await expect(startSimulator({ apiKeys: ['k'], faults: { errorRate: 2 } })).rejects.toThrow(/errorRate/);
  });

  it('rejects an unknown key in the in-process API without echoing it', async () => {
    const sim = await startSimulator({ apiKeys: ['k'] });
    try {
      expect(() => sim.groups('s3cret')).toThrow(/not configured/);
      expect(() => sim.groups('s3cret')).not.toThrow(/s3cret/);
    } finally {
      await sim.stop();
    }
  });
});
