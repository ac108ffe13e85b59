import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestEnv, type OperatorHandle } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

describe('operator basics', () => {
  let env: TestEnv;
  let operator: OperatorHandle;
  beforeAll(async () => {
    env = await TestEnv.create('basic');
    operator = await env.startOperator();
  });
  afterAll(async () => ifAssigned(env)?.close());

  it('creates the group at the service and stores its token in an owned Secret', async () => {
    await env.createUserGroup('acme', { userGroupId: 'acme-1', name: 'Acme' });
    const ug = await env.waitForReady('acme');
    const token = await env.secretToken('acme');
    expect(token).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(env.simGroup('acme-1')?.tokenSha256).toBe(
      (await import('node:crypto'))
        .createHash('sha256')
        .update(token ?? '')
        .digest('hex'),
    );
    const secret = await env.getSecret('acme');
    expect(secret?.type).toBe('Opaque');
    expect(secret?.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'UserGroup', name: 'acme', uid: ug.metadata.uid, controller: true });
    expect(secret?.metadata?.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'usergroup-operator', 'usergroup.dev/usergroup': 'acme' });
    expect(ug.status).toMatchObject({ providedId: 'acme-1', tokenSecretName: 'acme', environmentTag: 'Customer' });
    expect(env.calls().upsert.created).toBe(1);
  });
  it('a stop and an immediate start (a Lease lost and regained at once): the start waits for the stop, and work goes on', async () => {
    const controller = operator.operator?.controller;
    if (!controller) throw new Error('an in-process controller was expected');
    const started = (): number => operator.logs.filter((l) => l.includes('"msg":"workers started"')).length;
    const before = started();
    const stopped = controller.abortWorkers();
    controller.startWorkers();
    // Two generations of workers never run side by side: the start happens once the stop has drained.
    expect(controller.queueInFlight()).toBeUndefined();
    await stopped;
    expect(controller.queueInFlight()).toBeDefined();
    expect(started()).toBe(before + 1);
    await env.createUserGroup('after-restart', { userGroupId: 'acme-restart', name: 'After restart' });
    await env.waitForReady('after-restart');
    expect(env.simGroup('acme-restart')?.name).toBe('After restart');
  });
});
