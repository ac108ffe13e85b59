// The restart policy (policies/restart.ts): what a new token does to spec.rolloutRestartTargets.
import { describe, expect, it } from 'vitest';
import { parseWorkload, type ObservedWorkload } from '../../../src/api/workload.js';
import { decideRestarts, workloadAction } from '../../../src/controller/policies/restart.js';

const TARGETS = [{ kind: 'Deployment', name: 'web' }] as const;
const T1 = '2026-11-22T01:00:00.000Z';
const T2 = '2026-11-22T01:00:00.400Z';

describe('decideRestarts: once per token, named by its issue time', () => {
  it('no targets: nothing, whatever the token did', () => {
    expect(decideRestarts({ targets: [], restartedFor: T1, foundIssuedAt: T1, issuedAt: T2 })).toEqual({ kind: 'none' });
  });

  it('restarted for this token already (a spec-only sync, a resync, a repeat after a crash): nothing', () => {
    expect(decideRestarts({ targets: TARGETS, restartedFor: T1, foundIssuedAt: T1, issuedAt: T1 })).toEqual({ kind: 'none' });
  });

  it('a new token since the last restart: restart, even one a few hundred milliseconds newer', () => {
    expect(decideRestarts({ targets: TARGETS, restartedFor: T1, foundIssuedAt: T1, issuedAt: T2 })).toEqual({ kind: 'do', issuedAt: T2 });
    // The token changed in an earlier reconcile whose restarts did not finish: still owed.
    expect(decideRestarts({ targets: TARGETS, restartedFor: T1, foundIssuedAt: T2, issuedAt: T2 })).toEqual({ kind: 'do', issuedAt: T2 });
  });

  it('targets listed for the first time: their pods run this token; record it, restart nothing', () => {
    expect(decideRestarts({ targets: TARGETS, restartedFor: undefined, foundIssuedAt: T1, issuedAt: T1 })).toEqual({ kind: 'record', issuedAt: T1 });
    // A first sync (no token before): the pods waiting for the Secret start with it.
    expect(decideRestarts({ targets: TARGETS, restartedFor: undefined, foundIssuedAt: undefined, issuedAt: T2 })).toEqual({
      kind: 'record',
      issuedAt: T2,
    });
  });

  it('targets listed in the same change as a rotation: the rotation restarts them', () => {
    expect(decideRestarts({ targets: TARGETS, restartedFor: undefined, foundIssuedAt: T1, issuedAt: T2 })).toEqual({ kind: 'do', issuedAt: T2 });
  });
});

describe('workloadAction: the owner of the workload decides', () => {
  const workload = (over: Partial<ObservedWorkload> = {}): ObservedWorkload => ({ resourceVersion: '7', consentsTo: ['acme'], restartedFor: {}, ...over });

  it('restarts a workload that names the UserGroup, unless it was restarted for this token', () => {
    expect(workloadAction(workload(), 'acme', T2)).toBe('restart');
    expect(workloadAction(workload({ restartedFor: { acme: T1 } }), 'acme', T2)).toBe('restart');
    expect(workloadAction(workload({ restartedFor: { acme: T2 } }), 'acme', T2)).toBe('current');
    // Another UserGroup's mark is its own business.
    expect(workloadAction(workload({ consentsTo: ['acme', 'other'], restartedFor: { other: T2 } }), 'acme', T2)).toBe('restart');
  });

  it('never one whose owner did not name it, and says so for one that does not exist', () => {
    expect(workloadAction(workload({ consentsTo: [] }), 'acme', T2)).toBe('not-allowed');
    expect(workloadAction(workload({ consentsTo: ['acme-2', 'xacme'] }), 'acme', T2)).toBe('not-allowed');
    expect(workloadAction(undefined, 'acme', T2)).toBe('missing');
  });
});

describe('parseWorkload: the consent and our marks, nothing else', () => {
  it('reads the consent list and the pod-template marks', () => {
    const parsed = parseWorkload({
      metadata: { resourceVersion: '12', annotations: { 'usergroup.dev/restart-on-token-change': ' acme, other ,,' } },
      spec: {
        template: {
          metadata: { annotations: { 'restart.usergroup.dev/acme': T1, 'kubectl.kubernetes.io/restartedAt': 'x' } },
          spec: { containers: [{ name: 'c', env: [{ name: 'SECRET', value: 'not kept' }] }] },
        },
      },
    });
    expect(parsed).toEqual({ ok: true, value: { resourceVersion: '12', consentsTo: ['acme', 'other'], restartedFor: { acme: T1 } } });
  });

  it('a workload without annotations consents to nothing', () => {
    expect(parseWorkload({ metadata: { resourceVersion: '1' }, spec: {} })).toEqual({
      ok: true,
      value: { resourceVersion: '1', consentsTo: [], restartedFor: {} },
    });
    expect(parseWorkload({ spec: {} }).ok).toBe(false);
  });
});
