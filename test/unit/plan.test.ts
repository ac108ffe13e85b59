import { describe, expect, it } from 'vitest';
import type { RotationDecision } from '../../src/controller/policies/rotation.js';
import { inspectSecret } from '../../src/controller/policies/token-secret.js';
import { mustReadData } from '../../src/controller/usergroup/plan.js';
import { type Progress, waitForSlot, waitsForSlot, wakeAfterSync } from '../../src/controller/usergroup-step.js';
import { SEAL } from '../support/fixtures.js';
import { sealedSecret, userGroup } from '../support/reconciler-harness.js';

/** The plan step's own pure decisions (beside policies/): when to read a Secret's data, when to come back. */

const ug = userGroup();
if (!ug.spec.ok) throw new Error(ug.spec.error);
const spec = ug.spec.value;
const withData = inspectSecret(sealedSecret('tok-1'), ug.metadata, spec, SEAL);
const metadataOnly = inspectSecret({ ...sealedSecret('tok-1'), data: undefined }, ug.metadata, spec, SEAL);
const rotation = (kind: RotationDecision['kind']) => (): RotationDecision =>
  kind === 'none'
    ? { kind }
    : kind === 'record'
      ? { kind, value: 'r1' }
      : kind === 'follow'
        ? { kind, value: 'r1', scheduled: false, since: 0, look: true, nextLookAt: 0 }
        : { kind, value: 'r1', scheduled: false };

describe('mustReadData: the token Secret as metadata only is believed unless a rotation needs the token or someone else wrote it', () => {
  it('a version this process wrote or checked, nothing to rotate: no read', () => {
    expect(mustReadData(metadataOnly, true, rotation('none'))).toBe(false);
    expect(mustReadData(metadataOnly, true, rotation('record'))).toBe(false);
  });

  it('a rotation (rotate, recover, settle, follow) needs the held token', () => {
    for (const kind of ['rotate', 'recover', 'settle', 'follow'] as const) expect(mustReadData(metadataOnly, true, rotation(kind))).toBe(true);
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
    expect(wakeAfterSync({ resyncAt: undefined, schedule: undefined, slot: undefined })).toBeUndefined();
  });

  it('the resync and the schedule are due times; a slot is a wait', () => {
    expect(wakeAfterSync({ resyncAt: 10, schedule: { dueAt: 20, value: 'scheduled:x' }, slot: { inMs: 300, why: ['restart'] } })).toEqual({
      dueAt: [10, 20],
      slotInMs: [300],
    });
  });

  it('a rotation held back by the cap comes back for its slot, not for its (past) due time', () => {
    expect(wakeAfterSync({ resyncAt: 10, schedule: { dueAt: 5, value: 'scheduled:x' }, slot: { inMs: 4_000, why: ['rotation'] } })).toEqual({
      dueAt: [10],
      slotInMs: [4_000],
    });
  });
});

describe('waitForSlot: the slots a reconcile waits for, as one value', () => {
  const progress: Progress = {
    token: undefined,
    group: undefined,
    book: { handled: undefined, pending: undefined },
    rotatedAt: undefined,
    adopted: undefined,
    secret: undefined,
  };

  it('the earliest slot wins, whichever order they come in; everything that waits is kept', () => {
    const both = waitForSlot(waitForSlot(progress, 'sync-request', 6_000), 'rotation', 4_000);
    expect(both.wake).toEqual({ inMs: 4_000, why: ['sync-request', 'rotation'] });
    expect(waitForSlot(both, 'restart', 9_000).wake?.inMs).toBe(4_000);
    expect(waitsForSlot(both, 'rotation')).toBe(true);
    expect(waitsForSlot(both, 'restart')).toBe(false);
    expect(waitsForSlot(progress, 'rotation')).toBe(false);
  });

  it('a rotation that waits for a later slot than a sync request still keeps its schedule out of the wake-up', () => {
    const both = waitForSlot(waitForSlot(progress, 'sync-request', 100), 'rotation', 4_000);
    expect(wakeAfterSync({ resyncAt: 10, schedule: { dueAt: 5, value: 'scheduled:x' }, slot: both.wake })).toEqual({ dueAt: [10], slotInMs: [100] });
  });
});
