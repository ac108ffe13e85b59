import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/sim/server.js';
import { DebouncedStateWriter, parseState, serializeState } from '../../src/sim/state-file.js';
import { teamIdForKey } from '../../src/sim/teams.js';
import { newToken } from '../../src/sim/token.js';

const KEY = 'persist-key';
const HEADERS = { authorization: `Token ${KEY}`, 'content-type': 'application/json' };

let dir: string;
let stateFile: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'usergroup-sim-'));
  stateFile = path.join(dir, 'state.json');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function put(url: string, body: unknown): Promise<{ status: number; token: string; created: boolean }> {
  const response = await fetch(`${url}/api/user`, { method: 'PUT', headers: HEADERS, body: JSON.stringify(body) });
  const json = (await response.json()) as { user_group: { token: string; new_user_group: boolean } };
  return { status: response.status, token: json.user_group.token, created: json.user_group.new_user_group };
}

describe('the state file', () => {
  it('survives a restart with the same tokens, rotations included', async () => {
    const first = await startSimulator({ apiKeys: [KEY], stateFile });
    const a = await put(first.url, { user_group_id: 'a', name: 'A', properties: { p: 1 }, mapping: { s: 'd' } });
    await put(first.url, { user_group_id: 'b', name: 'B' });
    const rotated = await fetch(`${first.url}/api/user`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ current_token: a.token }) });
    const newToken = ((await rotated.json()) as { user_group: { token: string } }).user_group.token;
    const before = first.groups();
    await first.stop();

    const second = await startSimulator({ apiKeys: [KEY], stateFile });
    try {
      expect(second.groups()).toEqual(before);
      const again = await put(second.url, { user_group_id: 'a', name: 'A' });
      expect(again).toEqual({ status: 200, token: newToken, created: false });
      const old = await fetch(`${second.url}/api/user`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ current_token: a.token }) });
      expect(old.status).toBe(400);
    } finally {
      await second.stop();
    }
  });

  it('is written with mode 0600, atomically, without leftover temp files', async () => {
    const sim = await startSimulator({ apiKeys: [KEY], stateFile });
    await put(sim.url, { user_group_id: 'a', name: 'A' });
    await sim.stop();
    expect((await stat(stateFile)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(['state.json']);
    const state = parseState(await readFile(stateFile, 'utf8'));
    expect(state.ok && state.value.map((group) => group.userGroupId)).toEqual(['a']);
  });

  it('is written after a short debounce, not only on stop', async () => {
    const sim = await startSimulator({ apiKeys: [KEY], stateFile });
    try {
      await Promise.all(Array.from({ length: 50 }, (_, i) => put(sim.url, { user_group_id: `g${i}`, name: 'G' })));
      await new Promise((resolve) => setTimeout(resolve, 400));
      const state = parseState(await readFile(stateFile, 'utf8'));
      expect(state.ok && state.value.length).toBe(50);
    } finally {
      await sim.stop();
    }
  });

  it('coalesces a burst of changes into one write and flushes the rest', async () => {
    let writes = 0;
    let text = 'first';
    const writer = new DebouncedStateWriter(
      stateFile,
      () => ((writes += 1), text),
      50,
      (error) => {
        throw error;
      },
    );
    for (let i = 0; i < 1000; i += 1) writer.schedule();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(writes).toBe(1);
    expect(await readFile(stateFile, 'utf8')).toBe('first');
    text = 'second';
    writer.schedule();
    await writer.flush();
    expect(writes).toBe(2);
    expect(await readFile(stateFile, 'utf8')).toBe('second');
    await writer.flush();
    expect(writes).toBe(2);
  });

  it('reports a failed write from flush()', async () => {
    const writer = new DebouncedStateWriter(
      path.join(dir, 'missing-dir', 'state.json'),
      () => '{}',
      50,
      () => {},
    );
    writer.schedule();
    await expect(writer.flush()).rejects.toThrow(/ENOENT/);
  });

  it('loads and saves 10,000 groups', async () => {
    const teamId = teamIdForKey(KEY);
    const groups = Array.from({ length: 10_000 }, (_, i) => ({
      teamId,
      userGroupId: `g${i}`,
      name: `Group ${i}`,
      mapping: undefined,
      properties: { i },
      environmentTag: 'Customer' as const,
      token: newToken(),
      rotations: 0,
      createdAt: '2025-01-01T00:00:00.000Z',
      updatedAt: '2025-01-01T00:00:00.000Z',
    }));
    await writeFile(stateFile, serializeState(groups));
    const sim = await startSimulator({ apiKeys: [KEY], stateFile });
    expect(sim.groups(KEY)).toHaveLength(10_000);
    const again = await put(sim.url, { user_group_id: 'g9999', name: 'Renamed' });
    expect(again).toEqual({ status: 200, token: groups[9999]?.token, created: false });
    await sim.stop();
    const state = parseState(await readFile(stateFile, 'utf8'));
    expect(state.ok && state.value.length).toBe(10_000);
    expect(state.ok && state.value.find((group) => group.userGroupId === 'g9999')?.name).toBe('Renamed');
  });

  it('keeps groups of keys that are no longer configured', async () => {
    const first = await startSimulator({ apiKeys: [KEY, 'gone'], stateFile });
    await fetch(`${first.url}/api/user`, {
      method: 'PUT',
      headers: { authorization: 'Token gone', 'content-type': 'application/json' },
      body: JSON.stringify({ user_group_id: 'x', name: 'X' }),
    });
    await first.stop();
    const second = await startSimulator({ apiKeys: [KEY], stateFile });
    await put(second.url, { user_group_id: 'a', name: 'A' });
    expect(second.groups(KEY)).toHaveLength(1);
    expect(second.groups()).toHaveLength(2);
    await second.stop();
    const state = parseState(await readFile(stateFile, 'utf8'));
    expect(state.ok && state.value.length).toBe(2);
  });

  it('refuses to start on a state file it cannot read, rather than overwrite it', async () => {
    await writeFile(stateFile, '{"version":1,"groups":[{"teamId":1}]}');
    await expect(startSimulator({ apiKeys: [KEY], stateFile })).rejects.toThrow(/cannot load state file .*groups\[0\]/);
    await writeFile(stateFile, 'not json');
    await expect(startSimulator({ apiKeys: [KEY], stateFile })).rejects.toThrow(/not valid JSON/);
    await writeFile(stateFile, '{"version":2,"groups":[]}');
    await expect(startSimulator({ apiKeys: [KEY], stateFile })).rejects.toThrow(/version 2/);
    expect(await readFile(stateFile, 'utf8')).toBe('{"version":2,"groups":[]}');
  });

  it('rejects a state file with duplicate tokens', async () => {
    const record = (id: string): object => ({
      teamId: 5,
      userGroupId: id,
      name: 'N',
      environmentTag: 'Customer',
      token: 'a'.repeat(64),
      rotations: 0,
      createdAt: '2025-01-01T00:00:00.000Z',
      updatedAt: '2025-01-01T00:00:00.000Z',
    });
    await writeFile(stateFile, JSON.stringify({ version: 1, groups: [record('x'), record('y')] }));
    await expect(startSimulator({ apiKeys: [KEY], stateFile })).rejects.toThrow(/same token/);
  });
});
