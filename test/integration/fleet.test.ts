// Two clusters on one account, for real (test/support/fleet.ts): a cluster joins without a POST and with the same
// tokens; a rotation Git asks for in both happens once and reaches both; the follower never rotates, on request or
// on deletion; the roles switch with no service call; a tenant of either cluster still gets nothing the rules do not
// give it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { startFleet, secretTokenSha, type Fleet } from '../support/fleet.js';
import { eventually } from '../support/kube.js';
import { createUserGroupAs, readSecretAs, readyOf, tenantIdentity, userGroupIn } from '../support/tenancy.js';

const GROUPS = Array.from({ length: 5 }, (_, i) => `g${i}`);
const specOf = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ userGroupId: `fleet-${name}`, name, ...extra });
/** Fast follow-ups: the periodic resync out of the way (10 h), so every PUT counted here is the feature's. */
const ARGS = ['--service-qps', '50', '--service-burst', '50'];

const calls = (fleet: Fleet): { puts: number; posts: number } => {
  const { upsert, rotate } = fleet.sim.stats(fleet.apiKey).operations;
  return { puts: Object.values(upsert).reduce((a, b) => a + b, 0), posts: Object.values(rotate).reduce((a, b) => a + b, 0) };
};
const totalRotations = (fleet: Fleet): number => Object.values(fleet.rotations()).reduce((a, b) => a + b, 0);

describe('two clusters on one account (ClusterUserGroupService spec.fleet)', () => {
  let fleet: Fleet;
  let evil: string;

  beforeAll(async () => {
    // Cluster a made the groups before there was a fleet: the account's only cluster.
    fleet = await startFleet('fleet', {
      tenants: (ns) => [
        { namespaces: [ns], userGroupIds: { prefix: 'fleet-' }, adoption: 'Rotate' },
        { namespaces: [`${ns}-evil`], userGroupIds: { prefix: 'evil-' }, adoption: 'Rotate' },
      ],
    });
    evil = `${fleet.a.env.namespace}-evil`;
    await fleet.a.startController(ARGS);
    for (const name of GROUPS) await fleet.a.env.createUserGroup(name, specOf(name, { deletionPolicy: 'Rotate' }));
    for (const name of GROUPS) await fleet.a.env.waitForReady(name);
  }, 240_000);

  afterAll(async () => {
    await fleet.close();
  });

  it('a cluster joins as a follower: 0 POSTs, and every Secret holds the token cluster a holds; a stays the primary with no call', async () => {
    await fleet.a.setRole('Primary');
    await fleet.b.setRole('Follower');
    const before = calls(fleet);
    const rotationsBefore = totalRotations(fleet);
    const started = Date.now();
    await fleet.b.startController(ARGS, [evil]);
    for (const name of GROUPS) await fleet.b.env.createUserGroup(name, specOf(name, { deletionPolicy: 'Rotate' }));
    for (const name of GROUPS) await fleet.b.env.waitForReady(name);
    process.stderr.write(`[fleet] 5 groups joined in ${Date.now() - started} ms\n`);
    const after = calls(fleet);
    expect(after.posts - before.posts).toBe(0);
    expect(totalRotations(fleet)).toBe(rotationsBefore);
    // One PUT per group, the join's: the role set on a (its ClusterUserGroupService changed) made no call.
    expect(after.puts - before.puts).toBe(GROUPS.length);
    for (const name of GROUPS) {
      const sha = fleet.serviceTokenSha(`fleet-${name}`);
      expect(await secretTokenSha(fleet.b.env, name)).toBe(sha);
      expect(await secretTokenSha(fleet.a.env, name)).toBe(sha);
      expect((await fleet.b.env.getUserGroup(name)).status?.adoption).toMatchObject({ tokenRotated: false });
    }
  });

  it('a group the follower makes first (it joined before the primary synced it): the primary keeps its token, 0 POSTs', async () => {
    const before = calls(fleet);
    await fleet.b.env.createUserGroup('early', specOf('early'));
    await fleet.b.env.waitForReady('early');
    await fleet.a.env.createUserGroup('early', specOf('early'));
    const adopted = await fleet.a.env.waitForReady('early');
    expect(adopted.status?.adoption).toMatchObject({ tokenRotated: false });
    expect(calls(fleet)).toEqual({ puts: before.puts + 2, posts: before.posts });
    const sha = fleet.serviceTokenSha('fleet-early');
    expect(await secretTokenSha(fleet.a.env, 'early')).toBe(sha);
    expect(await secretTokenSha(fleet.b.env, 'early')).toBe(sha);
  });

  it('a rotation Git asks for in both clusters: one POST per group fleet-wide, and both Secrets hold the new token', async () => {
    const rotationsBefore = fleet.rotations();
    const value = new Date().toISOString();
    const started = Date.now();
    await Promise.all(
      [fleet.a, fleet.b].flatMap((c) => GROUPS.map((name) => c.env.patchUserGroup(name, { metadata: { annotations: { [ROTATE_ANNOTATION]: value } } }))),
    );
    const followed: number[] = [];
    for (const name of GROUPS) {
      await eventually(
        `${name}: both clusters hold the rotated token`,
        async () => {
          const sha = fleet.serviceTokenSha(`fleet-${name}`);
          const [a, b] = await Promise.all([secretTokenSha(fleet.a.env, name), secretTokenSha(fleet.b.env, name)]);
          return (fleet.rotations()[`fleet-${name}`] ?? 0) > (rotationsBefore[`fleet-${name}`] ?? 0) && a === sha && b === sha ? true : undefined;
        },
        60_000,
      );
      followed.push(Date.now() - started);
    }
    process.stderr.write(`[fleet] Git-requested rotation in both clusters reached both within ${Math.max(...followed)} ms\n`);
    for (const name of GROUPS) expect((fleet.rotations()[`fleet-${name}`] ?? 0) - (rotationsBefore[`fleet-${name}`] ?? 0)).toBe(1);
    for (const name of GROUPS) {
      await eventually('both record the request handled', async () => {
        const [a, b] = await Promise.all([fleet.a.env.getUserGroup(name), fleet.b.env.getUserGroup(name)]);
        return a.status?.rotation?.lastHandledRequest === value && b.status?.rotation?.lastHandledRequest === value ? true : undefined;
      });
      const b = (await fleet.b.env.getUserGroup(name)).status?.rotation as { lastRevoked?: { by?: string } } | undefined;
      expect(b?.lastRevoked?.by).toBe('AnotherHolder');
    }
    const events = (await fleet.b.env.eventsFor('g0')).map((e) => e.reason);
    expect(events).toContain('TokenRotatedElsewhere');
    expect(events).not.toContain('TokenRotated');
  });

  it('a rotation asked in the follower alone is not done there: no POST, an Event says the primary rotates', async () => {
    const before = calls(fleet);
    const sha = fleet.serviceTokenSha('fleet-g1');
    await fleet.b.env.patchUserGroup('g1', { metadata: { annotations: { [ROTATE_ANNOTATION]: 'only-in-b' } } });
    await eventually(
      'the follower said it leaves the rotation to the primary',
      async () => ((await fleet.b.env.eventsFor('g1')).some((e) => e.reason === 'RotationLeftToPrimary') ? true : undefined),
      30_000,
    );
    expect(calls(fleet).posts).toBe(before.posts);
    expect(fleet.serviceTokenSha('fleet-g1')).toBe(sha);
    expect((await fleet.b.env.getUserGroup('g1')).status?.rotation?.lastHandledRequest).not.toBe('only-in-b');
    // Withdrawn: left in place, the request would be done by b once it is the primary.
    await fleet.b.env.patchUserGroup('g1', { metadata: { annotations: { [ROTATE_ANNOTATION]: null } } });
  });

  it('a tenant of the follower asking for an id the rules do not give its namespace gets nothing and causes no call', async () => {
    await fleet.b.env.core.createNamespace({ body: { metadata: { name: evil } } });
    const tenant = await tenantIdentity(evil, fleet.b.env.kc);
    const before = calls(fleet);
    await createUserGroupAs(tenant, 'steal', { userGroupId: 'fleet-g2', name: 'steal' });
    await eventually(
      'refused',
      async () => (readyOf(await userGroupIn(fleet.b, evil, 'steal'))?.reason === 'UserGroupIdNotAllowed' ? true : undefined),
      30_000,
    );
    expect(calls(fleet)).toEqual(before);
    expect(await readSecretAs(tenant, 'steal')).toBeUndefined();
  });

  it('the roles switch with no service call; the follower (a, now) deletes its UserGroups, deletionPolicy Rotate, without a POST', async () => {
    const before = calls(fleet);
    await fleet.a.setRole('Follower');
    await fleet.b.setRole('Primary');
    // Long enough for both controllers to see the change and requeue what they would.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(calls(fleet)).toEqual(before);
    const shas = GROUPS.map((name) => fleet.serviceTokenSha(`fleet-${name}`));
    for (const name of [...GROUPS, 'early']) await fleet.a.env.deleteUserGroup(name);
    await eventually(
      'cluster a decommissioned its UserGroups',
      async () => {
        const left = await Promise.all([...GROUPS, 'early'].map((name) => userGroupIn(fleet.a, fleet.a.env.namespace, name)));
        return left.every((ug) => ug === undefined) ? true : undefined;
      },
      60_000,
    );
    expect(calls(fleet).posts).toBe(before.posts);
    expect(GROUPS.map((name) => fleet.serviceTokenSha(`fleet-${name}`))).toEqual(shas);
    for (const name of GROUPS) expect(await secretTokenSha(fleet.b.env, name)).toBe(fleet.serviceTokenSha(`fleet-${name}`));
  });
});

describe("two controllers at three times the account's rate (the simulator enforcing 20 calls a minute)", () => {
  let fleet: Fleet;
  const NAMES = Array.from({ length: 6 }, (_, i) => `r${i}`);
  afterAll(async () => {
    await fleet.close();
  });

  it('every group converges in both clusters, one POST per rotation, 0 tokens lost; 429s slow them without a failure', async () => {
    fleet = await startFleet('fleetrate', { roles: { a: 'Primary', b: 'Follower' } });
    fleet.sim.setFaults({ accountRequestsPerMinute: 20 });
    // Each cluster alone may send 30 a minute (one every 2 s, 5 at once): together three times what the account
    // allows. The join (12 PUTs) fits; the rotation (a POST per group in a, a follow PUT per group in b: 12 more,
    // each cluster's 6 within 12 s at its own rate) goes past the limit whatever the machine's speed.
    const rate = ['--service-qps', '0.5', '--service-burst', '5'];
    const started = Date.now();
    await Promise.all([fleet.a.startController(rate), fleet.b.startController(rate)]);
    await Promise.all([fleet.a, fleet.b].flatMap((c) => NAMES.map((n) => c.env.createUserGroup(n, specOf(n)))));
    for (const c of [fleet.a, fleet.b]) for (const n of NAMES) await c.env.waitForReady(n, 'Synced', 'True', 90_000);
    const value = new Date().toISOString();
    await Promise.all(
      [fleet.a, fleet.b].flatMap((c) => NAMES.map((n) => c.env.patchUserGroup(n, { metadata: { annotations: { [ROTATE_ANNOTATION]: value } } }))),
    );
    for (const n of NAMES) {
      await eventually(
        `${n}: rotated once, both Secrets hold the token`,
        async () => {
          const sha = fleet.serviceTokenSha(`fleet-${n}`);
          const held = await Promise.all([secretTokenSha(fleet.a.env, n), secretTokenSha(fleet.b.env, n)]);
          return (fleet.rotations()[`fleet-${n}`] ?? 0) === 1 && held.every((h) => h === sha) ? true : undefined;
        },
        150_000,
      );
    }
    const limited = fleet.sim.stats(fleet.apiKey).operations.upsert.account_rate_limited + fleet.sim.stats(fleet.apiKey).operations.rotate.account_rate_limited;
    process.stderr.write(`[fleet] two controllers at three times the rate: converged in ${Date.now() - started} ms, ${limited} 429s\n`);
    expect(limited).toBeGreaterThan(0);
    for (const n of NAMES) expect(fleet.rotations()[`fleet-${n}`]).toBe(1);
    for (const c of [fleet.a, fleet.b]) {
      for (const n of NAMES) {
        const ug = await c.env.getUserGroup(n);
        expect(ug.status?.conditions?.find((x) => x.type === 'Ready')?.status).toBe('True');
        expect((await c.env.eventsFor(n)).filter((e) => e.type === 'Warning').map((e) => e.reason)).toEqual([]);
      }
    }
  }, 300_000);
});

describe('maxTokenAge in a fleet: the primary rotates at the schedule every cluster derives, the follower follows', () => {
  let fleet: Fleet;
  const NAMES = ['s0', 's1', 's2'];
  afterAll(async () => {
    await fleet.close();
  });

  it('each due time: one POST fleet-wide, none by the follower, and the follower holds the new token seconds later', async () => {
    fleet = await startFleet('fleetsched', { roles: { a: 'Primary', b: 'Follower' } });
    const args = ['--min-token-age', '1s', '--scheduled-rotations-per-minute', '600', ...ARGS];
    await fleet.a.startController(args);
    const follower = await fleet.b.startController(args);
    const spec = (n: string): Record<string, unknown> => specOf(n, { rotation: { maxTokenAge: '20s' } });
    for (const n of NAMES) await fleet.a.env.createUserGroup(n, spec(n));
    for (const n of NAMES) await fleet.a.env.waitForReady(n);
    for (const n of NAMES) await fleet.b.env.createUserGroup(n, spec(n));
    for (const n of NAMES) await fleet.b.env.waitForReady(n);
    // Both clusters show rotation times of the fleet schedule: the id's, maxTokenAge apart (the same one, unless a
    // token was obtained on either side of one of them: the follower's join a moment after the primary's sync).
    for (const n of NAMES) {
      const [a, b] = await Promise.all([fleet.a.env.getUserGroup(n), fleet.b.env.getUserGroup(n)]);
      const apart = Date.parse(b.status?.rotation?.nextRotationTime ?? '') - Date.parse(a.status?.rotation?.nextRotationTime ?? '');
      expect(Number.isInteger(apart / 20_000)).toBe(true);
    }
    const follows: number[] = [];
    for (const n of NAMES) {
      let rotatedAt = 0;
      await eventually(
        `${n}: rotated by its schedule, and the follower holds the new token`,
        async () => {
          if ((fleet.rotations()[`fleet-${n}`] ?? 0) < 1) return undefined;
          rotatedAt ||= Date.now();
          const sha = fleet.serviceTokenSha(`fleet-${n}`);
          return (await secretTokenSha(fleet.b.env, n)) === sha ? true : undefined;
        },
        60_000,
        250,
      );
      follows.push(Date.now() - rotatedAt);
    }
    process.stderr.write(`[fleet] scheduled rotation: the follower held the new token ${follows.join(', ')} ms after the primary's POST was seen\n`);
    const { rotate } = fleet.sim.stats(fleet.apiKey).operations;
    // Every POST rotated (none refused: no two clusters rotated against each other), and the follower made none.
    expect(Object.values(rotate).reduce((x, y) => x + y, 0)).toBe(Object.values(fleet.rotations()).reduce((x, y) => x + y, 0));
    expect(follower.logs.filter((l) => l.json?.['msg'] === 'token rotated')).toEqual([]);
  }, 180_000);
});
