import { afterEach, describe, expect, it } from 'vitest';
import { AccountRateLimit } from '../../src/sim/account-limit.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';

/**
 * The simulator's per-account rate limit: at most N calls of one API key's team in any 60 s, a 429 with the
 * Retry-After that frees the next call beyond it, nothing applied; every other team unaffected.
 */

describe('the account rate limit (sliding 60 s window per team)', () => {
  it('admits N calls in a window, answers the wait until the oldest leaves it, then admits again', () => {
    let now = 0;
    const limit = new AccountRateLimit(() => now);
    for (let i = 0; i < 3; i++, now += 10_000) expect(limit.take(1, 3)).toBe(0);
    // now = 30 s: the first call (at 0) leaves the window at 60 s.
    expect(limit.take(1, 3)).toBe(30);
    expect(limit.take(2, 3)).toBe(0);
    now = 60_000;
    expect(limit.take(1, 3)).toBe(0);
    expect(limit.take(1, 3)).toBe(10);
  });

  it('0 means no limit', () => {
    const limit = new AccountRateLimit(() => 0);
    for (let i = 0; i < 1_000; i++) expect(limit.take(1, 0)).toBe(0);
  });
});

describe('the simulator with accountRequestsPerMinute', () => {
  let sim: Simulator | undefined;
  afterEach(async () => {
    await sim?.stop();
  });

  it('429 with Retry-After beyond the limit, not applied, counted as account_rate_limited; other keys unaffected', async () => {
    sim = await startSimulator({ apiKeys: ['key-a', 'key-b'], faults: { accountRequestsPerMinute: 2 } });
    const put = (key: string, id: string): Promise<Response> =>
      fetch(`${sim?.url ?? ''}/api/user`, {
        method: 'PUT',
        headers: { authorization: `Token ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user_group_id: id, name: id }),
      });
    expect((await put('key-a', 'g1')).status).toBe(200);
    expect((await put('key-a', 'g2')).status).toBe(200);
    const limited = await put('key-a', 'g3');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(59);
    expect((await put('key-b', 'g1')).status).toBe(200);
    expect(sim.groups('key-a').map((g) => g.userGroupId)).toEqual(['g1', 'g2']);
    expect(sim.stats('key-a').operations.upsert).toMatchObject({ created: 2, account_rate_limited: 1 });
  });
});
