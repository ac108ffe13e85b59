import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  acrossShards,
  forgedHandled,
  metadataNoise,
  rbacSurface,
  refusedAdoption,
  restartHijack,
  rotationFlood,
  syncFlood,
  syncOthersId,
  rotationHijack,
  sleeper,
  squatter,
  takeover,
  unadmitted,
  urlSpelling,
  warningFlood,
  type AttackOutcome,
} from '../support/tenancy-attacks.js';
import {
  createTenancyWorld,
  createUserGroupAs,
  leakedTokens,
  secretTokenAs,
  serviceGroup,
  sha256,
  waitForReason,
  type TenancyWorld,
} from '../support/tenancy.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * Tenants are adversaries. Two tenant namespaces and an outsider, each acting as its own ServiceAccount under a
 * namespace editor's Role; one shared ClusterUserGroupService whose rules give each tenant "<namespace>.*", both
 * the contested "shared.*" and "legacy-<namespace>.*" that may not be adopted; the controller sharded over two
 * deployments (tenant 0 with the outsider, tenant 1 alone); every call counted at a proxy in front of the
 * simulator. Each attack is tried for real; it must achieve nothing, and the refused objects must cause no call
 * (AdoptionRefused: the one PUT that found the group).
 */

describe('tenancy: a namespace gets only the user groups it is entitled to', () => {
  let world: TenancyWorld;
  const outcomes: AttackOutcome[] = [];

  beforeAll(async () => {
    // Three tenants: the third shares a deployment with the second (sync flood: a bystander the flood could crowd out).
    world = await createTenancyWorld('ten', 3);
  }, 120_000);
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') console.error(`attack outcomes so far: ${JSON.stringify(outcomes, null, 2)}`);
  });
  afterAll(async () => {
    await ifAssigned(world)?.close();
  });

  const expectRefused = (o: AttackOutcome): void => {
    outcomes.push(o);
    expect(o.evidence, o.attack).toEqual([]);
    expect(o.refusedCalls, `service calls caused by refused objects (${o.attack})`).toBe(o.allowedRefusedCalls);
    expect(o.succeeded).toBe(false);
  };

  it('legitimate use: each tenant syncs its own ids, and its token lands in its own namespace only', async () => {
    const [a, b] = world.tenants;
    if (!a || !b) throw new Error('two tenants');
    for (const t of [a, b]) await createUserGroupAs(t, 'acme', { userGroupId: `${t.namespace}.acme`, name: `Acme of ${t.namespace}` });
    for (const t of [a, b]) {
      await waitForReason(world, t.namespace, 'acme', 'Synced');
      expect(serviceGroup(world, `${t.namespace}.acme`)?.tokenSha256).toBe(sha256((await secretTokenAs(t, 'acme')) ?? ''));
    }
    const claims = await world.env.claims(world.tenants.map((t) => t.namespace));
    expect(claims.map((c) => [c.spec.namespace, c.spec.userGroupId]).sort()).toEqual(
      [
        [a.namespace, `${a.namespace}.acme`],
        [b.namespace, `${b.namespace}.acme`],
      ].sort(),
    );
  });

  it('takeover of a group made outside the cluster, with an id of another id space: UserGroupIdNotAllowed, no call', async () => {
    const o = await takeover(world, world.tenants[1]!);
    expect(o.details['reason']).toBe('UserGroupIdNotAllowed');
    expect(o.details['message']).toMatch(/may claim ids starting with ".*\.", or ids starting with "shared\.", or ids starting with "legacy-.*\."$/);
    expectRefused(o);
  });

  it('a namespace no rule admits: NamespaceNotAllowed, no call', async () => {
    expectRefused(await unadmitted(world));
  });

  it('the sleeper: a duplicate in another namespace never wins, whatever is deleted and re-created in which order', async () => {
    expectRefused(await sleeper(world, world.tenants[0]!, world.tenants[1]!));
  });

  it('two deployments that each see one namespace, the same id created at once: exactly one wins, the other makes no call', async () => {
    expectRefused(await acrossShards(world, world.tenants[0]!, world.tenants[1]!));
  });

  it('the same account behind a differently spelled URL (UserGroupServices with one API key): the second namespace makes no call', async () => {
    expectRefused(await urlSpelling(world, world.tenants[0]!, world.tenants[1]!));
  });

  it('the squatter: once an admin gives the id to the legitimate team, the group is adopted and its token rotated, so the copy dies', async () => {
    const o = await squatter(world, world.tenants[1]!, world.tenants[0]!);
    expect(o.details['adoption']).toMatchObject({ tokenRotated: true });
    expectRefused(o);
  });

  it('rotation hijack: a planted token (sha256 annotation "fixed") is never sent; the tenant\'s own group is rotated instead', async () => {
    const o = await rotationHijack(world, world.tenants[1]!);
    expect(o.details['ownRotations']).toBe(1);
    expectRefused(o);
  });

  it('a forged rotation-handled mark does not suppress a requested rotation', async () => {
    expectRefused(await forgedHandled(world, world.tenants[0]!));
  });

  it('adoption refused by the rule: no token stored, one PUT in all (the one that found the group), none after a restart', async () => {
    const o = await refusedAdoption(world, world.tenants[1]!);
    expect(o.details['callsAtRefusal']).toBe(1);
    expect(o.details['message']).toContain('adoption: Refuse');
    expectRefused(o);
  });

  it("the tenant cannot touch claims, shared connections, namespace labels, status, or the operator's API key", async () => {
    expectRefused(await rbacSurface(world, world.tenants[0]!));
  });

  it('look-alike bookkeeping annotations and a stripped managed-by label change nothing: same token, still Synced', async () => {
    expectRefused(await metadataNoise(world, world.tenants[1]!));
  });

  it("a rotation flood (maxTokenAge 1s, a backdated issue time, a forged pending mark): the operator's floor holds, no rotation", async () => {
    const o = await rotationFlood(world, world.tenants[0]!);
    expect(o.details['rotations']).toBe(0);
    expectRefused(o);
  });

  it("restart targets: a platform workload that never consented and another namespace's consenting one stay untouched; the consent cannot be forged", async () => {
    const o = await restartHijack(world, world.tenants[0]!, world.tenants[1]!);
    // The tenant's own rotation is its right (1 asked, 1 done); nothing else moved.
    expect(o.details['ownRotations']).toBe(1);
    expectRefused(o);
  });

  it("a Warning flood: the flooding namespace's Events stay within its budget, another namespace's Warning is written, no call", async () => {
    const [a, b] = world.tenants;
    if (!a || !b) throw new Error('two tenants');
    const o = await warningFlood(world, a, world.outsider, b);
    expectRefused(o);
    expect(o.details['floodEvents']).toBeGreaterThan(0);
  });

  it('a sync-request flood: at most the namespace budget in PUTs; another tenant of the same deployment is answered at once with one PUT', async () => {
    const [, b, c] = world.tenants;
    if (!b || !c) throw new Error('three tenants');
    const o = await syncFlood(world, b, c);
    expectRefused(o);
    // The flood did ask for far more than it got, and got its burst: the budget, not a lack of requests, held it.
    expect(o.details['requestsWritten']).toBeGreaterThan(50);
    expect(o.details['floodPuts']).toBeGreaterThanOrEqual(5);
    expect(o.details['bystanderPuts']).toBe(1);
  });

  it('sync requests on a UserGroup naming an id another namespace holds: no call, nothing recorded', async () => {
    const [a, b] = world.tenants;
    if (!a || !b) throw new Error('two tenants');
    expectRefused(await syncOthersId(world, a, b));
  });

  it('afterwards: no token sits in a namespace that does not hold its group', async () => {
    expect(await leakedTokens(world)).toEqual([]);
  });
});
