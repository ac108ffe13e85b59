import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CallContext } from '../../src/service/call-gates.js';
import { EndpointPool } from '../../src/service/endpoint-pool.js';
import { SecretValue } from '../../src/service/secret-value.js';
import type { ServiceResult } from '../../src/service/types.js';

/**
 * The endpoint pool: one client and one set of call gates per URL and API key, and the sweep that drops endpoints
 * idle for 15 minutes (checked at most once a minute, when an endpoint is looked up) unless dropping one would lose
 * something: a call in flight, or a slot the token bucket keeps for a key.
 */
const URL_A = 'https://a.example.com';
const URL_B = 'https://b.example.com';
const KEY = new SecretValue('the-api-key');
const MINUTE = 60_000;

const ctx = (key: string): CallContext => ({ key, followUp: false, wake: () => undefined });
const answered: ServiceResult = {
  ok: true,
  group: { teamId: 1, token: new SecretValue('tok'), name: 'n', providedId: 'g', created: false, environmentTag: undefined },
};

const pool = (qps = 1_000, burst = 1_000): EndpointPool =>
  new EndpointPool({ clientOptions: { timeoutMs: 2_000 }, gates: { qps, burst, spreadThrottled: (ms) => ms } });

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['performance', 'setTimeout', 'clearTimeout', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('EndpointPool', () => {
  it('gives one endpoint per URL and API key, whoever asks', () => {
    const p = pool();
    const first = p.endpoint(URL_A, KEY);
    expect(p.endpoint(URL_A, new SecretValue('the-api-key'))).toBe(first);
    const otherKey = p.endpoint(URL_A, new SecretValue('another-key'));
    const otherUrl = p.endpoint(URL_B, KEY);
    expect(new Set([first.id, otherKey.id, otherUrl.id]).size).toBe(3);
    expect(first.id).toMatch(/^[0-9a-f]{32}$/);
    expect(first.id).not.toContain('the-api-key');
  });

  it('keeps an endpoint in use and drops one idle for 15 minutes (same id, fresh gates)', () => {
    const p = pool();
    const used = p.endpoint(URL_A, KEY);
    const idle = p.endpoint(URL_B, KEY);
    for (let minute = 0; minute < 16; minute++) {
      vi.advanceTimersByTime(MINUTE);
      expect(p.endpoint(URL_A, KEY)).toBe(used);
    }
    const again = p.endpoint(URL_B, KEY);
    expect(again).not.toBe(idle);
    expect(again.id).toBe(idle.id);
  });

  it('keeps an idle endpoint while a call through it is in flight', async () => {
    const p = pool();
    const held = p.endpoint(URL_A, KEY);
    let answer: (result: ServiceResult) => void = () => undefined;
    const call = held.gates.call('UserGroupService t/own', ctx('t/a'), () => new Promise((resolve) => (answer = resolve)));
    vi.advanceTimersByTime(16 * MINUTE);
    p.endpoint(URL_B, KEY);
    expect(p.endpoint(URL_A, KEY)).toBe(held);
    answer(answered);
    await expect(call).resolves.toMatchObject({ ok: true });
  });

  it('keeps an idle endpoint while the bucket holds a slot for a key, until a minute after that slot', async () => {
    // One call an hour: the second key's slot is an hour away.
    const p = pool(1 / 3600, 1);
    const endpoint = p.endpoint(URL_A, KEY);
    await expect(endpoint.gates.call('d', ctx('t/a'), async () => answered)).resolves.toMatchObject({ ok: true });
    await expect(endpoint.gates.call('d', ctx('t/b'), async () => answered)).resolves.toMatchObject({ ok: false, deferred: { why: 'throttled' } });
    vi.advanceTimersByTime(30 * MINUTE);
    p.endpoint(URL_B, KEY);
    expect(p.endpoint(URL_A, KEY)).toBe(endpoint);
    // The key never came back for its slot (deleted meanwhile): a minute after it, the slot and then the endpoint go.
    vi.advanceTimersByTime(32 * MINUTE);
    p.endpoint(URL_B, KEY);
    expect(p.endpoint(URL_A, KEY)).not.toBe(endpoint);
  });
});
