import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import { sha256Hex } from '../../src/sim/token.js';

const KEY = 'admin-key';
const OTHER_KEY = 'admin-key-2';

function headers(apiKey: string): Record<string, string> {
  return { authorization: `Token ${apiKey}`, 'content-type': 'application/json' };
}

async function api(sim: Simulator, method: string, body: unknown, apiKey = KEY): Promise<{ status: number; token: string | undefined }> {
  const response = await fetch(`${sim.url}/api/user`, { method, headers: headers(apiKey), body: JSON.stringify(body) });
  const json = (await response.json()) as { user_group?: { token?: string } };
  return { status: response.status, token: json.user_group?.token };
}

async function admin(sim: Simulator, path: string, method = 'GET', apiKey: string | null = KEY): Promise<{ status: number; text: string }> {
  const response = await fetch(`${sim.url}${path}`, { method, ...(apiKey === null ? {} : { headers: headers(apiKey) }) });
  return { status: response.status, text: await response.text() };
}

describe('admin endpoints and stats', () => {
  let sim: Simulator;
  beforeEach(async () => {
    sim = await startSimulator({ apiKeys: [KEY, OTHER_KEY] });
  });
  afterEach(async () => {
    await sim.stop();
  });

  it('count every call by operation and outcome, and rotations and upserts per user_group_id', async () => {
    const token = (await api(sim, 'PUT', { user_group_id: 'a', name: 'A' })).token;
    await api(sim, 'PUT', { user_group_id: 'a', name: 'A2' });
    await api(sim, 'PUT', { user_group_id: 'b', name: 'B' });
    await api(sim, 'PUT', { name: 'no id' });
    await api(sim, 'PUT', { user_group_id: 'a', name: 'A' }, 'wrong');
    const rotated = await api(sim, 'POST', { current_token: token });
    await api(sim, 'POST', { current_token: rotated.token });
    await api(sim, 'POST', { current_token: token });

    const stats = sim.stats();
    expect(stats.operations.upsert).toMatchObject({ created: 2, updated: 1, bad_request: 1, unauthorized: 1, ok: 0 });
    expect(stats.operations.rotate).toMatchObject({ ok: 2, unknown_token: 1 });
    expect(stats.rotationsByUserGroupId).toEqual({ a: 2 });
    // Successful upserts only: the refused and unauthenticated ones named no group.
    expect(stats.upsertsByUserGroupId).toEqual({ a: 2, b: 1 });
    expect(sim.groups(KEY).find((group) => group.userGroupId === 'a')?.rotations).toBe(2);

    // The HTTP view is the key's team; the unauthenticated call belongs to no team.
    const teamStats = JSON.parse((await admin(sim, '/_sim/stats')).text) as typeof stats;
    expect(teamStats.operations.upsert).toMatchObject({ created: 2, updated: 1, bad_request: 1, unauthorized: 0 });
    const otherStats = JSON.parse((await admin(sim, '/_sim/stats', 'GET', OTHER_KEY)).text) as typeof stats;
    expect(otherStats.operations.upsert.created).toBe(0);
  });

  it('reset stats per team over HTTP and all of them in-process', async () => {
    await api(sim, 'PUT', { user_group_id: 'a', name: 'A' });
    await api(sim, 'PUT', { user_group_id: 'a', name: 'A' }, OTHER_KEY);
    const reset = await admin(sim, '/_sim/stats/reset', 'POST');
    expect(reset).toEqual({ status: 200, text: '{"success":1}' });
    expect(sim.stats(KEY).operations.upsert.created).toBe(0);
    expect(sim.stats(OTHER_KEY).operations.upsert.created).toBe(1);
    sim.resetStats();
    expect(sim.stats().operations.upsert.created).toBe(0);
    expect(sim.groups()).toHaveLength(2);
  });

  it('list only the caller team groups, with the token as its SHA-256', async () => {
    const token = (await api(sim, 'PUT', { user_group_id: 'a/b c', name: 'A', mapping: { s: 1 }, properties: { p: true } })).token ?? '';
    await api(sim, 'PUT', { user_group_id: 'other', name: 'O' }, OTHER_KEY);

    const list = JSON.parse((await admin(sim, '/_sim/groups')).text) as { groups: unknown[] };
    expect(list.groups).toEqual([
      {
        teamId: expect.any(Number) as unknown,
        userGroupId: 'a/b c',
        name: 'A',
        mapping: { s: 1 },
        properties: { p: true },
        environmentTag: 'Customer',
        tokenSha256: sha256Hex(token),
        rotations: 0,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
        updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
      },
    ]);

    const one = await admin(sim, `/_sim/groups/${encodeURIComponent('a/b c')}`);
    expect(one.status).toBe(200);
    expect(JSON.parse(one.text)).toEqual(list.groups[0]);
    expect((await admin(sim, '/_sim/groups/other')).status).toBe(404);
    expect((await admin(sim, '/_sim/groups/%E0%A4%A')).status).toBe(400);
  });

  it('never show a token or an API key', async () => {
    const tokens = [(await api(sim, 'PUT', { user_group_id: 'a', name: 'A' })).token ?? ''];
    tokens.push((await api(sim, 'POST', { current_token: tokens[0] })).token ?? '');
    const texts = await Promise.all(['/_sim/stats', '/_sim/faults', '/_sim/groups', '/_sim/groups/a'].map(async (path) => (await admin(sim, path)).text));
    texts.push(JSON.stringify(sim.groups()), JSON.stringify(sim.stats()));
    for (const text of texts) {
      for (const token of tokens) expect(text).not.toContain(token);
      expect(text).not.toContain(KEY);
    }
  });

  it('require a valid API key', async () => {
    for (const path of ['/_sim/stats', '/_sim/faults', '/_sim/groups', '/_sim/groups/a']) {
      const missing = await admin(sim, path, 'GET', null);
      expect(missing.status).toBe(401);
      expect(JSON.parse(missing.text)).toMatchObject({ success: 0 });
      expect((await admin(sim, path, 'GET', 'bogus')).status).toBe(401);
    }
    expect((await admin(sim, '/_sim/stats/reset', 'POST', null)).status).toBe(401);
  });

  it('are not faulted and not counted', async () => {
    sim.setFaults({ errorRate: 1, latencyMs: 300 });
    const started = Date.now();
    expect((await admin(sim, '/_sim/groups')).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(250);
    expect(sim.stats().operations.upsert.injected_5xx).toBe(0);
  });
});
