import { setTimeout as sleep } from 'node:timers/promises';
import { AppsV1Api, ApiException, type V1Deployment, type V1StatefulSet } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/kube.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';
import { waitInSync } from '../support/service-sync.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * spec.rolloutRestartTargets against the real apiserver and kube-controller-manager: a workload whose owner
 * named the UserGroup gets exactly one new pod-template annotation per token change (its generation moves by
 * one, and the Deployment controller rolls a new ReplicaSet, as after `kubectl rollout restart`), none for a
 * spec-only change or a controller restart; a workload that did not consent is never touched.
 */

const CONSENT = 'usergroup.dev/restart-on-token-change';
const ARGS = ['--workload-restarts-per-minute', '600'];

const template = (app: string): Omit<NonNullable<V1Deployment['spec']> & NonNullable<V1StatefulSet['spec']>, 'serviceName'> => ({
  selector: { matchLabels: { app } },
  template: { metadata: { labels: { app } }, spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
});

describe('restart targets (spec.rolloutRestartTargets)', () => {
  let env: TestEnv;
  let apps: AppsV1Api;
  let operator: OperatorHandle;
  beforeAll(async () => {
    env = await TestEnv.create('restarts');
    apps = env.kc.makeApiClient(AppsV1Api);
    const namespace = env.namespace;
    const deployment = (name: string, consent?: string): Promise<V1Deployment> =>
      apps.createNamespacedDeployment({
        namespace,
        body: { metadata: { name, ...(consent !== undefined ? { annotations: { [CONSENT]: consent } } : {}) }, spec: template(name) },
      });
    await deployment('web', 'acme');
    await deployment('agent');
    await deployment('shared', 'acme, beta');
    await apps.createNamespacedStatefulSet({
      namespace,
      body: { metadata: { name: 'db', annotations: { [CONSENT]: 'acme' } }, spec: { ...template('db'), serviceName: 'db' } },
    });
    operator = await env.startOperator({ args: ARGS });
  });
  afterAll(async () => ifAssigned(env)?.close());

  const generations = async (): Promise<Record<string, number>> => {
    const namespace = env.namespace;
    const [web, agent, shared, db] = await Promise.all([
      apps.readNamespacedDeployment({ namespace, name: 'web' }),
      apps.readNamespacedDeployment({ namespace, name: 'agent' }),
      apps.readNamespacedDeployment({ namespace, name: 'shared' }),
      apps.readNamespacedStatefulSet({ namespace, name: 'db' }),
    ]);
    return {
      web: web.metadata?.generation ?? 0,
      agent: agent.metadata?.generation ?? 0,
      shared: shared.metadata?.generation ?? 0,
      db: db.metadata?.generation ?? 0,
    };
  };
  const marks = async (name: string): Promise<Record<string, string>> =>
    Object.fromEntries(
      Object.entries((await apps.readNamespacedDeployment({ namespace: env.namespace, name })).spec?.template.metadata?.annotations ?? {}).filter(([k]) =>
        k.startsWith('restart.usergroup.dev/'),
      ),
    );
  const replicaSets = async (app: string): Promise<number> =>
    (await apps.listNamespacedReplicaSet({ namespace: env.namespace, labelSelector: `app=${app}` })).items.length;
  const issuedOf = (ug: UserGroupObject): string => ug.status?.rotation?.tokenIssuedTime ?? '';
  /** Waits until the operator has handled the rotation request (if any) and recorded the restarts for the token it made. */
  const restartsDone = (name: string, request?: string): Promise<UserGroupObject> =>
    eventually(`${name}: restarts recorded for its current token`, async () => {
      const ug = await env.getUserGroup(name);
      const issued = issuedOf(ug);
      const handled = request === undefined || ug.status?.rotation?.lastHandledRequest === request;
      return handled && issued !== '' && ug.status?.rolloutRestarts?.tokenIssuedTime === issued ? ug : undefined;
    });
  const reasons = async (name: string): Promise<string[]> => (await env.eventsFor(name)).map((e) => e.reason ?? '');

  it('listing targets restarts nothing: the pods already run the current token', async () => {
    await env.createUserGroup('acme', {
      userGroupId: 'acme-1',
      name: 'Acme',
      rolloutRestartTargets: [
        { kind: 'Deployment', name: 'web' },
        { kind: 'StatefulSet', name: 'db' },
        { kind: 'Deployment', name: 'agent' },
        { kind: 'Deployment', name: 'shared' },
        { kind: 'Deployment', name: 'not-there' },
      ],
    });
    // Beta's consumers could use Reloader's search mode instead: its annotation goes on the token Secret.
    await env.createUserGroup('beta', {
      userGroupId: 'beta-1',
      name: 'Beta',
      rolloutRestartTargets: [{ kind: 'Deployment', name: 'shared' }],
      tokenSecret: { annotations: { 'reloader.stakater.com/match': 'true' } },
    });
    await waitInSync(env, 'acme', 'acme-1');
    await waitInSync(env, 'beta', 'beta-1');
    await restartsDone('acme');
    await restartsDone('beta');
    expect(await generations()).toEqual({ web: 1, agent: 1, shared: 1, db: 1 });
    expect(await marks('web')).toEqual({});
    expect((await env.getSecret('beta'))?.metadata?.annotations?.['reloader.stakater.com/match']).toBe('true');
  });

  it('a spec-only change (a PUT that keeps the token) restarts nothing, and leaves the Secret data as it was (what Reloader hashes)', async () => {
    const data = (await env.getSecret('acme'))?.data;
    await env.patchUserGroup('acme', { spec: { name: 'Acme Corp' } });
    await eventually('the new name at the service', async () => (env.simGroup('acme-1')?.name === 'Acme Corp' ? true : undefined));
    await waitInSync(env, 'acme', 'acme-1');
    await sleep(1_500);
    expect(await generations()).toEqual({ web: 1, agent: 1, shared: 1, db: 1 });
    expect(env.sim.stats(env.apiKey).rotationsByUserGroupId['acme-1'] ?? 0).toBe(0);
    expect((await env.getSecret('acme'))?.data).toEqual(data);
  });

  it('a rotation: each consenting target restarted exactly once for the new token; the others reported', async () => {
    await env.requestRotation('acme', 'r1');
    const ug = await restartsDone('acme', 'r1');
    await waitInSync(env, 'acme', 'acme-1');
    const issued = issuedOf(ug);
    expect(await generations()).toEqual({ web: 2, agent: 1, shared: 2, db: 2 });
    expect(await marks('web')).toEqual({ 'restart.usergroup.dev/acme': issued });
    expect(await marks('agent')).toEqual({});
    // A real rollout, as after kubectl rollout restart: the Deployment controller made a second ReplicaSet.
    await eventually('a new ReplicaSet for web', async () => ((await replicaSets('web')) === 2 ? true : undefined));
    const events = await reasons('acme');
    expect(events).toEqual(expect.arrayContaining(['RolloutRestarted', 'RestartTargetNotAllowed', 'RestartTargetNotFound']) as unknown);
  });

  it('two UserGroups restarting one workload each mark their own token: one restart per rotation, no ping-pong', async () => {
    await env.requestRotation('beta', 'b1');
    await restartsDone('beta', 'b1');
    await env.requestRotation('acme', 'r2');
    await restartsDone('acme', 'r2');
    await sleep(2_000);
    expect(await generations()).toEqual({ web: 3, agent: 1, shared: 4, db: 3 });
    expect(Object.keys(await marks('shared')).sort()).toEqual(['restart.usergroup.dev/acme', 'restart.usergroup.dev/beta']);
    expect(env.sim.stats(env.apiKey).rotationsByUserGroupId).toMatchObject({ 'acme-1': 2, 'beta-1': 1 });
  });

  it('a controller restart repeats no restart (the status and the marks say what was done)', async () => {
    const before = await generations();
    await operator.stop();
    operator = await env.startOperator({ args: ARGS });
    await waitInSync(env, 'acme', 'acme-1');
    await sleep(2_000);
    expect(await generations()).toEqual(before);
  });

  it('the apiserver refuses a target that repeats one, or is not a workload kind', async () => {
    const refused = async (targets: unknown[]): Promise<boolean> => {
      try {
        await env.createUserGroup(`bad-${String(targets.length)}`, { userGroupId: 'bad', name: 'Bad', rolloutRestartTargets: targets });
        return false;
      } catch (err) {
        return err instanceof ApiException && err.code === 422;
      }
    };
    expect(await refused([{ kind: 'Pod', name: 'web' }])).toBe(true);
    expect(
      await refused([
        { kind: 'Deployment', name: 'web' },
        { kind: 'Deployment', name: 'web' },
      ]),
    ).toBe(true);
  });
});
