import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Faults, InjectedFault } from '../../src/sim/faults.js';
import { eventually } from '../support/kube.js';
import { killAllControllers, msgIs, waitLog, type ControllerProcess, UNBUDGETED_ARGS } from '../support/controller-process.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import { callsOf, diffStats, fmt, processHealth, sha256 } from './support/faults-support.js';
import { awaitInvariant, createUserGroups, RotationLedger } from './support/invariant.js';
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

/**
 * 6. Hostile service responses. For each kind of broken answer, with already-Synced groups: turn the
 * fault on for every call, trigger work (a spec change → PUT on some groups, a rotation request → POST
 * on others) and check that each group reports a clear Ready=False with the documented reason
 * (README Troubleshooting; src/service/response.ts and src/controller/usergroup-step.ts), a Warning Event,
 * that the controller process lives on, and that the Secret still holds the previous valid token (sha256
 * equal to the simulator's current one, which the faults never change). Then the fault goes away and the
 * invariant must hold: the rotation requested under the fault executes exactly once, the spec change
 * reaches the service, and no token is lost. One summary row per kind of answer.
 */

const PER_ROLE = sized(4, 2);
const SERVICE_TIMEOUT_MS = 2_000;
const ARGS = ['--service-timeout', `${SERVICE_TIMEOUT_MS}ms`, '--concurrency', '8', '--log-level', 'info', ...UNBUDGETED_ARGS];
/** How long a Ready=False / Event / recovery may take: minutes, the controller acts within seconds. */
const WAIT_MS = 60_000;
/** How long the fault stays on once every group shows it. */
const HOLD_MS = sized(5_000, 2_000);
const TOKEN_SHA = 'usergroup.dev/token-sha256';
const PENDING = 'usergroup.dev/rotation-pending';

interface Kind {
  readonly key: string;
  readonly title: string;
  readonly knob: keyof Faults;
  readonly outcome: InjectedFault;
  readonly reason: 'InvalidResponse' | 'Rejected' | 'ServiceUnavailable';
  /** What the Ready message must say (the client's classification, src/service/response.ts). */
  readonly message: RegExp;
  /** The Warning Event of a group whose rotation met the fault. */
  readonly rotationEvent: 'RotationFailed' | 'SyncFailed';
}

const KINDS: readonly Kind[] = [
  {
    key: 'a',
    title: 'malformed JSON',
    knob: 'malformedJsonRate',
    outcome: 'injected_malformed_json',
    reason: 'InvalidResponse',
    message: /response body is not JSON/,
    rotationEvent: 'RotationFailed',
  },
  // A requested rotation reads the current token with a PUT first: refused, it is the rotation that failed.
  {
    key: 'b',
    title: '200 with success: 0',
    knob: 'successZeroRate',
    outcome: 'injected_success_zero',
    reason: 'Rejected',
    message: /success 0/,
    rotationEvent: 'RotationFailed',
  },
  {
    key: 'c',
    title: 'missing token',
    knob: 'missingTokenRate',
    outcome: 'injected_missing_token',
    reason: 'InvalidResponse',
    message: /"user_group\.token" is missing/,
    rotationEvent: 'RotationFailed',
  },
  {
    key: 'd',
    title: 'empty token',
    knob: 'emptyTokenRate',
    outcome: 'injected_empty_token',
    reason: 'InvalidResponse',
    message: /"user_group\.token" is empty/,
    rotationEvent: 'RotationFailed',
  },
  {
    key: 'e',
    title: 'huge body (5 MiB)',
    knob: 'hugeBodyRate',
    outcome: 'injected_huge_body',
    reason: 'InvalidResponse',
    message: /exceeds the limit of 1048576 bytes/,
    rotationEvent: 'RotationFailed',
  },
  {
    key: 'f',
    title: 'slow-drip body',
    knob: 'slowDripRate',
    outcome: 'injected_slow_drip',
    reason: 'ServiceUnavailable',
    message: new RegExp(`timed out after ${SERVICE_TIMEOUT_MS} ms|Content-Length mismatch: expected \\d+ bytes, received \\d+ bytes`),
    rotationEvent: 'RotationFailed',
  },
];

interface Member {
  readonly name: string;
  readonly userGroupId: string;
}

describe('6. hostile service responses', () => {
  let env: TestEnv;
  let controller: ControllerProcess;
  const ledger = new RotationLedger();
  const groups = new Map<string, { put: Member[]; rot: Member[] }>();

  beforeAll(async () => {
    env = await TestEnv.create('rel-hostile');
    controller = env.spawnController(ARGS);
    await waitLog(controller, 'workers started', msgIs('workers started'));
    for (const kind of KINDS) {
      groups.set(kind.key, {
        put: await createUserGroups(env, `h${kind.key}p`, PER_ROLE, PER_ROLE),
        rot: await createUserGroups(env, `h${kind.key}r`, PER_ROLE, PER_ROLE),
      });
    }
    const synced = await awaitInvariant(env, ledger, WAIT_MS);
    if (!synced.converged) throw new Error(`the groups did not sync before the faults: ${synced.problems.join('; ')}`);
  });
  afterEach(() => {
    env.sim.setFaults({});
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(env)?.close();
  });

  for (const kind of KINDS) {
    it(`6${kind.key}. ${kind.title}: Ready=False ${kind.reason}, an Event, the token kept; once cleared the work is done exactly once`, async () => {
      const { put, rot } = groups.get(kind.key) ?? { put: [], rot: [] };
      const members = [...put, ...rot];
      const problems: string[] = [];
      const heldSha = new Map<string, string>();
      for (const m of members) {
        const token = await env.secretToken(m.name);
        heldSha.set(m.name, token ? sha256(token) : '');
      }

      /** The Secret must still hold the previous token, which is still the service's current one. */
      const checkSecret = async (m: Member, when: string): Promise<void> => {
        const secret = await env.getSecret(m.name);
        const data = secret?.data?.['token'];
        const token = data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
        const atService = env.simGroup(m.userGroupId)?.tokenSha256;
        if (!token) problems.push(`${m.name}: Secret has ${secret ? 'an empty or no token' : 'gone'} ${when}`);
        else if (sha256(token) !== heldSha.get(m.name)) problems.push(`${m.name}: Secret token changed ${when}`);
        else if (sha256(token) !== atService) problems.push(`${m.name}: Secret token is not the service's current token ${when}`);
        else if (secret?.metadata?.annotations?.[TOKEN_SHA] !== atService) problems.push(`${m.name}: token-sha256 annotation does not match the token ${when}`);
      };

      const started = Date.now();
      const before = env.sim.stats(env.apiKey);
      env.sim.setFaults({ [kind.knob]: 1 });
      const value = `under-${kind.key}`;
      const renamed = `Renamed under ${kind.title}`;
      await Promise.all([
        ...put.map((m) => env.patchUserGroup(m.name, { spec: { name: renamed } })),
        ...rot.map((m) => ledger.request(env, m.name, m.userGroupId, value)),
      ]);

      // Under the fault: the reason, the message, the Event, and the Secret unchanged.
      await Promise.all(
        members.map(async (m) => {
          const isRot = rot.includes(m);
          try {
            const ug = await env.waitForReady(m.name, kind.reason, 'False', WAIT_MS);
            const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
            if (!kind.message.test(ready?.message ?? '')) problems.push(`${m.name}: Ready message does not match ${kind.message}: ${ready?.message ?? ''}`);
            if (isRot && ug.status?.rotation?.lastHandledRequest === value) problems.push(`${m.name}: rotation marked handled under the fault`);
          } catch (err) {
            const ug = await env.getUserGroup(m.name);
            const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
            problems.push(
              `${m.name}: no Ready=False ${kind.reason} (${String(err).slice(0, 80)}; now ${ready?.status ?? '?'} ${ready?.reason ?? '?'}: ${ready?.message ?? ''})`,
            );
          }
          const eventReason = isRot ? kind.rotationEvent : 'SyncFailed';
          try {
            await eventually(
              `a Warning Event ${eventReason} (${kind.reason}) about ${m.name}`,
              async () => {
                const events = await env.eventsFor(m.name);
                return events.some((e) => e.type === 'Warning' && e.reason === eventReason && (e.note ?? '').startsWith(`${kind.reason}:`)) ? true : undefined;
              },
              WAIT_MS,
              500,
            );
          } catch {
            const seen = (await env.eventsFor(m.name)).map((e) => `${e.type ?? ''} ${e.reason ?? ''}: ${(e.note ?? '').slice(0, 60)}`);
            problems.push(`${m.name}: no Warning Event ${eventReason} (${kind.reason}); events: ${seen.join(' | ')}`);
          }
          await checkSecret(m, 'under the fault');
        }),
      );
      // Keep the fault on a while: the retries (per-key backoff from 5 ms) meet it many more times.
      await sleep(HOLD_MS);
      await Promise.all(members.map((m) => checkSecret(m, `after ${HOLD_MS / 1000} s more of the fault`)));
      const underFault = diffStats(env.sim.stats(env.apiKey), before);
      const faultCalls = underFault.operations.upsert[kind.outcome] + underFault.operations.rotate[kind.outcome];
      const applied = callsOf(underFault.operations, 'upsert') + callsOf(underFault.operations, 'rotate') - faultCalls;
      if (applied !== 0) problems.push(`${applied} calls under a 100 % fault were not answered with the fault`);
      const pendingMarks = (await Promise.all(rot.map(async (m) => (await env.getSecret(m.name))?.metadata?.annotations?.[PENDING]))).filter(
        (v) => v === value,
      ).length;
      const healthUnderFault = processHealth(controller);
      if (!healthUnderFault.alive) problems.push(`controller exited under the fault: ${healthUnderFault.exit ?? ''}`);
      const faultMs = Date.now() - started;

      // Cleared: the spec change and the rotation go through, exactly once.
      env.sim.setFaults({});
      const cleared = Date.now();
      const inv = await awaitInvariant(env, ledger, WAIT_MS);
      const recoverMs = Date.now() - cleared;
      const total = diffStats(env.sim.stats(env.apiKey), before);
      for (const m of put) {
        const g = env.simGroup(m.userGroupId);
        if (g?.name !== renamed) problems.push(`${m.name}: the spec change did not reach the service after the fault`);
        if (g?.tokenSha256 !== heldSha.get(m.name)) problems.push(`${m.name}: token changed by a spec change`);
      }
      for (const m of rot) {
        if (env.simGroup(m.userGroupId)?.tokenSha256 === heldSha.get(m.name)) problems.push(`${m.name}: token not rotated after the fault`);
        const n = total.rotationsByUserGroupId[m.userGroupId] ?? 0;
        if (n !== 1) problems.push(`${m.name}: ${n} rotations for one request`);
      }
      const health = processHealth(controller);
      if (health.threw > 0) problems.push(`"reconcile threw" ${health.threw}×: ${health.sample.join(' | ').slice(0, 300)}`);
      const converged = inv.converged && problems.length === 0;

      recordRow({
        scenario: `6${kind.key}. hostile service responses: ${kind.title}`,
        objects: members.length,
        faults: `100 % ${kind.title}: ${fmt(faultCalls)} answers (PUT ${underFault.operations.upsert[kind.outcome]}, POST ${underFault.operations.rotate[kind.outcome]})`,
        converged,
        tokensLost: inv.tokensLost,
        duplicateRotations: inv.duplicateRotations,
        wallMs: Date.now() - started,
        notes:
          `${put.length} spec changes + ${rot.length} rotation requests under the fault: Ready=False ${kind.reason} + Warning Event ` +
          `(${kind.rotationEvent} for rotations), Secret kept its token, ${pendingMarks}/${rot.length} rotation-pending marks; ` +
          `fault on ${(faultMs / 1000).toFixed(1)} s, recovered ${(recoverMs / 1000).toFixed(1)} s after clearing with ` +
          `${callsOf(total.operations, 'upsert') - callsOf(underFault.operations, 'upsert')} PUT + ${callsOf(total.operations, 'rotate') - callsOf(underFault.operations, 'rotate')} POST; ` +
          `rotations executed ${Object.values(total.rotationsByUserGroupId).reduce((a, b) => a + b, 0)}/${rot.length}; ` +
          `controller ${health.alive ? 'alive' : `DEAD (${health.exit ?? '?'})`}, workers started ${health.workerStarts}×` +
          (problems.length > 0 ? `; PROBLEMS: ${problems.slice(0, 3).join('; ')}` : ''),
      });

      if (!converged || !health.alive) {
        console.error(
          `[hostile ${kind.key}] problems: ${[...problems, ...inv.problems].join('\n')}\ncontroller log (last 40 lines):\n${controller.output.slice(-40).join('\n')}`,
        );
      }
      expect(problems).toEqual([]);
      expect(inv.problems).toEqual([]);
      expect(inv.converged).toBe(true);
      expect(inv.tokensLost).toBe(0);
      expect(inv.duplicateRotations).toBe(0);
      expect(inv.missingRotations).toBe(0);
      expect(faultCalls).toBeGreaterThan(0);
      expect(health.alive, `controller exited: ${health.exit ?? ''}`).toBe(true);
      expect(health.workerStarts).toBe(1);
      expect(health.threw).toBe(0);
    });
  }
});
