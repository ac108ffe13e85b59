import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllControllers } from '../support/controller-process.js';
import { ifAssigned } from '../support/teardown.js';
import { catalogue, type AttackOutcome } from '../support/tenancy-attacks.js';
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
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

/**
 * 8. Tenancy attacks. Tenants as real identities (ServiceAccount tokens under a namespace editor's Role) run
 * every attack of the catalogue (test/support/tenancy-attacks.ts) against a controller sharded over two
 * deployments (child processes), while each tenant also uses the operator legitimately. Counted: attacks tried,
 * attacks that achieved anything, service calls caused by refused objects (the rules allow exactly one: the PUT
 * that finds a group a rule may not adopt), tokens that ended up in a namespace that does not hold their group.
 */

const ROUNDS = sized(3, 1);
const TENANTS = sized(4, 2);

describe('8. tenancy attacks', () => {
  let world: TenancyWorld;

  beforeAll(async () => {
    world = await createTenancyWorld('rel-ten', TENANTS, 'process');
  }, 180_000);
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(world)?.close();
  });

  it(`${ROUNDS} round(s) of every attack by ${TENANTS} tenants and an outsider: nothing achieved, no call for a refused object, no token out of place`, async () => {
    const started = Date.now();
    // Legitimate use first, and it must keep working throughout.
    for (const t of world.tenants) await createUserGroupAs(t, 'own', { userGroupId: `${t.namespace}.own`, name: `Own of ${t.namespace}` });
    for (const t of world.tenants) await waitForReason(world, t.namespace, 'own', 'Synced');

    const outcomes: AttackOutcome[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Pairs of tenants: (0,1) crosses the two deployments; (2,3) and on share one.
      for (let i = 0; i + 1 < world.tenants.length; i += 2) {
        const pair: TenancyWorld = { ...world, tenants: [world.tenants[i]!, world.tenants[i + 1]!] };
        for (const [, attack] of catalogue(pair)) outcomes.push(await attack(pair));
      }
    }

    let tokensLost = 0;
    for (const t of world.tenants) {
      if (serviceGroup(world, `${t.namespace}.own`)?.tokenSha256 !== sha256((await secretTokenAs(t, 'own')) ?? '')) tokensLost++;
      await waitForReason(world, t.namespace, 'own', 'Synced');
    }
    const leaks = await leakedTokens(world);
    const succeeded = outcomes.filter((o) => o.succeeded);
    const refusedCalls = outcomes.reduce((n, o) => n + o.refusedCalls, 0);
    const allowedCalls = outcomes.reduce((n, o) => n + o.allowedRefusedCalls, 0);
    // Requested rotations (hijack, forged mark) must each have run exactly once on the tenant's own group.
    const rotations = outcomes.flatMap((o) => {
      const own = o.details['ownRotations'];
      const pair = o.details['rotations'];
      if (typeof own === 'number') return [own];
      if (Array.isArray(pair) && typeof pair[0] === 'number' && typeof pair[1] === 'number') return [pair[1] - pair[0]];
      return [];
    });
    const duplicateRotations = rotations.reduce((n, r) => n + Math.max(0, r - 1), 0);
    const kinds = [...new Set(outcomes.map((o) => o.attack))];
    const ownCalls = outcomes.reduce((n, o) => n + (typeof o.details['callsOnOwnGroup'] === 'number' ? o.details['callsOnOwnGroup'] : 0), 0);

    recordRow({
      scenario: '8. tenancy attacks',
      objects: outcomes.length + world.tenants.length,
      faults: `${outcomes.length} attacks tried (${kinds.length} kinds × ${ROUNDS} round(s) × ${Math.floor(world.tenants.length / 2)} tenant pair(s)) by ${world.tenants.length} tenants and an outsider, as ServiceAccounts under a namespace editor's Role`,
      converged: succeeded.length === 0 && leaks.length === 0 && tokensLost === 0,
      tokensLost,
      duplicateRotations,
      wallMs: Date.now() - started,
      notes:
        `attacks succeeded: ${succeeded.length}${succeeded.length ? ` (${succeeded.map((o) => `${o.attack}: ${o.evidence.join(', ')}`).join('; ')})` : ''}; ` +
        `service calls caused by refused objects: ${refusedCalls} (the rules allow ${allowedCalls}: the one PUT that finds a group under adoption: Refuse); ` +
        `tokens in a namespace that does not hold their group: ${leaks.length}; calls on the tenants' own groups caused by their metadata edits: ${ownCalls}; requested rotations on the tenants' own groups ran ${rotations.length}/${rotations.length} exactly once; ` +
        `kinds: ${kinds.join(' · ')}; controller sharded over 2 deployments (child processes)`,
    });

    expect(succeeded.map((o) => `${o.attack}: ${o.evidence.join(', ')} (${o.refusedCalls} calls)`)).toEqual([]);
    expect(refusedCalls).toBe(allowedCalls);
    expect(leaks).toEqual([]);
    expect(tokensLost).toBe(0);
    expect(duplicateRotations).toBe(0);
  });
});
