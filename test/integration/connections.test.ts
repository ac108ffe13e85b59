import { TEST_EGRESS_ARGS } from '../support/controller-process.js';
import { API_KEY_SECRET_TYPE } from '../../src/controller/connections.js';
import { createHash, randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../src/cli/config.js';
import { startOperator, type RunningOperator } from '../../src/cli/run.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { createLogger } from '../../src/observability/log.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import { adminKubeConfig, createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { group, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/**
 * Connections: the operator's default ClusterUserGroupService, or a UserGroupService (URL + API-key Secret)
 * in the UserGroup's own namespace for a team with its own account. Each "account" here is a separate
 * simulator with its own API key, so where a group landed is unambiguous.
 */

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const newKey = (): string => `key-${randomBytes(16).toString('hex')}`;

const core = adminKubeConfig().makeApiClient(CoreV1Api);
const custom = adminKubeConfig().makeApiClient(CustomObjectsApi);

/** An API-key Secret a UserGroupService may use: of the opt-in type (see docs/tenancy.md). */
async function createApiKeySecret(namespace: string, name: string, data: Record<string, string>, type = API_KEY_SECRET_TYPE): Promise<void> {
  await core.createNamespacedSecret({ namespace, body: { metadata: { name }, type, stringData: data } });
}

async function replaceApiKeySecret(namespace: string, name: string, data: Record<string, string>): Promise<void> {
  await core.replaceNamespacedSecret({ namespace, name, body: { metadata: { name }, type: API_KEY_SECRET_TYPE, stringData: data } });
}

/** The simulators listen on loopback over http: a UserGroupService must opt in (allowInsecure), as a user would. */
async function createService(
  namespace: string,
  name: string,
  spec: { url: string; apiKeySecretRef: { name: string; key?: string }; allowInsecure?: boolean },
): Promise<void> {
  await custom.createNamespacedCustomObject({
    group,
    version,
    namespace,
    plural: 'usergroupservices',
    body: { apiVersion: `${group}/${version}`, kind: 'UserGroupService', metadata: { name }, spec: { allowInsecure: true, ...spec } },
  });
}

async function patchService(namespace: string, name: string, patch: Record<string, unknown>): Promise<void> {
  await custom.patchNamespacedCustomObject(
    { group, version, namespace, plural: 'usergroupservices', name, body: patch },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

async function deleteService(namespace: string, name: string): Promise<void> {
  await custom.deleteNamespacedCustomObject({ group, version, namespace, plural: 'usergroupservices', name });
}

async function createUserGroupIn(namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await custom.createNamespacedCustomObject({
    group,
    version,
    namespace,
    plural: 'usergroups',
    body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name }, spec },
  });
}

function readyOf(ug: UserGroupObject): { status: string; reason: string; message: string } | undefined {
  return ug.status?.conditions?.find((c) => c.type === 'Ready');
}

/** Ready matches and the status describes the current generation, in any namespace. */
async function waitForReadyIn(namespace: string, name: string, reason: string, timeoutMs = 60_000): Promise<UserGroupObject> {
  const status = reason === 'Synced' ? 'True' : 'False';
  return eventually(
    `UserGroup ${namespace}/${name} Ready=${status} reason ${reason}`,
    async () => {
      const ug = (await custom.getNamespacedCustomObject({ group, version, namespace, plural: 'usergroups', name })) as UserGroupObject;
      const ready = readyOf(ug);
      return ready?.status === status && ready.reason === reason && ug.status?.observedGeneration === ug.metadata.generation ? ug : undefined;
    },
    timeoutMs,
    500,
  );
}

async function secretTokenIn(namespace: string, name: string): Promise<string | undefined> {
  const secret = await core.readNamespacedSecret({ namespace, name }).catch(() => undefined);
  const data = secret?.data?.['token'];
  return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
}

function groupAt(sim: Simulator, apiKey: string, userGroupId: string): ReturnType<Simulator['groups']>[number] | undefined {
  return sim.groups(apiKey).find((g) => g.userGroupId === userGroupId);
}

/** Every group the simulator holds, whatever the key. */
function anyGroupAt(sim: Simulator, userGroupId: string): boolean {
  return sim.groups().some((g) => g.userGroupId === userGroupId);
}

describe('connections: UserGroupService in the namespace', () => {
  let env: TestEnv;
  /** A second account: the team's own service, reached only through UserGroupServices. */
  let team: Simulator;
  const teamKey = newKey();
  let ns: string;

  beforeAll(async () => {
    env = await TestEnv.create('conn');
    ns = env.namespace;
    team = await startSimulator({ apiKeys: [teamKey] });
    await env.startOperator();
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
    await ifAssigned(team)?.stop();
  });

  it('syncs a UserGroup with spec.serviceRef at that service and account, not at the default one', async () => {
    await createApiKeySecret(ns, 'team-a-key', { apiKey: teamKey });
    await createService(ns, 'team-a', { url: team.url, apiKeySecretRef: { name: 'team-a-key' } });
    await env.createUserGroup('own', { userGroupId: 'own-1', name: 'Own account', mapping: { sales: 'db1' } });
    await env.createUserGroup('own-ref', { userGroupId: 'own-ref-1', name: 'Own account', serviceRef: { name: 'team-a' } });

    const ug = await env.waitForReady('own-ref', 'Synced', 'True', 60_000);
    const token = await env.secretToken('own-ref');
    expect(token).toMatch(/^[A-Za-z0-9]{64}$/);
    const atTeam = groupAt(team, teamKey, 'own-ref-1');
    expect(atTeam).toMatchObject({ name: 'Own account', tokenSha256: sha256(token ?? '') });
    expect(ug.status).toMatchObject({ providedId: 'own-ref-1', teamId: atTeam?.teamId, tokenSecretName: 'own-ref' });
    expect(anyGroupAt(env.sim, 'own-ref-1')).toBe(false);
    expect(team.stats(teamKey).operations.upsert.created).toBe(1);

    // The one without serviceRef used the default connection, and only that.
    await env.waitForReady('own', 'Synced', 'True', 60_000);
    expect(env.simGroup('own-1')?.tokenSha256).toBe(sha256((await env.secretToken('own')) ?? ''));
    expect(anyGroupAt(team, 'own-1')).toBe(false);

    await eventually(
      'a Synced Event naming the UserGroupService',
      async () => {
        const events = await env.eventsFor('own-ref');
        return events.some((e) => e.reason === 'Synced' && (e.note ?? '').includes(`UserGroupService ${ns}/team-a`)) ? true : undefined;
      },
      30_000,
    );
  });

  it('reports ConnectionNotFound for a missing UserGroupService, then syncs as soon as it is created', async () => {
    await env.createUserGroup('late', { userGroupId: 'late-1', name: 'Late', serviceRef: { name: 'late-svc' } });
    const missing = await env.waitForReady('late', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(missing)?.message).toContain(`UserGroupService ${ns}/late-svc does not exist`);
    expect(anyGroupAt(env.sim, 'late-1')).toBe(false);
    await eventually(
      'a ConnectionNotFound Warning Event',
      async () => {
        const events = await env.eventsFor('late');
        return events.some((e) => e.type === 'Warning' && e.reason === 'ConnectionNotFound') ? true : undefined;
      },
      30_000,
    );
    const generation = missing.metadata.generation;

    // Nothing about the UserGroup changes: the controller must notice the UserGroupService itself.
    // As written by `kubectl create secret --from-file`: with a trailing newline, which is not part of the key.
    await createApiKeySecret(ns, 'late-key', { apiKey: `${teamKey}\n` });
    await createService(ns, 'late-svc', { url: team.url, apiKeySecretRef: { name: 'late-key' } });
    const synced = await env.waitForReady('late', 'Synced', 'True', 60_000);
    expect(synced.metadata.generation).toBe(generation);
    expect(groupAt(team, teamKey, 'late-1')?.tokenSha256).toBe(sha256((await env.secretToken('late')) ?? ''));
    expect(anyGroupAt(env.sim, 'late-1')).toBe(false);
  });

  it('reports ConnectionNotFound naming a missing API-key Secret, and syncs once the Secret appears', async () => {
    await createService(ns, 'nokey', { url: team.url, apiKeySecretRef: { name: 'nokey-secret', key: 'token' } });
    await env.createUserGroup('nokey', { userGroupId: 'nokey-1', name: 'No key yet', serviceRef: { name: 'nokey' } });
    const missing = await env.waitForReady('nokey', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(missing)?.message).toContain(`Secret ${ns}/nokey-secret does not exist`);
    expect(anyGroupAt(team, 'nokey-1')).toBe(false);
    expect(anyGroupAt(env.sim, 'nokey-1')).toBe(false);

    // Secrets that are not token Secrets are not watched: the controller polls (and caches a read for up to 30 s).
    await createApiKeySecret(ns, 'nokey-secret', { token: teamKey });
    await env.waitForReady('nokey', 'Synced', 'True', 90_000);
    expect(groupAt(team, teamKey, 'nokey-1')?.tokenSha256).toBe(sha256((await env.secretToken('nokey')) ?? ''));
  }, 180_000);

  it('names the missing key when the API-key Secret exists without it', async () => {
    await createApiKeySecret(ns, 'wrong-field-key', { apikey: teamKey });
    await createService(ns, 'wrong-field', { url: team.url, apiKeySecretRef: { name: 'wrong-field-key' } });
    await env.createUserGroup('wrong-field', { userGroupId: 'wrong-field-1', name: 'Wrong field', serviceRef: { name: 'wrong-field' } });
    const missing = await env.waitForReady('wrong-field', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(missing)?.message).toContain(`Secret ${ns}/wrong-field-key has no key "apiKey"`);
    expect(anyGroupAt(team, 'wrong-field-1')).toBe(false);
  });

  it('treats the same userGroupId on different accounts as different groups, and on the same account as duplicates', async () => {
    await env.createUserGroup('shared-default', { userGroupId: 'shared-1', name: 'Shared (default)' });
    await env.waitForReady('shared-default', 'Synced', 'True', 60_000);
    await env.createUserGroup('shared-team', { userGroupId: 'shared-1', name: 'Shared (team)', serviceRef: { name: 'team-a' } });
    await env.waitForReady('shared-team', 'Synced', 'True', 60_000);
    // Still Synced: the newer one on another account must not demote the older one either.
    await env.waitForReady('shared-default', 'Synced', 'True', 30_000);

    const defaultToken = await env.secretToken('shared-default');
    const teamToken = await env.secretToken('shared-team');
    expect(defaultToken).toBeTruthy();
    expect(teamToken).toBeTruthy();
    expect(defaultToken).not.toBe(teamToken);
    expect(env.simGroup('shared-1')).toMatchObject({ name: 'Shared (default)', tokenSha256: sha256(defaultToken ?? '') });
    expect(groupAt(team, teamKey, 'shared-1')).toMatchObject({ name: 'Shared (team)', tokenSha256: sha256(teamToken ?? '') });

    // Control: a UserGroupService that is just another name for the default account (same URL, same key)
    // resolves to the same connection, so a third UserGroup with that id IS a duplicate of the older one.
    await createApiKeySecret(ns, 'default-alias-key', { apiKey: env.apiKey });
    await createService(ns, 'default-alias', { url: `${env.sim.url}/`, apiKeySecretRef: { name: 'default-alias-key' } });
    const before = env.calls().upsert;
    await env.createUserGroup('shared-alias', { userGroupId: 'shared-1', name: 'Shared (alias)', serviceRef: { name: 'default-alias' } });
    const dup = await env.waitForReady('shared-alias', 'DuplicateUserGroupId', 'False', 60_000);
    expect(readyOf(dup)?.message).toContain(`${ns}/shared-default`);
    expect(await env.getSecret('shared-alias')).toBeUndefined();
    expect(env.simGroup('shared-1')?.name).toBe('Shared (default)');
    expect(env.calls().upsert).toEqual(before);
    await env.waitForReady('shared-default', 'Synced', 'True', 30_000);
    await env.waitForReady('shared-team', 'Synced', 'True', 30_000);
  });

  it('follows a UserGroupService that is repointed to another account, and reports its deletion', async () => {
    await createApiKeySecret(ns, 'movable-key', { apiKey: teamKey });
    await createService(ns, 'movable', { url: team.url, apiKeySecretRef: { name: 'movable-key' } });
    await env.createUserGroup('mover', { userGroupId: 'mover-1', name: 'Mover', serviceRef: { name: 'movable' } });
    await env.waitForReady('mover', 'Synced', 'True', 60_000);
    const first = await env.secretToken('mover');
    expect(groupAt(team, teamKey, 'mover-1')?.tokenSha256).toBe(sha256(first ?? ''));
    expect(env.simGroup('mover-1')).toBeUndefined();

    // Repoint the connection (URL and key Secret) to the default account: the group must be synced there,
    // and the Secret must hold that account's token. Nothing about the UserGroup changes.
    await createApiKeySecret(ns, 'movable-key-2', { apiKey: env.apiKey });
    await patchService(ns, 'movable', { spec: { url: env.sim.url, apiKeySecretRef: { name: 'movable-key-2' } } });
    const moved = await eventually(
      'the group at the new account with its token in the Secret',
      async () => {
        const atNew = env.simGroup('mover-1');
        const token = await env.secretToken('mover');
        return atNew && token && sha256(token) === atNew.tokenSha256 ? token : undefined;
      },
      60_000,
    );
    expect(moved).not.toBe(first);
    const ug = await env.waitForReady('mover', 'Synced', 'True', 30_000);
    expect(ug.status?.teamId).toBe(env.simGroup('mover-1')?.teamId);

    await deleteService(ns, 'movable');
    const gone = await env.waitForReady('mover', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(gone)?.message).toContain(`UserGroupService ${ns}/movable does not exist`);
    // The token Secret is left alone: the group still exists at the service.
    expect(await env.secretToken('mover')).toBe(moved);
  });

  it('reports Unauthorized for a wrong API key in the Secret, and syncs after the Secret is fixed', async () => {
    const wrongKey = `wrong-${randomBytes(8).toString('hex')}`;
    await createApiKeySecret(ns, 'bad-key-apikey', { apiKey: wrongKey });
    await createService(ns, 'bad-key', { url: team.url, apiKeySecretRef: { name: 'bad-key-apikey' } });
    const unauthorizedBefore = team.stats().operations.upsert.unauthorized;
    await env.createUserGroup('bad-key', { userGroupId: 'bad-key-1', name: 'Bad key', serviceRef: { name: 'bad-key' } });

    const failed = await env.waitForReady('bad-key', 'Unauthorized', 'False', 60_000);
    const message = readyOf(failed)?.message ?? '';
    expect(message).toContain(`UserGroupService ${ns}/bad-key`);
    expect(message).not.toContain(wrongKey);
    expect(team.stats().operations.upsert.unauthorized).toBeGreaterThan(unauthorizedBefore);
    expect(anyGroupAt(team, 'bad-key-1')).toBe(false);
    expect(await env.getSecret('bad-key')).toBeUndefined();

    // Only the Secret changes; the UserGroup and the UserGroupService stay as they are.
    await replaceApiKeySecret(ns, 'bad-key-apikey', { apiKey: teamKey });
    await env.waitForReady('bad-key', 'Synced', 'True', 150_000);
    expect(groupAt(team, teamKey, 'bad-key-1')?.tokenSha256).toBe(sha256((await env.secretToken('bad-key')) ?? ''));
    const events = await env.eventsFor('bad-key');
    expect(events.some((e) => (e.note ?? '').includes(wrongKey))).toBe(false);
  }, 240_000);
});

describe('connections: a UserGroupService is only usable from its own namespace', () => {
  let env: TestEnv;
  let elsewhere: string;
  let team: Simulator;
  const teamKey = newKey();

  beforeAll(async () => {
    env = await TestEnv.create('conn-iso');
    elsewhere = await createNamespace('conn-else');
    team = await startSimulator({ apiKeys: [teamKey] });
    // This controller watches both namespaces, so it does see the UserGroupService over there.
    await env.startOperator({ args: ['--namespaces', `${env.namespace},${elsewhere}`] });
  });
  afterAll(async () => {
    await ifAssigned(env)?.close();
    if (elsewhere) await deleteNamespace(elsewhere).catch(() => undefined);
    await ifAssigned(team)?.stop();
  });

  it('does not resolve serviceRef to a UserGroupService of the same name in another namespace', async () => {
    await createApiKeySecret(elsewhere, 'team-key', { apiKey: teamKey });
    await createService(elsewhere, 'team', { url: team.url, apiKeySecretRef: { name: 'team-key' } });
    // Control: in its own namespace that UserGroupService works with this controller.
    await createUserGroupIn(elsewhere, 'local', { userGroupId: 'local-1', name: 'Local', serviceRef: { name: 'team' } });
    await waitForReadyIn(elsewhere, 'local', 'Synced');
    expect(groupAt(team, teamKey, 'local-1')?.tokenSha256).toBe(sha256((await secretTokenIn(elsewhere, 'local')) ?? ''));

    await env.createUserGroup('cross', { userGroupId: 'cross-1', name: 'Cross', serviceRef: { name: 'team' } });
    const ug = await env.waitForReady('cross', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(ug)?.message).toContain(`UserGroupService ${env.namespace}/team does not exist`);
    // Neither the other namespace's account nor the default connection was used.
    expect(anyGroupAt(team, 'cross-1')).toBe(false);
    expect(anyGroupAt(env.sim, 'cross-1')).toBe(false);
    expect(await env.getSecret('cross')).toBeUndefined();
  });

  it('does not read an API-key Secret from another namespace', async () => {
    // Same Secret name as the one in the other namespace; none exists here.
    await createService(env.namespace, 'borrower', { url: team.url, apiKeySecretRef: { name: 'team-key' } });
    await env.createUserGroup('borrow', { userGroupId: 'borrow-1', name: 'Borrow', serviceRef: { name: 'borrower' } });
    const ug = await env.waitForReady('borrow', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(ug)?.message).toContain(`Secret ${env.namespace}/team-key does not exist`);
    expect(anyGroupAt(team, 'borrow-1')).toBe(false);
    expect(anyGroupAt(env.sim, 'borrow-1')).toBe(false);
  });
});

describe('connections: a controller without a default connection', () => {
  let env: TestEnv;
  let operator: RunningOperator | undefined;
  const logs: string[] = [];

  beforeAll(async () => {
    // TestEnv for the namespace, simulator and helpers only; its startOperator always sets a default
    // connection, so this controller is started directly, as `usergroup-operator run` does with no
    // --default-service.
    env = await TestEnv.create('conn-nodef');
    const parsed = parseRunConfig(
      ['--namespaces', env.namespace, '--metrics-addr', '0', '--health-addr', '0', '--log-level', 'debug', ...TEST_EGRESS_ARGS],
      {},
    );
    if (parsed.ok !== true) throw new Error(`bad test configuration: ${JSON.stringify(parsed)}`);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(line);
        done();
      },
    });
    operator = await startOperator(parsed.config, createLogger('debug', sink), await kubeAccessFromKubeConfig(adminKubeConfig()));
  });
  afterAll(async () => {
    await operator?.stop();
    await ifAssigned(env)?.close();
  });

  it('reports ConnectionNotFound for a UserGroup without serviceRef, and syncs one with serviceRef', async () => {
    await env.createUserGroup('no-ref', { userGroupId: 'no-ref-1', name: 'No ref' });
    const ug = await env.waitForReady('no-ref', 'ConnectionNotFound', 'False', 60_000);
    expect(readyOf(ug)?.message).toContain('no default ClusterUserGroupService');
    expect(anyGroupAt(env.sim, 'no-ref-1')).toBe(false);

    await createApiKeySecret(env.namespace, 'svc-key', { apiKey: env.apiKey });
    await createService(env.namespace, 'svc', { url: env.sim.url, apiKeySecretRef: { name: 'svc-key' } });
    await env.createUserGroup('with-ref', { userGroupId: 'with-ref-1', name: 'With ref', serviceRef: { name: 'svc' } });
    await env.waitForReady('with-ref', 'Synced', 'True', 60_000);
    expect(env.simGroup('with-ref-1')?.tokenSha256).toBe(sha256((await env.secretToken('with-ref')) ?? ''));
    // The other one stays where it was.
    expect(readyOf(await env.getUserGroup('no-ref'))?.reason).toBe('ConnectionNotFound');
  });
});
