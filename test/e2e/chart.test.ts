import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, AuthenticationV1Api, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { adminKubeConfig, tokenKubeConfig } from '../support/kube.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import { getJson, helm, kubectl, leaderPod, podReady, pods, waitFor, type LeaseView, type PodView } from './support/cluster.js';

// The Helm chart's pods on a real node (issue 19): kubelet, containerd, runc, the CNI bridge and kube-proxy of
// devtools/node, the operator image built without Docker from the Dockerfile's stages (devtools/image).
// The controller in the Pods talks to the apiserver through the default/kubernetes Service and to the service simulator on
// the node's address.

const RELEASE = 'ugo';
const SYSTEM = 'usergroup-system';
const TENANT = 'team-a';
const API_KEY = 'e2e-node-key';
const FULLNAME = `${RELEASE}-usergroup-operator`;
const SELECTOR = `app.kubernetes.io/instance=${RELEASE}`;
const chart = path.join(repoRoot, 'deploy/helm/usergroup-operator');
// The TokenRequest API's minimum: the kubelet replaces the token at ~80% (~8 min), and the first one expires
// at 10 min, within the run.
const TOKEN_SECONDS = 600;
/** go-jose's DefaultLeeway, which kube-apiserver's service account token validation applies to `exp`. */
const JWT_LEEWAY_SECONDS = 60;

interface UserGroupView {
  metadata: { annotations?: Record<string, string> };
  status?: {
    conditions?: { type: string; status: string; reason?: string }[];
    tokenSecretName?: string;
    rotation?: { lastHandledRequest?: string };
  };
}

let sim: Simulator;

async function podSummary(): Promise<string> {
  const out = await kubectl(['-n', SYSTEM, 'get', 'pods', '-o', 'wide']).catch((err: unknown) => String(err));
  const events = await kubectl(['-n', SYSTEM, 'get', 'events', '--sort-by=.lastTimestamp']).catch((err: unknown) => String(err));
  return `${out}\n${events.split('\n').slice(-20).join('\n')}`;
}

async function readyUserGroup(name: string, check: (ug: UserGroupView) => boolean = () => true): Promise<UserGroupView> {
  return waitFor(
    `UserGroup ${TENANT}/${name} Ready`,
    async () => {
      const ug = await getJson<UserGroupView>(['-n', TENANT, 'get', 'usergroup', name]);
      const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
      return ready?.status === 'True' && check(ug) ? ug : undefined;
    },
    90_000,
  );
}

interface ProjectedToken {
  raw: string;
  claims: { iat: number; exp: number; 'kubernetes.io'?: { pod?: { name: string } } };
}

/**
 * The token the kubelet wrote into a Pod's projected volume, read on the node (the image has no shell to `cat`
 * it with). Only its claims are ever printed.
 */
function projectedToken(pod: PodView): ProjectedToken {
  const file = path.join(inject('nodeRoot'), 'kubelet/root/pods', pod.metadata.uid, 'volumes/kubernetes.io~projected/kube-api-access/token');
  const raw = fs.readFileSync(file, 'utf8').trim();
  const payload = raw.split('.')[1] ?? '';
  return { raw, claims: JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as ProjectedToken['claims'] };
}

/** Who the apiserver takes a bearer token for (a SelfSubjectReview), or the HTTP status it refuses it with. */
async function whoAmI(token: string): Promise<string | number> {
  try {
    const review = await tokenKubeConfig(token).makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    return review.status?.userInfo?.username ?? '';
  } catch (err) {
    if (err instanceof ApiException) return err.code;
    throw err;
  }
}

/** Applies UserGroup `name` in the tenant namespace with id `<tenant>.<name>`. */
async function applyUserGroup(name: string, displayName: string): Promise<void> {
  await kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'usergroup.dev/v1',
      kind: 'UserGroup',
      metadata: { name, namespace: TENANT },
      spec: { userGroupId: `${TENANT}.${name}`, name: displayName },
    }),
  );
}

/** Asks for a rotation of `acme`'s token and waits until the controller reports it handled. */
async function rotateAcme(tag: string): Promise<void> {
  const request = `e2e-${tag}-${Date.now()}`;
  await kubectl(['-n', TENANT, 'annotate', 'usergroup', 'acme', `usergroup.dev/rotate-requested-at=${request}`, '--overwrite']);
  await readyUserGroup('acme', (ug) => ug.status?.rotation?.lastHandledRequest === request);
}

describe('the chart on a one-node cluster', () => {
  beforeAll(async () => {
    sim = await startSimulator({ host: inject('nodeAddress'), port: 0, apiKeys: [API_KEY] });
    // Pod Security "restricted", enforced: the chart's Pods must pass it to be created at all.
    await kubectl(['create', 'namespace', SYSTEM]);
    await kubectl(['label', 'namespace', SYSTEM, 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/enforce-version=latest']);
    await kubectl(['create', 'namespace', TENANT]);
  });

  afterAll(async () => {
    await sim.stop();
  });

  it('installs: both replicas Running and Ready under Pod Security restricted, one holds the Lease', async () => {
    const image = inject('operatorImage');
    await helm([
      'install',
      RELEASE,
      chart,
      '--namespace',
      SYSTEM,
      '--set',
      `image.repository=${image.repository},image.tag=${image.tag},image.pullPolicy=Never`,
      '--set',
      `watchNamespaces={${TENANT}}`,
      '--set',
      `connection.url=${sim.url},connection.allowInsecure=true,connection.apiKey.value=${API_KEY}`,
      // Short leader election timings: a takeover within seconds.
      '--set',
      'leaderElection.leaseDuration=6s,leaderElection.renewDeadline=4s,leaderElection.retryPeriod=1s',
      '--set',
      `serviceAccount.tokenExpirationSeconds=${TOKEN_SECONDS}`,
    ]);
    const running = await waitFor(
      'both chart Pods Running and Ready',
      async () => {
        const list = await pods(SYSTEM, SELECTOR);
        return list.length === 2 && list.every((p) => p.status.phase === 'Running' && podReady(p)) ? list : undefined;
      },
      240_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await podSummary()}`);
    });
    for (const pod of running) {
      expect(pod.spec.nodeName).toBe(inject('nodeName'));
      expect(pod.status.containerStatuses?.[0]?.restartCount).toBe(0);
    }
    const leader = await waitFor('a leader', () => leaderPod(SYSTEM, FULLNAME), 60_000);
    expect(running.map((p) => p.metadata.name)).toContain(leader);
  });

  it('syncs a UserGroup through the in-cluster controller to the simulator', async () => {
    await applyUserGroup('acme', 'Acme Corporation');
    const ug = await readyUserGroup('acme');
    const groups = sim.groups(API_KEY);
    expect(groups.map((g) => g.userGroupId)).toEqual([`${TENANT}.acme`]);
    const secretName = ug.status?.tokenSecretName ?? '';
    expect(secretName).not.toBe('');
    const secret = await getJson<{ metadata: { annotations?: Record<string, string> } }>(['-n', TENANT, 'get', 'secret', secretName]);
    expect(secret.metadata.annotations?.['usergroup.dev/token-sha256']).toBe(groups[0]?.tokenSha256);
  });

  it('fails over when the leader Pod is deleted: the standby takes the Lease and completes a rotation', async () => {
    const before = await pods(SYSTEM, SELECTOR);
    const leader = await leaderPod(SYSTEM, FULLNAME);
    const standby = before.map((p) => p.metadata.name).find((n) => n !== leader);
    expect(leader).toBeDefined();
    expect(standby).toBeDefined();
    const tokenBefore = sim.groups(API_KEY)[0]?.tokenSha256;

    // Cordoned first, as a drain does: otherwise the Deployment's replacement Pod, which tries for the Lease as
    // soon as its caches are synced, may win the race for the released Lease against the standby's next retry.
    const node = inject('nodeName');
    await kubectl(['cordon', node]);
    try {
      const deleted = Date.now();
      await kubectl(['-n', SYSTEM, 'delete', 'pod', leader ?? '', '--wait=false']);
      await waitFor('the standby holding the Lease', async () => ((await leaderPod(SYSTEM, FULLNAME)) === standby ? true : undefined), 60_000).catch(
        async (err: unknown) => {
          const lease = await kubectl(['-n', SYSTEM, 'get', 'lease', FULLNAME, '-o', 'yaml']).catch(String);
          const logs = await kubectl(['-n', SYSTEM, 'logs', standby ?? '', '--tail=30']).catch(String);
          throw new Error(`${String(err)}\n${await podSummary()}\n${lease}\nstandby ${standby ?? ''}:\n${logs}`);
        },
      );

      process.stderr.write(`[e2e] the standby took the Lease ${Date.now() - deleted} ms after the leader Pod's deletion\n`);

      await rotateAcme('failover');
      const after = sim.groups(API_KEY)[0];
      expect(after?.tokenSha256).not.toBe(tokenBefore);
      expect(after?.rotations).toBeGreaterThan(0);
    } finally {
      // The Deployment's replacement Pod, Pending on the cordoned node, starts once it is schedulable again.
      await kubectl(['uncordon', node]);
    }
    await waitFor(
      'two Ready Pods again',
      async () => {
        const list: PodView[] = await pods(SYSTEM, SELECTOR);
        return list.length === 2 && list.every(podReady) ? true : undefined;
      },
      180_000,
    );
  });

  it('rolls the Pods on helm upgrade with a changed value: each old controller exits 0 on SIGTERM and releases the Lease', async () => {
    const old = new Set((await pods(SYSTEM, SELECTOR)).map((p) => p.metadata.name));
    const oldLeader = await leaderPod(SYSTEM, FULLNAME);
    // What the kubelet reports for each container that ends, and every holder the Lease has, as it happens.
    const exits = new Map<string, number>();
    const holders: string[] = [];
    const watch = new Watch(adminKubeConfig());
    const podWatch = await watch.watch(
      `/api/v1/namespaces/${SYSTEM}/pods`,
      {},
      (_type: string, pod: PodView) => {
        for (const c of pod.status.containerStatuses ?? []) {
          const exitCode = c.state?.terminated?.exitCode;
          if (c.name === 'controller' && exitCode !== undefined) exits.set(pod.metadata.name, exitCode);
        }
      },
      () => undefined,
    );
    const leaseWatch = await watch.watch(
      `/apis/coordination.k8s.io/v1/namespaces/${SYSTEM}/leases`,
      { fieldSelector: `metadata.name=${FULLNAME}` },
      (_type: string, lease: LeaseView) => {
        const holder = lease.spec.holderIdentity ?? '';
        if (holders[holders.length - 1] !== holder) holders.push(holder);
      },
      () => undefined,
    );
    try {
      await helm(['upgrade', RELEASE, chart, '--namespace', SYSTEM, '--reuse-values', '--set', 'controller.logLevel=debug']);
      await waitFor(
        'two new Ready Pods and the old ones gone',
        async () => {
          const all = await getJson<{ items: PodView[] }>(['-n', SYSTEM, 'get', 'pods', '-l', SELECTOR]);
          const fresh = all.items.filter((p) => !old.has(p.metadata.name));
          return all.items.length === 2 && fresh.length === 2 && fresh.every(podReady) ? true : undefined;
        },
        300_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${await podSummary()}`);
      });
      const leader = await waitFor(
        'a leader among the new Pods',
        async () => {
          const name = await leaderPod(SYSTEM, FULLNAME);
          return name !== undefined && !old.has(name) ? name : undefined;
        },
        60_000,
      );
      expect(leader).toBeDefined();
    } finally {
      podWatch.abort();
      leaseWatch.abort();
    }
    expect(Object.fromEntries(exits)).toMatchObject(Object.fromEntries([...old].map((name) => [name, 0])));
    // The old leader handed the Lease back on SIGTERM (an empty holder) rather than letting it expire.
    const oldIndex = holders.findLastIndex((h) => oldLeader !== undefined && h.startsWith(`${oldLeader}_`));
    expect(holders.slice(oldIndex + 1)[0], `Lease holders seen: ${holders.join(' -> ')}`).toBe('');
    // The controller keeps working after the rollout.
    await rotateAcme('upgrade');
  });

  it(
    "keeps working after the kubelet replaced the Pods' projected tokens and the first ones expired",
    async () => {
      const running = await pods(SYSTEM, SELECTOR);
      const leader = await leaderPod(SYSTEM, FULLNAME);
      const lease = await getJson<LeaseView>(['-n', SYSTEM, 'get', 'lease', FULLNAME]);
      const first = new Map(running.map((p) => [p.metadata.name, projectedToken(p)]));
      for (const [name, token] of first) {
        // What the apiserver issued for this Pod, as the chart asked.
        expect(token.claims.exp - token.claims.iat, name).toBe(TOKEN_SECONDS);
        expect(token.claims['kubernetes.io']?.pod?.name).toBe(name);
      }
      const expiry = Math.max(...[...first.values()].map((t) => t.claims.exp));
      process.stderr.write(
        `[e2e] waiting for the kubelet to replace the tokens and for the first ones to expire (${expiry - Math.floor(Date.now() / 1000)} s)\n`,
      );

      // The kubelet writes a new token into the volume at ~80% of its lifetime (plus up to its sync period).
      const replaced = await waitFor(
        "every Pod's token replaced by the kubelet",
        async () => {
          const now = running.map((p) => ({ name: p.metadata.name, token: projectedToken(p) }));
          return now.every(({ name, token }) => token.claims.iat > (first.get(name)?.claims.iat ?? Infinity)) ? now : undefined;
        },
        (expiry - Date.now() / 1000 + 30) * 1000,
      );
      for (const { name, token } of replaced) {
        const old = first.get(name);
        process.stderr.write(`[e2e] ${name}: token replaced ${token.claims.iat - (old?.claims.iat ?? 0)} s after it was issued\n`);
        expect(token.claims.exp).toBeGreaterThan(old?.claims.exp ?? Infinity);
      }

      // Past the first tokens' expiry (and the minute of leeway the apiserver's JWT validation allows for clock
      // skew) the apiserver refuses them: whatever the controllers do from here, they do with the kubelet's new ones.
      await sleep(Math.max(0, (expiry + JWT_LEEWAY_SECONDS + 2) * 1000 - Date.now()));
      for (const [name, token] of first) {
        const refused = await waitFor(`${name}'s first token refused`, () => whoAmI(token.raw).then((r) => (r === 401 ? r : undefined)), 30_000);
        expect(refused).toBe(401);
      }
      for (const { token } of replaced) {
        expect(await whoAmI(token.raw)).toBe(`system:serviceaccount:${SYSTEM}:${FULLNAME}`);
      }

      // The leader's watches reconnect and its writes go through: a rotation and a new UserGroup.
      await rotateAcme('token');
      await applyUserGroup('globex', 'Globex');
      await readyUserGroup('globex');
      expect(sim.groups(API_KEY).map((g) => g.userGroupId)).toContain(`${TENANT}.globex`);

      // Nobody lost the Lease (renewals every second throughout), no container restarted, and neither
      // controller met a refusal.
      const after = await getJson<LeaseView>(['-n', SYSTEM, 'get', 'lease', FULLNAME]);
      expect(await leaderPod(SYSTEM, FULLNAME)).toBe(leader);
      expect(after.spec.leaseTransitions).toBe(lease.spec.leaseTransitions);
      for (const pod of await pods(SYSTEM, SELECTOR)) {
        expect(first.has(pod.metadata.name)).toBe(true);
        expect(pod.status.containerStatuses?.[0]?.restartCount).toBe(0);
        const logs = await kubectl(['-n', SYSTEM, 'logs', pod.metadata.name]);
        expect(logs).not.toMatch(/Unauthorized|"(code|status|statusCode)":401\b/);
      }
    },
    (TOKEN_SECONDS + JWT_LEEWAY_SECONDS + 300) * 1000,
  );

  it('helm uninstall leaves the CRDs, the UserGroups and their Secrets', async () => {
    const ug = await getJson<UserGroupView>(['-n', TENANT, 'get', 'usergroup', 'acme']);
    await helm(['uninstall', RELEASE, '--namespace', SYSTEM, '--wait', '--timeout', '3m']);
    await waitFor(
      'the chart Pods gone',
      async () => ((await kubectl(['-n', SYSTEM, 'get', 'pods', '-l', SELECTOR, '-o', 'name'])).trim() === '' ? true : undefined),
      120_000,
    );
    const crds = await kubectl(['get', 'crd', '-o', 'name']);
    for (const crd of ['usergroups', 'usergroupservices', 'clusterusergroupservices', 'usergroupclaims']) {
      expect(crds).toContain(`customresourcedefinition.apiextensions.k8s.io/${crd}.usergroup.dev`);
    }
    expect(await kubectl(['-n', TENANT, 'get', 'usergroup', 'acme', '-o', 'name'])).toContain('acme');
    expect(await kubectl(['-n', TENANT, 'get', 'secret', ug.status?.tokenSecretName ?? '', '-o', 'name'])).toContain('secret/');
  });
});
