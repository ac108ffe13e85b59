import { API_KEY_SECRET_TYPE } from '../../src/controller/connections.js';
import { DEFAULT_REQUEST_BUDGETS } from '../../src/controller/request-budget.js';
import { randomBytes } from 'node:crypto';
import { ApiException, AppsV1Api, PatchStrategy, setHeaderOptions, type V1DeploymentSpec } from '@kubernetes/client-node';
import { eventually } from './kube.js';
import { claimVersion, group, version } from './operator.js';
import {
  annotateUserGroupAs,
  backendPut,
  createUserGroupAs,
  deleteUserGroupAs,
  readSecretAs,
  readyOf,
  rewriteSecretAs,
  secretTokenAs,
  serviceGroup,
  sha256,
  TOKEN_SHA256,
  userGroupIn,
  waitForReason,
  type Tenant,
  type TenancyWorld,
} from './tenancy.js';

/**
 * Attacks a tenant can make with nothing but its own namespace's RBAC, each tried for real against the
 * controller, and what each achieved. An outcome lists the evidence of success (none when refused), the
 * service calls the refused objects caused, and how many of those the rules allow (AdoptionRefused: the
 * one PUT that found the group; the service has no read to ask first).
 */
export interface AttackOutcome {
  readonly attack: string;
  readonly succeeded: boolean;
  readonly evidence: readonly string[];
  readonly refusedCalls: number;
  readonly allowedRefusedCalls: number;
  readonly details: Readonly<Record<string, unknown>>;
}

const suffix = (): string => randomBytes(3).toString('hex');
const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const ROTATE = 'usergroup.dev/rotate-requested-at';
const SYNC = 'usergroup.dev/sync-requested-at';

function outcome(attack: string, evidence: (string | false)[], refusedCalls: number, details: Record<string, unknown>, allowedRefusedCalls = 0): AttackOutcome {
  const found = evidence.filter((e): e is string => e !== false);
  return { attack, succeeded: found.length > 0 || refusedCalls > allowedRefusedCalls, evidence: found, refusedCalls, allowedRefusedCalls, details };
}

async function forbidden(what: Promise<unknown>): Promise<boolean> {
  try {
    await what;
    return false;
  } catch (err) {
    return err instanceof ApiException && err.code === 403;
  }
}

/** 1. Take over a group that exists at the service (made by the company's backend) with another id space's id. */
export async function takeover(world: TenancyWorld, attacker: Tenant): Promise<AttackOutcome> {
  const id = `backend.customer-${suffix()}`;
  const victimToken = await backendPut(world, { user_group_id: id, name: 'Victim Corp', properties: { customer_filter: 'victim' } });
  const name = `grab-${suffix()}`;
  await createUserGroupAs(attacker, name, { userGroupId: id, name: 'Hijacked', properties: { customer_filter: 'attacker' } });
  const ug = await waitForReason(world, attacker.namespace, name, 'UserGroupIdNotAllowed');
  const at = serviceGroup(world, id);
  return outcome(
    'takeover of an existing group (another id space)',
    [
      at?.name !== 'Victim Corp' && `the group's name became ${at?.name ?? '(gone)'}`,
      JSON.stringify(at?.properties) !== JSON.stringify({ customer_filter: 'victim' }) && "the group's properties changed",
      at?.tokenSha256 !== sha256(victimToken) && "the group's token changed",
      (await readSecretAs(attacker, name)) !== undefined && "a token Secret appeared in the attacker's namespace",
    ],
    world.proxy.putsFor(id).length,
    { reason: readyOf(ug)?.reason, message: readyOf(ug)?.message },
  );
}

/** 2. Use the shared connection from a namespace no rule admits. */
export async function unadmitted(world: TenancyWorld): Promise<AttackOutcome> {
  const t = world.outsider;
  const id = `${t.namespace}.acme-${suffix()}`;
  const name = `sneak-${suffix()}`;
  await createUserGroupAs(t, name, { userGroupId: id, name: 'Sneak' });
  const ug = await waitForReason(world, t.namespace, name, 'NamespaceNotAllowed');
  return outcome(
    'a namespace no rule admits',
    [serviceGroup(world, id) !== undefined && 'the group was created at the service', (await readSecretAs(t, name)) !== undefined && 'a token Secret appeared'],
    world.proxy.putsFor(id).length,
    { reason: readyOf(ug)?.reason },
  );
}

/** 3. The sleeper: wait in DuplicateUserGroupId for the owner to be deleted and re-created, in either order. */
export async function sleeper(world: TenancyWorld, owner: Tenant, attacker: Tenant): Promise<AttackOutcome> {
  const id = `shared.sleeper-${suffix()}`;
  const ownerName = `owner-${suffix()}`;
  const sleeperName = `sleeper-${suffix()}`;
  await createUserGroupAs(owner, ownerName, { userGroupId: id, name: 'Owner' });
  await waitForReason(world, owner.namespace, ownerName, 'Synced');
  const ownerPuts = world.proxy.putsFor(id).length;
  await createUserGroupAs(attacker, sleeperName, { userGroupId: id, name: 'Sleeper', properties: { customer_filter: 'attacker' } });
  await waitForReason(world, attacker.namespace, sleeperName, 'UserGroupIdClaimed');
  // The owner's object is deleted and re-created (a restore, an Argo CD replace); the sleeper is re-created too,
  // while the owner is gone, to be the older of the two.
  await deleteUserGroupAs(owner, ownerName);
  await eventually('the owner gone', async () => ((await userGroupIn(world, owner.namespace, ownerName)) ? undefined : true));
  await deleteUserGroupAs(attacker, sleeperName);
  await eventually('the sleeper gone', async () => ((await userGroupIn(world, attacker.namespace, sleeperName)) ? undefined : true));
  await createUserGroupAs(attacker, sleeperName, { userGroupId: id, name: 'Sleeper', properties: { customer_filter: 'attacker' } });
  const refused = await waitForReason(world, attacker.namespace, sleeperName, 'UserGroupIdClaimed');
  await createUserGroupAs(owner, ownerName, { userGroupId: id, name: 'Owner' });
  await waitForReason(world, owner.namespace, ownerName, 'Synced');
  const still = await waitForReason(world, attacker.namespace, sleeperName, 'UserGroupIdClaimed');
  const at = serviceGroup(world, id);
  const ownerToken = await secretTokenAs(owner, ownerName);
  const sleeperPuts = world.proxy.putsFor(id).filter((r) => r.body.includes('"Sleeper"')).length;
  return outcome(
    'the sleeper (re-created after the owner)',
    [
      at?.name !== 'Owner' && `the group's name became ${at?.name ?? '(gone)'}`,
      (await readSecretAs(attacker, sleeperName)) !== undefined && "a token Secret appeared in the sleeper's namespace",
      at?.tokenSha256 !== sha256(ownerToken ?? '') && "the owner's Secret does not hold the current token",
    ],
    sleeperPuts,
    { ownerPutsBefore: ownerPuts, reasons: [readyOf(refused)?.reason, readyOf(still)?.reason] },
  );
}

/** 4. Same id from two deployments that each see only their own namespace, created at the same moment. */
export async function acrossShards(world: TenancyWorld, a: Tenant, b: Tenant): Promise<AttackOutcome> {
  const id = `shared.race-${suffix()}`;
  const name = `race-${suffix()}`;
  await Promise.all([createUserGroupAs(a, name, { userGroupId: id, name: 'A' }), createUserGroupAs(b, name, { userGroupId: id, name: 'B' })]);
  const settled = await eventually('one Synced, one UserGroupIdClaimed', async () => {
    const reasons = await Promise.all([a, b].map(async (t) => readyOf(await userGroupIn(world, t.namespace, name))?.reason));
    return reasons.includes('Synced') && reasons.includes('UserGroupIdClaimed') ? reasons : undefined;
  });
  const winner = settled[0] === 'Synced' ? a : b;
  const loser = winner === a ? b : a;
  const loserName = winner === a ? 'B' : 'A';
  const loserPuts = world.proxy.putsFor(id).filter((r) => r.body.includes(`"name":"${loserName}"`)).length;
  return outcome(
    'the same id from two deployments at once',
    [
      (await readSecretAs(loser, name)) !== undefined && 'the loser holds a token Secret',
      serviceGroup(world, id)?.name !== (winner === a ? 'A' : 'B') && "the loser's name is at the service",
    ],
    loserPuts,
    { winner: winner.namespace },
  );
}

/**
 * 5. URL spelling: two namespaces were given the same API key (a careless platform team); each tenant makes its
 * own UserGroupService, spelling the same service differently, and both claim one id.
 */
export async function urlSpelling(world: TenancyWorld, a: Tenant, b: Tenant): Promise<AttackOutcome> {
  const id = `spelled-${suffix()}`;
  const port = new URL(world.proxy.url).port;
  const urls = [`http://127.0.0.1:${port}`, `http://localhost:${port}/`];
  for (const [i, t] of [a, b].entries()) {
    await world.env.core.createNamespacedSecret({
      namespace: t.namespace,
      body: { metadata: { name: `given-key-${id}` }, type: API_KEY_SECRET_TYPE, stringData: { apiKey: world.env.apiKey } },
    });
    await t.custom.createNamespacedCustomObject({
      group,
      version,
      namespace: t.namespace,
      plural: 'usergroupservices',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'UserGroupService',
        metadata: { name: `own-${id}` },
        spec: { url: urls[i], allowInsecure: true, apiKeySecretRef: { name: `given-key-${id}` } },
      },
    });
  }
  await createUserGroupAs(a, id, { userGroupId: id, name: 'First', serviceRef: { name: `own-${id}` } });
  await waitForReason(world, a.namespace, id, 'Synced');
  await createUserGroupAs(b, id, { userGroupId: id, name: 'Second', properties: { customer_filter: 'attacker' }, serviceRef: { name: `own-${id}` } });
  const ug = await waitForReason(world, b.namespace, id, 'UserGroupIdClaimed');
  return outcome(
    'the same account through a differently spelled URL',
    [
      serviceGroup(world, id)?.name !== 'First' && "the second namespace's name is at the service",
      (await readSecretAs(b, id)) !== undefined && 'the second namespace holds a token Secret',
    ],
    world.proxy.putsFor(id).filter((r) => r.body.includes('"Second"')).length,
    { reason: readyOf(ug)?.reason },
  );
}

/**
 * 6. The squatter claims an id a legitimate team will want, takes the token, and loses the contest when an
 * admin releases the id to the team: the token it copied must be dead.
 */
export async function squatter(world: TenancyWorld, squatterT: Tenant, legit: Tenant): Promise<AttackOutcome> {
  const id = `shared.squat-${suffix()}`;
  const name = `squat-${suffix()}`;
  await createUserGroupAs(squatterT, name, { userGroupId: id, name: 'Squatter' });
  await waitForReason(world, squatterT.namespace, name, 'Synced');
  const copied = await secretTokenAs(squatterT, name);
  await createUserGroupAs(legit, name, { userGroupId: id, name: 'Legit' });
  await waitForReason(world, legit.namespace, name, 'UserGroupIdClaimed');
  const legitPutsWhileRefused = world.proxy.putsFor(id).filter((r) => r.body.includes('"Legit"')).length;
  // The admin settles it: the squatter's UserGroup goes, and the claim is released.
  await world.env.custom.deleteNamespacedCustomObject({ group, version, namespace: squatterT.namespace, plural: 'usergroups', name });
  const claim = (await world.env.claims([squatterT.namespace])).find((c) => c.spec.userGroupId === id);
  if (claim) await world.env.custom.deleteClusterCustomObject({ group, version: claimVersion, plural: 'usergroupclaims', name: claim.metadata.name });
  const adopted = await waitForReason(world, legit.namespace, name, 'Synced');
  const at = serviceGroup(world, id);
  return outcome(
    'the squatter keeps a live token after losing the contest',
    [
      at?.tokenSha256 === sha256(copied ?? '') && "the squatter's copied token still works at the service",
      at?.tokenSha256 !== sha256((await secretTokenAs(legit, name)) ?? '') && 'the legitimate team does not hold the current token',
    ],
    legitPutsWhileRefused,
    { adoption: adopted.status && (adopted.status as { adoption?: unknown }).adoption },
  );
}

/**
 * 7. Rotation hijack: the tenant learned another group's token, writes it into its own token Secret with a
 * matching sha256 annotation, and asks for a rotation of its own UserGroup.
 */
export async function rotationHijack(world: TenancyWorld, attacker: Tenant): Promise<AttackOutcome> {
  const victimId = `backend.payroll-${suffix()}`;
  const victimToken = await backendPut(world, { user_group_id: victimId, name: 'Payroll' });
  const name = `mine-${suffix()}`;
  await createUserGroupAs(attacker, name, { userGroupId: `${attacker.namespace}.${name}`, name: 'Mine' });
  await waitForReason(world, attacker.namespace, name, 'Synced');
  await rewriteSecretAs(attacker, name, (s) => {
    s.data = { ...s.data, token: Buffer.from(victimToken).toString('base64') };
    const meta = (s.metadata ??= {});
    meta.annotations = { ...meta.annotations, [TOKEN_SHA256]: sha256(victimToken) };
  });
  await annotateUserGroupAs(attacker, name, { [ROTATE]: 'hijack-1' });
  await eventually('the rotation request handled', async () =>
    (await userGroupIn(world, attacker.namespace, name))?.status?.rotation?.lastHandledRequest === 'hijack-1' ? true : undefined,
  );
  const victim = serviceGroup(world, victimId);
  const held = await secretTokenAs(attacker, name);
  const own = serviceGroup(world, `${attacker.namespace}.${name}`);
  return outcome(
    'rotation hijack with a planted token',
    [
      victim?.tokenSha256 !== sha256(victimToken) && "the victim's token was rotated",
      held === victimToken && "the victim's token stayed in the attacker's Secret",
      held !== undefined && sha256(held) !== own?.tokenSha256 && "the attacker's Secret holds a token that is not its own group's",
    ],
    world.proxy.postsWith(victimToken).length,
    { ownRotations: own?.rotations },
  );
}

/** 8. A forged rotation-handled mark in the Secret, to suppress a rotation that was asked for. */
export async function forgedHandled(world: TenancyWorld, t: Tenant): Promise<AttackOutcome> {
  const name = `leaked-${suffix()}`;
  const id = `${t.namespace}.${name}`;
  await createUserGroupAs(t, name, { userGroupId: id, name: 'Leaked' });
  await waitForReason(world, t.namespace, name, 'Synced');
  const before = serviceGroup(world, id);
  // While its controller is down, someone asks for a rotation (the token leaked) and the tenant forges the record.
  await world.restartController(t.namespace, async () => {
    await world.env.custom.patchNamespacedCustomObject(
      { group, version, namespace: t.namespace, plural: 'usergroups', name, body: { metadata: { annotations: { [ROTATE]: 'leak-1' } } } },
      MERGE,
    );
    await rewriteSecretAs(t, name, (s) => {
      const meta = (s.metadata ??= {});
      meta.annotations = { ...meta.annotations, 'usergroup.dev/rotation-handled': 'leak-1' };
    });
  });
  await eventually('the rotation request handled', async () =>
    (await userGroupIn(world, t.namespace, name))?.status?.rotation?.lastHandledRequest === 'leak-1' ? true : undefined,
  );
  const after = serviceGroup(world, id);
  return outcome(
    'a forged rotation-handled mark',
    [
      after?.tokenSha256 === before?.tokenSha256 && 'the token was not rotated',
      after?.tokenSha256 !== sha256((await secretTokenAs(t, name)) ?? '') && 'the Secret does not hold the current token',
    ],
    0,
    { rotations: [before?.rotations, after?.rotations] },
  );
}

/** 9. Claim a group that exists at the service under a rule that refuses adoption. */
export async function refusedAdoption(world: TenancyWorld, t: Tenant): Promise<AttackOutcome> {
  const name = `legacy-${suffix()}`;
  const id = `legacy-${t.namespace}.${name}`;
  const existing = await backendPut(world, { user_group_id: id, name: 'Legacy' });
  await createUserGroupAs(t, name, { userGroupId: id, name: 'Legacy (claimed)' });
  const ug = await waitForReason(world, t.namespace, name, 'AdoptionRefused');
  const callsAtRefusal = world.proxy.putsFor(id).length;
  // A restart of its controller must not repeat the PUT.
  await world.restartController(t.namespace);
  await waitForReason(world, t.namespace, name, 'AdoptionRefused');
  await new Promise((r) => setTimeout(r, 1_000));
  return outcome(
    'adopting a group where the rule says Refuse',
    [
      (await readSecretAs(t, name)) !== undefined && 'a token Secret appeared',
      serviceGroup(world, id)?.tokenSha256 !== sha256(existing) && 'the existing token changed',
    ],
    world.proxy.putsFor(id).length,
    { callsAtRefusal, message: readyOf(ug)?.message },
    1,
  );
}

/** 10. The tenant's RBAC surface: what it must not be able to write or read at all. */
export async function rbacSurface(world: TenancyWorld, t: Tenant): Promise<AttackOutcome> {
  const name = `status-${suffix()}`;
  await createUserGroupAs(t, name, { userGroupId: `${t.namespace}.${name}`, name: 'Status' });
  const attempts: [string, () => Promise<unknown>][] = [
    ['list UserGroupClaims', () => t.custom.listClusterCustomObject({ group, version: claimVersion, plural: 'usergroupclaims' })],
    [
      'create a UserGroupClaim',
      () =>
        t.custom.createClusterCustomObject({
          group,
          version: claimVersion,
          plural: 'usergroupclaims',
          body: {
            apiVersion: `${group}/${claimVersion}`,
            kind: 'UserGroupClaim',
            metadata: { name: `fake-${suffix()}` },
            spec: { userGroupId: 'x', account: 'y', namespace: t.namespace, userGroup: { name: 'a', uid: 'b' } },
          },
        }),
    ],
    ['read the shared connection', () => t.custom.listClusterCustomObject({ group, version, plural: 'clusterusergroupservices' })],
    [
      'create a ClusterUserGroupService',
      () =>
        t.custom.createClusterCustomObject({
          group,
          version,
          plural: 'clusterusergroupservices',
          body: {
            apiVersion: `${group}/${version}`,
            kind: 'ClusterUserGroupService',
            metadata: { name: `mine-${suffix()}` },
            spec: {
              url: 'https://x.example.com',
              apiKeySecretRef: { namespace: t.namespace, name: 'k' },
              tenants: [{ namespaces: [t.namespace], userGroupIds: { prefix: '' } }],
            },
          },
        }),
    ],
    [
      'label its own namespace into a rule',
      () => t.core.patchNamespace({ name: t.namespace, body: { metadata: { labels: { [world.tenantLabel]: 'true' } } } }, MERGE),
    ],
    [
      'write the status of its UserGroup',
      () =>
        t.custom.patchNamespacedCustomObjectStatus(
          { group, version, namespace: t.namespace, plural: 'usergroups', name, body: { status: { syncedHash: 'forged' } } },
          MERGE,
        ),
    ],
    ["read the operator's API-key Secret", () => t.core.readNamespacedSecret({ namespace: world.env.namespace, name: 'usergroup-api-key' })],
  ];
  const allowed: string[] = [];
  for (const [what, attempt] of attempts) if (!(await forbidden(attempt()))) allowed.push(`allowed: ${what}`);
  return outcome('writes outside its RBAC (claims, connections, namespace labels, status, the API key)', allowed, 0, {});
}

/** 11. Labels and annotations on its UserGroup and token Secret: bookkeeping look-alikes, a stripped managed-by label. */
export async function metadataNoise(world: TenancyWorld, t: Tenant): Promise<AttackOutcome> {
  const name = `noise-${suffix()}`;
  const id = `${t.namespace}.${name}`;
  await createUserGroupAs(t, name, { userGroupId: id, name: 'Noise' });
  await waitForReason(world, t.namespace, name, 'Synced');
  const putsBefore = world.proxy.putsFor(id).length;
  const token = await secretTokenAs(t, name);
  await annotateUserGroupAs(
    t,
    name,
    { 'usergroup.dev/rotation-handled': 'x', 'usergroup.dev/token-record': 'f'.repeat(64), 'usergroup.dev/token-sha256': 'x' },
    { 'app.kubernetes.io/managed-by': 'someone-else', 'usergroup.dev/usergroup': 'other' },
  );
  await rewriteSecretAs(t, name, (s) => {
    (s.metadata ??= {}).labels = { app: 'mine' };
  });
  // The controller puts its labels back without a call (the record still vouches for the token).
  await eventually('the managed-by label restored', async () =>
    (await readSecretAs(t, name))?.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'usergroup-operator' ? true : undefined,
  );
  const ug = await userGroupIn(world, t.namespace, name);
  // The object is not refused (it is the tenant's own group): calls here are the price of its own edits, like a
  // spec change, and are reported, not counted against the rules. (A stripped label can cost one PUT: until the
  // label is back, the cache knows the Secret by name only, not as this group's token Secret.)
  return outcome(
    'look-alike annotations and labels, a stripped managed-by label',
    [readyOf(ug)?.reason !== 'Synced' && `Ready is now ${readyOf(ug)?.reason ?? '?'}`, (await secretTokenAs(t, name)) !== token && 'the token changed'],
    0,
    { callsOnOwnGroup: world.proxy.putsFor(id).length - putsBefore },
  );
}

/**
 * 12. A rotation flood on the platform's account: the shortest maxTokenAge the CRD admits (1s), then a backdated
 * token-issued-at and a forged scheduled pending mark on its Secret. The operator's floor (--min-token-age, 1 h by
 * default) and the sealed record decide, not the tenant.
 */
export async function rotationFlood(world: TenancyWorld, t: Tenant): Promise<AttackOutcome> {
  const name = `flood-${suffix()}`;
  const id = `${t.namespace}.${name}`;
  await createUserGroupAs(t, name, { userGroupId: id, name: 'Flood', rotation: { maxTokenAge: '1s' } });
  await waitForReason(world, t.namespace, name, 'Synced');
  const putsBefore = world.proxy.putsFor(id).length;
  await rewriteSecretAs(t, name, (s) => {
    const meta = (s.metadata ??= {});
    meta.annotations = {
      ...meta.annotations,
      'usergroup.dev/token-issued-at': '2000-01-01T00:00:00Z',
      'usergroup.dev/rotation-pending': 'scheduled:2000-01-01T00:00:00Z',
    };
  });
  // The edit is noticed (the record no longer vouches for the Secret) and repaired from a PUT: the issue time back.
  await eventually('the Secret repaired', async () =>
    (await readSecretAs(t, name))?.metadata?.annotations?.['usergroup.dev/token-issued-at'] !== '2000-01-01T00:00:00Z' ? true : undefined,
  );
  // Long enough for a 1 s schedule to have rotated a few times, were it obeyed.
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  const ug = await userGroupIn(world, t.namespace, name);
  const rotation = ug?.status?.rotation;
  const scheduledIn = Date.parse(rotation?.nextRotationTime ?? '') - Date.parse(rotation?.tokenIssuedTime ?? '');
  const own = serviceGroup(world, id);
  return outcome(
    'a rotation flood: maxTokenAge 1s, a backdated issue time, a forged scheduled pending mark',
    [
      (own?.rotations ?? 0) > 0 && `the service rotated the token ${String(own?.rotations)} time(s)`,
      !(scheduledIn >= 0.9 * 3_600_000) && `the next rotation is ${String(scheduledIn)} ms after the issue time, under the 1 h floor`,
      sha256((await secretTokenAs(t, name)) ?? '') !== own?.tokenSha256 && 'the Secret does not hold the current token',
    ],
    0,
    { rotations: own?.rotations, callsOnOwnGroup: world.proxy.putsFor(id).length - putsBefore },
  );
}

/**
 * 13. Restarts as a weapon: a UserGroup whose spec.rolloutRestartTargets name a workload in the tenant's namespace
 * that the platform owns (it never named the group), and, by name, a workload in another tenant's namespace whose
 * owner did consent to a group of that name there; then rotations, and the consent annotation written as the
 * tenant. The workload's owner decides (its annotation), and targets never leave the UserGroup's namespace.
 */
export async function restartHijack(world: TenancyWorld, t: Tenant, other: Tenant): Promise<AttackOutcome> {
  const name = `restarter-${suffix()}`;
  const id = `${t.namespace}.${name}`;
  const apps = world.env.kc.makeApiClient(AppsV1Api);
  const spec = (app: string): V1DeploymentSpec => ({
    selector: { matchLabels: { app } },
    template: { metadata: { labels: { app } }, spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
  });
  // The platform's agent in the tenant's namespace (no consent), and the other tenant's web, consenting to "name".
  await apps.createNamespacedDeployment({ namespace: t.namespace, body: { metadata: { name: `agent-${name}` }, spec: spec('agent') } });
  await apps.createNamespacedDeployment({
    namespace: other.namespace,
    body: { metadata: { name: `web-${name}`, annotations: { 'usergroup.dev/restart-on-token-change': name } }, spec: spec('web') },
  });
  await createUserGroupAs(t, name, {
    userGroupId: id,
    name: 'Restarter',
    rolloutRestartTargets: [
      { kind: 'Deployment', name: `agent-${name}` },
      { kind: 'Deployment', name: `web-${name}` },
    ],
  });
  await waitForReason(world, t.namespace, name, 'Synced');
  const putsBefore = world.proxy.putsFor(id).length;
  const consentRefused = await forbidden(
    t.kc
      .makeApiClient(AppsV1Api)
      .patchNamespacedDeployment(
        { namespace: t.namespace, name: `agent-${name}`, body: { metadata: { annotations: { 'usergroup.dev/restart-on-token-change': name } } } },
        MERGE,
      ),
  );
  // One requested rotation: the tenant's right, and exactly once (the reliability run counts them).
  await annotateUserGroupAs(t, name, { [ROTATE]: 'restart-1' });
  await eventually('rotation restart-1 handled', async () =>
    (await userGroupIn(world, t.namespace, name))?.status?.rotation?.lastHandledRequest === 'restart-1' ? true : undefined,
  );
  // The Warnings are emitted after the rotation; give a (wrong) restart as long to land as a right one takes.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const agent = await apps.readNamespacedDeployment({ namespace: t.namespace, name: `agent-${name}` });
  const web = await apps.readNamespacedDeployment({ namespace: other.namespace, name: `web-${name}` });
  const own = serviceGroup(world, id);
  return outcome(
    "restart hijack: a platform workload that never consented, another tenant's consenting workload, the consent forged",
    [
      agent.metadata?.generation !== 1 && `the platform's agent was restarted (generation ${String(agent.metadata?.generation)})`,
      web.metadata?.generation !== 1 && `the other tenant's web was restarted (generation ${String(web.metadata?.generation)})`,
      !consentRefused && "the tenant wrote the consent annotation on the platform's agent",
    ],
    0,
    { ownRotations: own?.rotations, callsOnOwnGroup: world.proxy.putsFor(id).length - putsBefore },
  );
}

/** New Warning Events the operator writes per namespace at once, then one a second (src/kube/event-recorder.ts WARNING_BUDGET). */
const WARNING_BURST = 100;

/**
 * 14. A Warning flood: the tenant fills its namespace with UserGroups the rules refuse (another id space), so that
 * each costs the shared apiserver an Event write, and so that the operator's Events about another namespace's
 * objects (here the outsider's, in the same deployment) go missing. The per-namespace Warning budget decides:
 * every flood object still gets its condition, the flood buys at most the budget in Events, and the other
 * namespace's Warning is written.
 */
export async function warningFlood(world: TenancyWorld, attacker: Tenant, bystander: Tenant, victim: Tenant): Promise<AttackOutcome> {
  const started = Date.now();
  const count = WARNING_BURST + 30;
  const ids = Array.from({ length: count }, (_, i) => `${victim.namespace}.flood-${suffix()}-${i}`);
  const names = ids.map((_, i) => `flood-${suffix()}-${i}`);
  for (let i = 0; i < count; i += 10) {
    await Promise.all(names.slice(i, i + 10).map((name, j) => createUserGroupAs(attacker, name, { userGroupId: ids[i + j] ?? '', name: 'Flood' })));
  }
  for (const name of names) await waitForReason(world, attacker.namespace, name, 'UserGroupIdNotAllowed');
  const name = `bystander-${suffix()}`;
  await createUserGroupAs(bystander, name, { userGroupId: `${bystander.namespace}.by-${suffix()}`, name: 'Bystander' });
  await waitForReason(world, bystander.namespace, name, 'NamespaceNotAllowed');
  const warningsAbout = async (namespace: string, regarding: (n: string) => boolean): Promise<number> =>
    (await world.env.events.listNamespacedEvent({ namespace })).items.filter((e) => e.type === 'Warning' && regarding(e.regarding?.name ?? '')).length;
  const bystanderWarned = await eventually("the bystander's Warning", async () =>
    (await warningsAbout(bystander.namespace, (n) => n === name)) > 0 ? true : undefined,
  ).catch(() => false);
  const floodEvents = await warningsAbout(attacker.namespace, (n) => names.includes(n));
  const allowed = WARNING_BURST + Math.ceil((Date.now() - started) / 1000);
  return outcome(
    "a Warning flood: refused UserGroups to buy an Event write each and crowd out another namespace's Events",
    [
      !bystanderWarned && "the other namespace's Warning Event was not written",
      floodEvents > allowed && `the flood bought ${String(floodEvents)} Warning Events (budget ${String(allowed)})`,
    ],
    ids.reduce((calls, id) => calls + world.proxy.putsFor(id).length, 0),
    { floodObjects: count, floodEvents, budget: allowed },
  );
}

/**
 * 15. A sync-request flood on the platform's account: the tenant rewrites usergroup.dev/sync-requested-at on its
 * own groups as fast as the apiserver takes it, each value a new request for a PUT, to spend the account's rate
 * (--service-qps, shared by every tenant) and crowd out another tenant of the same deployment. The namespace's
 * sync-request budget decides: the flood buys at most burst + elapsed × rate PUTs, and the other tenant's one
 * request, made in the middle of the flood, is answered at once with one PUT.
 */
export async function syncFlood(world: TenancyWorld, attacker: Tenant, bystander: Tenant, floodMs = 8_000): Promise<AttackOutcome> {
  const names = Array.from({ length: 5 }, (_, i) => `syncflood-${suffix()}-${i}`);
  const ids = names.map((name) => `${attacker.namespace}.${name}`);
  await Promise.all(names.map((name, i) => createUserGroupAs(attacker, name, { userGroupId: ids[i] ?? '', name: 'Sync Flood' })));
  for (const name of names) await waitForReason(world, attacker.namespace, name, 'Synced');
  const quiet = `syncquiet-${suffix()}`;
  const quietId = `${bystander.namespace}.${quiet}`;
  await createUserGroupAs(bystander, quiet, { userGroupId: quietId, name: 'Quiet' });
  await waitForReason(world, bystander.namespace, quiet, 'Synced');
  const floodPuts = (): number => ids.reduce((calls, id) => calls + world.proxy.putsFor(id).length, 0);
  const before = floodPuts();
  const quietBefore = world.proxy.putsFor(quietId).length;

  const started = Date.now();
  let writes = 0;
  const flooding = (async () => {
    for (let round = 1; Date.now() - started < floodMs; round++) {
      await Promise.all(names.map((name) => annotateUserGroupAs(attacker, name, { [SYNC]: `flood-${String(round)}` })));
      writes += names.length;
    }
  })();
  // The other tenant asks for one sync in the middle of the flood.
  await new Promise((resolve) => setTimeout(resolve, floodMs / 4));
  const askedAt = Date.now();
  await annotateUserGroupAs(bystander, quiet, { [SYNC]: 'bystander-1' });
  const answeredInMs = await eventually(
    "the other tenant's sync request answered",
    async () => ((await userGroupIn(world, bystander.namespace, quiet))?.status?.lastHandledSyncRequest === 'bystander-1' ? Date.now() - askedAt : undefined),
    10_000,
    50,
  ).catch(() => undefined);
  await flooding;
  const bought = floodPuts() - before;
  const allowed = DEFAULT_REQUEST_BUDGETS.sync.burst + Math.ceil(((Date.now() - started) / 60_000) * DEFAULT_REQUEST_BUDGETS.sync.perMinute);
  const quietPuts = world.proxy.putsFor(quietId).length - quietBefore;
  return outcome(
    "a sync-request flood: new sync values as fast as the apiserver takes them, to spend the shared account's rate",
    [
      bought > allowed && `the flood bought ${String(bought)} PUTs (budget ${String(allowed)})`,
      answeredInMs === undefined && "the other tenant's sync request was not answered within 10 s",
      (answeredInMs ?? 0) > 5_000 && `the other tenant's sync request took ${String(answeredInMs)} ms`,
      quietPuts !== 1 && `the other tenant's one request cost ${String(quietPuts)} PUTs`,
    ],
    0,
    { requestsWritten: writes, floodPuts: bought, budget: allowed, bystanderAnsweredInMs: answeredInMs, bystanderPuts: quietPuts },
  );
}

/**
 * 16. Sync requests on a UserGroup naming an id another namespace holds: by its claim (the contested "shared.*",
 * claimed first by the owner) and outside the tenant's id space (the owner's "<namespace>.*"). A sync request asks
 * for a sync, not for an exception: no call for either copy, no status records the request, the owner's token is
 * untouched.
 */
export async function syncOthersId(world: TenancyWorld, owner: Tenant, attacker: Tenant): Promise<AttackOutcome> {
  const claimed = `shared.sync-${suffix()}`;
  const foreign = `${owner.namespace}.held-${suffix()}`;
  const ownerNames = { [claimed]: `owner-${suffix()}`, [foreign]: `owner-${suffix()}` };
  for (const [id, name] of Object.entries(ownerNames)) {
    await createUserGroupAs(owner, name, { userGroupId: id, name: 'Owner' });
    await waitForReason(world, owner.namespace, name, 'Synced');
  }
  const copies = { [claimed]: `copy-${suffix()}`, [foreign]: `copy-${suffix()}` };
  await createUserGroupAs(attacker, copies[claimed] ?? '', { userGroupId: claimed, name: 'Copy' });
  await createUserGroupAs(attacker, copies[foreign] ?? '', { userGroupId: foreign, name: 'Copy' });
  await waitForReason(world, attacker.namespace, copies[claimed] ?? '', 'UserGroupIdClaimed');
  await waitForReason(world, attacker.namespace, copies[foreign] ?? '', 'UserGroupIdNotAllowed');
  const putsBefore = world.proxy.putsFor(claimed).length + world.proxy.putsFor(foreign).length;
  const tokensBefore = await Promise.all(Object.values(ownerNames).map((name) => secretTokenAs(owner, name)));

  for (let i = 1; i <= 5; i++) {
    for (const copy of Object.values(copies)) await annotateUserGroupAs(attacker, copy, { [SYNC]: `steal-${String(i)}` });
  }
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const copiesNow = await Promise.all(Object.values(copies).map((name) => userGroupIn(world, attacker.namespace, name)));
  const tokensAfter = await Promise.all(Object.values(ownerNames).map((name) => secretTokenAs(owner, name)));
  const attackerSecrets = await Promise.all(Object.values(copies).map((name) => readSecretAs(attacker, name)));
  return outcome(
    'sync requests on a UserGroup naming an id another namespace holds (by claim, and outside the id space)',
    [
      ...copiesNow.map((ug) => ug?.status?.lastHandledSyncRequest !== undefined && `${ug.metadata.name} recorded a handled sync request`),
      ...copiesNow.map(
        (ug) =>
          !['UserGroupIdClaimed', 'UserGroupIdNotAllowed'].includes(readyOf(ug)?.reason ?? '') &&
          `${ug?.metadata.name ?? '?'} is now ${readyOf(ug)?.reason ?? '?'}`,
      ),
      tokensAfter.some((t, i) => t !== tokensBefore[i]) && "the owner's token changed",
      attackerSecrets.some((s) => s !== undefined) && 'a token Secret appeared in the attacker namespace',
    ],
    world.proxy.putsFor(claimed).length + world.proxy.putsFor(foreign).length - putsBefore,
    { requests: 10 },
  );
}

export type Attack = (world: TenancyWorld) => Promise<AttackOutcome>;

/** Every attack, with its actors: tenants[0] and tenants[1] sit in different deployments of the controller. */
export function catalogue(world: TenancyWorld): [string, Attack][] {
  const [a, b] = world.tenants;
  if (!a || !b) throw new Error('the attacks need two tenants');
  return [
    ['takeover', (w) => takeover(w, b)],
    ['unadmitted', (w) => unadmitted(w)],
    ['sleeper', (w) => sleeper(w, a, b)],
    ['across shards', (w) => acrossShards(w, a, b)],
    ['url spelling', (w) => urlSpelling(w, a, b)],
    ['squatter', (w) => squatter(w, b, a)],
    ['rotation hijack', (w) => rotationHijack(w, b)],
    ['forged handled', (w) => forgedHandled(w, a)],
    ['refused adoption', (w) => refusedAdoption(w, b)],
    ['rbac surface', (w) => rbacSurface(w, a)],
    ['metadata noise', (w) => metadataNoise(w, b)],
    ['rotation flood', (w) => rotationFlood(w, a)],
    ['restart hijack', (w) => restartHijack(w, a, b)],
    ['warning flood', (w) => warningFlood(w, a, w.outsider, b)],
  ];
}
