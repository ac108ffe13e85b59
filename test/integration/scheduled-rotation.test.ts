import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROTATION_PENDING_ANNOTATION, TOKEN_ISSUED_AT_ANNOTATION } from '../../src/api/constants.js';
import { killAllControllers, msgIs, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { TestEnv } from '../support/operator.js';
import { eventually } from '../support/kube.js';
import { waitInSync } from '../support/service-sync.js';
import { ifAssigned } from '../support/teardown.js';
import { SecretWatch } from '../reliability/support/churn.js';

/*
 * Scheduled rotation (spec.rotation.maxTokenAge) against the real apiserver, with the controller as a child
 * process: it rotates once per period, and a SIGKILL at each step of a rotation (intent recorded, POST answered,
 * new token stored) neither skips nor repeats one. The maximum age is a few seconds (--min-token-age 1s lowers the
 * operator's floor): time is real here.
 */

const MAX_AGE_S = 6;
const ARGS = ['--min-token-age', '1s', '--scheduled-rotations-per-minute', '600'];

afterAll(killAllControllers);

/** The token issue times the Secret has recorded, in order, as the watch saw each write. */
function issueTimes(watch: SecretWatch, name: string): string[] {
  return watch.events
    .filter((e) => e.name === name && e.type !== 'DELETED')
    .map((e) => e.annotations[TOKEN_ISSUED_AT_ANNOTATION])
    .filter((t, i, all): t is string => t !== undefined && t !== all[i - 1]);
}

const gapsS = (times: string[]): number[] => times.slice(1).map((t, i) => (Date.parse(t) - Date.parse(times[i] ?? t)) / 1000);

describe('scheduled rotation (spec.rotation.maxTokenAge)', () => {
  let env: TestEnv;
  let watch: SecretWatch;
  beforeAll(async () => {
    env = await TestEnv.create('schedule');
    watch = await SecretWatch.start(env);
  });
  afterAll(async () => {
    watch.stop();
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  it('rotates once per period, each token exactly once, and says when the next one falls due', async () => {
    const c = env.spawnController(ARGS);
    await waitLog(c, 'workers started', msgIs('workers started'));
    await env.createUserGroup('periodic', { userGroupId: 'periodic-1', name: 'Periodic', rotation: { maxTokenAge: `${MAX_AGE_S}s` } });
    await waitInSync(env, 'periodic', 'periodic-1');
    const observeS = 3.5 * MAX_AGE_S;
    await sleep(observeS * 1000);
    const { ug } = await waitInSync(env, 'periodic', 'periodic-1');

    const times = issueTimes(watch, 'periodic');
    const rotations = env.sim.stats(env.apiKey).rotationsByUserGroupId['periodic-1'] ?? 0;
    console.log(`[scheduled rotation] ${rotations} rotations in ${observeS} s at maxTokenAge ${MAX_AGE_S}s; issue-time gaps ${gapsS(times).join(', ')} s`);
    // Every rotation gave a new token, recorded once: tokens = rotations + the first.
    expect(times.length).toBe(rotations + 1);
    expect(rotations).toBeGreaterThanOrEqual(3);
    expect(rotations).toBeLessThanOrEqual(4);
    // Never early (0.9 × the age, less the whole-second timestamps), never more than a moment late.
    for (const gap of gapsS(times)) {
      expect(gap).toBeGreaterThanOrEqual(0.9 * MAX_AGE_S - 1);
      expect(gap).toBeLessThanOrEqual(MAX_AGE_S + 2);
    }
    // A POST with a token the service no longer knows would be a second rotation of one token.
    expect(env.calls().rotate.unknown_token).toBe(0);
    expect(env.calls().rotate.ok).toBe(rotations);
    const issued = Date.parse(ug.status?.rotation?.tokenIssuedTime ?? '');
    const next = Date.parse(ug.status?.rotation?.nextRotationTime ?? '');
    expect(ug.status?.rotation?.tokenIssuedTime).toBe(times.at(-1));
    expect(next - issued).toBeGreaterThanOrEqual(0.9 * MAX_AGE_S * 1000 - 1000);
    expect(next - issued).toBeLessThanOrEqual(MAX_AGE_S * 1000);
    await env.patchUserGroup('periodic', { spec: { suspend: true } });
  });

  it('a SIGKILL at each step (intent recorded, POST answered, new token stored) neither skips nor repeats a rotation', async () => {
    const name = 'crashy';
    const id = 'crashy-1';
    // Only this test's controllers (without leader election, two at once would race each other).
    await killAllControllers();
    let c: ControllerProcess = env.spawnController(ARGS);
    await waitLog(c, 'workers started', msgIs('workers started'));
    await env.createUserGroup(name, { userGroupId: id, name: 'Crashy', rotation: { maxTokenAge: `${MAX_AGE_S}s` } });
    await waitInSync(env, name, id);
    const before = env.calls().rotate.ok;
    const staleBefore = env.calls().rotate.unknown_token;

    const ofThis = (annotations: Record<string, string>): boolean => (annotations[ROTATION_PENDING_ANNOTATION] ?? '').startsWith('scheduled:');
    const steps: { step: string; aimed: boolean }[] = [];
    for (const step of ['intent recorded', 'POST answered', 'new token stored'] as const) {
      // Settled (a recovery after the last kill done, no pending mark left): each step is aimed at a rotation of its own.
      await waitInSync(env, name, id);
      await eventually(
        'no rotation pending on the Secret',
        async () => ((await env.getSecret(name))?.metadata?.annotations?.[ROTATION_PENDING_ANNOTATION] === undefined ? true : undefined),
        3 * MAX_AGE_S * 1000,
        100,
      );
      const from = c.logs.length;
      const issuedBefore = issueTimes(watch, name).at(-1);
      let aimed: boolean;
      if (step === 'intent recorded') {
        aimed = (await watch.waitFor((e) => e.name === name && ofThis(e.annotations), 3 * MAX_AGE_S * 1000)) !== undefined;
      } else if (step === 'POST answered') {
        aimed = (await waitLog(c, 'token rotated', msgIs('token rotated'), 3 * MAX_AGE_S * 1000, from).catch(() => undefined)) !== undefined;
      } else {
        const stored = (e: { name: string; annotations: Record<string, string> }): boolean =>
          e.name === name && e.annotations[TOKEN_ISSUED_AT_ANNOTATION] !== issuedBefore && !ofThis(e.annotations);
        aimed = (await watch.waitFor(stored, 3 * MAX_AGE_S * 1000)) !== undefined;
      }
      c.child.kill('SIGKILL');
      await c.exit;
      steps.push({ step, aimed });
      c = env.spawnController(ARGS);
      await waitLog(c, 'workers started', msgIs('workers started'));
    }
    // The schedule goes on after the crashes: one more rotation by the last controller.
    await waitInSync(env, name, id);
    const afterCrashes = env.calls().rotate.ok;
    await eventually('one more scheduled rotation', async () => (env.calls().rotate.ok > afterCrashes ? true : undefined), 2 * MAX_AGE_S * 1000, 200);
    await waitInSync(env, name, id);

    const times = issueTimes(watch, name);
    const rotations = env.calls().rotate.ok - before;
    console.log(
      `[scheduled rotation] kills at ${steps.map((s) => `${s.step}${s.aimed ? '' : ' (missed)'}`).join(', ')}: ${rotations} rotations, issue-time gaps ${gapsS(times).join(', ')} s`,
    );
    expect(steps.every((s) => s.aimed)).toBe(true);
    // Nothing repeated: every rotation at the service is one new token in the Secret, and no POST went out with
    // a token already replaced.
    expect(times.length).toBe(rotations + 1);
    expect(env.calls().rotate.unknown_token - staleBefore).toBe(0);
    // Nothing skipped: no token lived longer than its age plus a restart (the crash windows are short).
    for (const gap of gapsS(times)) expect(gap).toBeLessThanOrEqual(MAX_AGE_S + 6);
    expect(rotations).toBeGreaterThanOrEqual(4);
    expect(c.exited()).toBe(false);
  });
});
