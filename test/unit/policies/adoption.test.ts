// The adoption policy (policies/adoption.ts): what to do with a group the PUT found at the service.
import { describe, expect, it } from 'vitest';
import { adoptionIn, decideAdoption, keptTokenIsCurrent } from '../../../src/controller/policies/adoption.js';
import { sha256Hex } from '../../../src/controller/hash.js';

describe('decideAdoption: a group the service did not create for us, on an account this UserGroup never synced on', () => {
  it('created now, or synced here before: nothing to adopt, whatever the policy', () => {
    expect(decideAdoption(true, false, 'Refuse')).toEqual({ kind: 'none' });
    expect(decideAdoption(false, true, 'Refuse')).toEqual({ kind: 'none' });
  });

  it('not created: adopted as the policy says; no readable indicator: unknown, not an adoption (the policy keeps its safe side)', () => {
    for (const policy of ['Keep', 'Rotate', 'Refuse'] as const) {
      expect(decideAdoption(false, false, policy)).toEqual({ kind: 'adopt', policy });
      expect(decideAdoption(undefined, false, policy)).toEqual({ kind: 'unknown', policy });
      expect(decideAdoption(undefined, true, policy)).toEqual({ kind: 'none' });
    }
  });
});

describe('a group this namespace held all along, taken back (keptTokenIsCurrent): no adoption', () => {
  const digest = sha256Hex('tok-1');
  it.each([
    [{ tokenSha256: digest }, true, digest, true],
    [{ tokenSha256: digest }, false, digest, false],
    [{ tokenSha256: sha256Hex('tok-0') }, true, digest, false],
    [undefined, true, digest, false],
  ] as const)('kept %j, held before %s: current %s', (kept, heldBefore, current, expected) => {
    expect(keptTokenIsCurrent(kept, heldBefore, current)).toBe(expected);
  });

  it('a taken-back group is no adoption, whatever the policy', () => {
    for (const policy of ['Rotate', 'Keep', 'Refuse'] as const) {
      expect(decideAdoption(false, false, policy, true)).toEqual({ kind: 'none' });
      expect(decideAdoption(false, false, policy, false)).toEqual({ kind: 'adopt', policy });
    }
  });
});

describe("adoptionIn: on a fleet's account a group found for an id the rules give is the fleet's own", () => {
  it('Rotate becomes Keep in a fleet, whatever the role; Keep and Refuse stay; without a fleet nothing changes', () => {
    for (const role of ['Primary', 'Follower'] as const) {
      expect(adoptionIn({ role }, 'Rotate')).toBe('Keep');
      expect(adoptionIn({ role }, 'Keep')).toBe('Keep');
      expect(adoptionIn({ role }, 'Refuse')).toBe('Refuse');
    }
    expect(adoptionIn(undefined, 'Rotate')).toBe('Rotate');
    expect(adoptionIn(undefined, 'Refuse')).toBe('Refuse');
  });
});
