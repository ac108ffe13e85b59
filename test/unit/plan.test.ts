import { describe, expect, it } from 'vitest';
import type { RotationDecision } from '../../src/controller/decide.js';
import { inspectSecret } from '../../src/controller/policies/token-secret.js';
import { decideAdoption } from '../../src/controller/usergroup/adopt.js';
import { mustReadData, wakeAfterSync } from '../../src/controller/usergroup/plan.js';
import { SEAL } from '../support/fixtures.js';
import { sealedSecret, userGroup } from '../support/reconciler-harness.js';

/** The reconcile's pure decisions beside decide.ts: when to read a Secret's data, when to come back, whether to adopt. */

const ug = userGroup();
if (!ug.spec.ok) throw new Error(ug.spec.error);
const spec = ug.spec.value;
const withData = inspectSecret(sealedSecret('tok-1'), ug.metadata, spec, SEAL);
const metadataOnly = inspectSecret({ ...sealedSecret('tok-1'), data: undefined }, ug.metadata, spec, SEAL);
const rotation = (kind: RotationDecision['kind']) => (): RotationDecision =>
  kind === 'none' ? { kind } : kind === 'record' ? { kind, value: 'r1' } : { kind, value: 'r1', scheduled: false };

describe('mustReadData: the token Secret as metadata only is believed unless a rotation needs the token or someone else wrote it', () => {
  it('a version this process wrote or checked, nothing to rotate: no read', () => {
    expect(mustReadData(metadataOnly, true, rotation('none'))).toBe(false);
    expect(mustReadData(metadataOnly, true, rotation('record'))).toBe(false);
  });

  it('a rotation (rotate, recover, settle) needs the held token', () => {
    for (const kind of ['rotate', 'recover', 'settle'] as const) expect(mustReadData(metadataOnly, true, rotation(kind))).toBe(true);
  });

  it("a version someone else wrote: read, whatever the rotation (and the rotation isn't even worked out)", () => {
    expect(
      mustReadData(metadataOnly, false, () => {
        throw new Error('not needed');
      }),
    ).toBe(true);
  });

  it('data already read, or nothing of ours to read: no read', () => {
    expect(mustReadData(withData, false, rotation('rotate'))).toBe(false);
    expect(mustReadData({ state: 'missing' }, false, rotation('rotate'))).toBe(false);
  });
});

describe('wakeAfterSync: the resync, the scheduled rotation unless a cap keeps a slot for it, and the slots', () => {
  it('nothing due: no wake-up', () => {
    expect(wakeAfterSync({ resyncAt: undefined, schedule: undefined, rotationSlotInMs: undefined, restartSlotInMs: undefined })).toBeUndefined();
  });

  it('the resync and the schedule are due times; a slot is a wait', () => {
    expect(wakeAfterSync({ resyncAt: 10, schedule: { dueAt: 20, value: 'scheduled:x' }, rotationSlotInMs: undefined, restartSlotInMs: 300 })).toEqual({
      dueAt: [10, 20],
      slotInMs: [300],
    });
  });

  it('a rotation held back by the cap comes back for its slot, not for its (past) due time', () => {
    expect(wakeAfterSync({ resyncAt: 10, schedule: { dueAt: 5, value: 'scheduled:x' }, rotationSlotInMs: 4_000, restartSlotInMs: undefined })).toEqual({
      dueAt: [10],
      slotInMs: [4_000],
    });
  });
});

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
