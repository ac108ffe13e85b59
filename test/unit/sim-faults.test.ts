import { afterEach, describe, expect, it } from 'vitest';
import { NO_FAULTS, parseFaults, planCall, type Faults } from '../../src/sim/faults.js';
import { DRIP_INTERVAL_MS } from '../../src/sim/inject.js';
import { seededRandom } from '../../src/sim/random.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';

const KEY = 'fault-key';
const HEADERS = { authorization: `Token ${KEY}`, 'content-type': 'application/json' };

let sims: Simulator[] = [];
afterEach(async () => {
  await Promise.all(sims.map((sim) => sim.stop()));
  sims = [];
});

async function simulator(faults: Partial<Faults>, seed = 1): Promise<Simulator> {
  const sim = await startSimulator({ apiKeys: [KEY], faults, random: seededRandom(seed) });
  sims.push(sim);
  return sim;
}

function put(sim: Simulator, userGroupId = 'g', init: RequestInit = {}): Promise<Response> {
  return fetch(`${sim.url}/api/user`, { method: 'PUT', headers: HEADERS, body: JSON.stringify({ user_group_id: userGroupId, name: 'G' }), ...init });
}

async function createdToken(sim: Simulator, userGroupId: string): Promise<string> {
  const faults = sim.faults();
  sim.setFaults({});
  const body = (await (await put(sim, userGroupId)).json()) as { user_group: { token: string } };
  sim.setFaults(faults);
  return body.user_group.token;
}

describe('fault knobs', () => {
  it('default to no faults and reject bad values with a message', () => {
    expect(parseFaults({})).toEqual({ ok: true, value: NO_FAULTS });
    expect(parseFaults({ errorRate: 1.5 })).toEqual({ ok: false, message: 'errorRate must be a fraction from 0 to 1, got 1.5' });
    expect(parseFaults({ latencyMs: -1 })).toMatchObject({ ok: false, message: expect.stringMatching(/latencyMs must be a whole number/) as unknown });
    expect(parseFaults({ latencyMs: 1.5 })).toMatchObject({ ok: false });
    expect(parseFaults({ hangRate: '0.5' })).toEqual({ ok: false, message: 'hangRate must be a number, got a string' });
    expect(parseFaults({ errorRat: 0.5 })).toMatchObject({ ok: false, message: expect.stringMatching(/unknown fault knob "errorRat"/) as unknown });
    expect(parseFaults([])).toMatchObject({ ok: false });
    expect(parseFaults({ errorRate: 0.6, hangRate: 0.6 })).toMatchObject({ ok: false, message: expect.stringMatching(/add up to 1.2/) as unknown });
    expect(parseFaults({ errorRate: 0.1, rateLimitRate: 0.2, slowDripRate: 0.7, spikeRate: 1 })).toMatchObject({ ok: true });
  });

  it('decide the same way for the same seed, at exactly the configured rate', () => {
    const faults = { ...NO_FAULTS, errorRate: 0.25, hangRate: 0.25 };
    const run = (): (string | undefined)[] => {
      const random = seededRandom(42);
      return Array.from({ length: 2000 }, () => planCall(faults, random).fault);
    };
    const decisions = run();
    expect(run()).toEqual(decisions);
    const errors = decisions.filter((fault) => fault === 'injected_5xx').length;
    expect(errors / decisions.length).toBeGreaterThan(0.2);
    expect(errors / decisions.length).toBeLessThan(0.3);
  });

  it('are replaced as a whole by setFaults and PUT /_sim/faults', async () => {
    const sim = await simulator({ errorRate: 1, latencyMs: 5 });
    sim.setFaults({ hangRate: 0.5 });
    expect(sim.faults()).toEqual({ ...NO_FAULTS, hangRate: 0.5 });
    expect(() => sim.setFaults({ spikeRate: -1 })).toThrow(RangeError);
    expect(sim.faults().hangRate).toBe(0.5);

    const replaced = await fetch(`${sim.url}/_sim/faults`, {
      method: 'PUT',
      headers: HEADERS,
      body: JSON.stringify({ rateLimitRate: 0.3, retryAfterSeconds: 7 }),
    });
    expect(replaced.status).toBe(200);
    expect(await replaced.json()).toEqual({ ...NO_FAULTS, rateLimitRate: 0.3, retryAfterSeconds: 7 });
    expect(await (await fetch(`${sim.url}/_sim/faults`, { headers: HEADERS })).json()).toEqual(sim.faults());

    const bad = await fetch(`${sim.url}/_sim/faults`, { method: 'PUT', headers: HEADERS, body: JSON.stringify({ errorRate: 'lots' }) });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ success: 0, message: 'errorRate must be a number, got a string' });
    expect(sim.faults().rateLimitRate).toBe(0.3);
  });
});

describe('injected faults', () => {
  it('errorRate 1 answers 503 with success 0 and applies nothing', async () => {
    const sim = await simulator({ errorRate: 1 });
    const response = await put(sim);
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ success: 0, message: expect.stringContaining('not applied') as unknown });
    expect(sim.groups()).toEqual([]);
    expect(sim.stats().operations.upsert.injected_5xx).toBe(1);
  });

  it('rateLimitRate 1 answers 429 with Retry-After', async () => {
    const sim = await simulator({ rateLimitRate: 1, retryAfterSeconds: 3 });
    const response = await put(sim);
    expect(response.status).toBe(429);
    expect(response.headers.get('retry-after')).toBe('3');
    expect(await response.json()).toMatchObject({ success: 0 });
    expect(sim.groups()).toEqual([]);
    sim.setFaults({ rateLimitRate: 1 });
    expect((await put(sim)).headers.get('retry-after')).toBe('1');
  });

  it('leave 401 and 400 answers alone', async () => {
    const sim = await simulator({ errorRate: 1 });
    expect((await fetch(`${sim.url}/api/user`, { method: 'PUT', body: '{}' })).status).toBe(401);
    expect((await fetch(`${sim.url}/api/user`, { method: 'PUT', headers: HEADERS, body: '{}' })).status).toBe(400);
  });

  it('do not rotate on a fault: the old token stays valid', async () => {
    const sim = await simulator({});
    const token = await createdToken(sim, 'r');
    sim.setFaults({ errorRate: 1 });
    const rotate = (): Promise<Response> => fetch(`${sim.url}/api/user`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ current_token: token }) });
    expect((await rotate()).status).toBe(503);
    sim.setFaults({});
    expect((await rotate()).status).toBe(200);
    expect(sim.stats().operations.rotate).toMatchObject({ injected_5xx: 1, ok: 1 });
    expect(sim.stats().rotationsByUserGroupId).toEqual({ r: 1 });
  });

  it('hangRate 1 never answers, applies nothing, and stop() closes the socket', async () => {
    const sim = await startSimulator({ apiKeys: [KEY], faults: { hangRate: 1 } });
    const pending = put(sim);
    const outcome = pending.then(
      () => 'answered',
      () => 'closed',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(sim.stats().operations.upsert.injected_hang).toBe(1);
    const started = Date.now();
    await sim.stop();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await outcome).toBe('closed');
    expect(sim.groups()).toEqual([]);
  });

  it('a hung call ends when the client goes away', async () => {
    const sim = await simulator({ hangRate: 1 });
    const controller = new AbortController();
    const pending = put(sim, 'g', { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    await expect(pending).rejects.toThrow();
    sim.setFaults({});
    expect((await put(sim)).status).toBe(200);
  });

  it('malformedJsonRate 1 answers 200 with a body that is not JSON', async () => {
    const sim = await simulator({ malformedJsonRate: 1 });
    const response = await put(sim);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/application\/json/);
    const text = await response.text();
    expect(() => JSON.parse(text) as unknown).toThrow();
    expect(sim.groups()).toEqual([]);
    expect(sim.stats().operations.upsert.injected_malformed_json).toBe(1);
  });

  it('successZeroRate 1 answers 200 with success 0', async () => {
    const sim = await simulator({ successZeroRate: 1 });
    const response = await put(sim);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ success: 0, message: expect.any(String) as unknown });
    expect(sim.groups()).toEqual([]);
  });

  it('missingTokenRate 1 answers success 1 without a token', async () => {
    const sim = await simulator({ missingTokenRate: 1 });
    const body = (await (await put(sim, 'm')).json()) as { success: number; user_group: Record<string, unknown> };
    expect(body.success).toBe(1);
    expect(body.user_group).toMatchObject({ provided_id: 'm', name: 'G', new_user_group: true });
    expect(body.user_group).not.toHaveProperty('token');
    expect(sim.groups()).toEqual([]);
  });

  it('emptyTokenRate 1 answers success 1 with token "" for upsert and rotate', async () => {
    const sim = await simulator({});
    const token = await createdToken(sim, 'e');
    sim.setFaults({ emptyTokenRate: 1 });
    const upsert = (await (await put(sim, 'e')).json()) as { user_group: Record<string, unknown> };
    expect(upsert.user_group).toMatchObject({ token: '', new_user_group: false });
    const rotate = await fetch(`${sim.url}/api/user`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ current_token: token }) });
    expect(await rotate.json()).toEqual({ success: 1, user_group: { team_id: expect.any(Number) as unknown, token: '', name: 'G', provided_id: 'e' } });
    expect(sim.groups()[0]?.rotations).toBe(0);
    expect(sim.stats().operations).toMatchObject({ upsert: { injected_empty_token: 1 }, rotate: { injected_empty_token: 1 } });
  });

  it('hugeBodyRate 1 answers a ~5 MiB JSON body without success', async () => {
    const sim = await simulator({ hugeBodyRate: 1 });
    const response = await put(sim);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text.length).toBeGreaterThan(5 * 1024 * 1024);
    const body = JSON.parse(text) as Record<string, unknown>;
    expect(body).not.toHaveProperty('success');
    expect(body).toHaveProperty('user_group');
    expect(sim.groups()).toEqual([]);
  });

  it('slowDripRate 1 sends 200 headers, then one byte per interval', async () => {
    const sim = await simulator({ slowDripRate: 1 });
    const started = Date.now();
    const response = await put(sim);
    expect(response.status).toBe(200);
    expect(Number(response.headers.get('content-length'))).toBeGreaterThan(10);
    expect(Date.now() - started).toBeLessThan(DRIP_INTERVAL_MS);
    const reader = (response.body as ReadableStream<Uint8Array> | null)!.getReader();
    const first = await reader.read();
    expect(first.value?.length).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(DRIP_INTERVAL_MS - 50);
    await reader.cancel();
    expect(sim.groups()).toEqual([]);
    expect(sim.stats().operations.upsert.injected_slow_drip).toBe(1);
  });

  it('latencyMs delays every call', async () => {
    const sim = await simulator({ latencyMs: 150 });
    const started = Date.now();
    expect((await put(sim)).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(145);
  });

  it('spikes delay a call, which is then applied normally', async () => {
    const sim = await simulator({ spikeRate: 1, spikeMs: 120 });
    const started = Date.now();
    expect((await put(sim)).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(115);
    expect(sim.groups()).toHaveLength(1);
    expect(sim.stats()).toMatchObject({ operations: { upsert: { created: 1 } }, spikes: { upsert: 1, rotate: 0 } });
  });

  it('count exactly: with a seeded 50% error rate, applied calls equal the non-injected outcomes', async () => {
    const sim = await simulator({ errorRate: 0.5 }, 7);
    const statuses: number[] = [];
    for (let i = 0; i < 60; i += 1) statuses.push((await put(sim, `g${i}`)).status);
    const failures = statuses.filter((status) => status === 503).length;
    expect(failures).toBeGreaterThan(10);
    expect(failures).toBeLessThan(50);
    expect(sim.stats().operations.upsert).toMatchObject({ injected_5xx: failures, created: 60 - failures });
    expect(sim.groups()).toHaveLength(60 - failures);

    // The same seed gives the same answers.
    const twin = await simulator({ errorRate: 0.5 }, 7);
    const twinStatuses: number[] = [];
    for (let i = 0; i < 60; i += 1) twinStatuses.push((await put(twin, `g${i}`)).status);
    expect(twinStatuses).toEqual(statuses);
  });
});
