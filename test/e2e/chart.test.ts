import path from 'node:path';
import { Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { repoRoot } from '../../src/devtools/controlplane/binaries.js';
import { adminKubeConfig } from '../support/kube.js';
import { startSimulator, type Simulator } from '../../src/devtools/sim/server.js';
import { getJson, helm, kubectl, leaderPod, podReady, pods, waitFor, type LeaseView, type PodView } from './support/cluster.js';

// The Helm chart's pods on a real node (issue 19): kubelet, containerd, runc, the CNI bridge and kube-proxy of
// src/devtools/node, the operator image packed without Docker (devtools/node/operator-image.sh). The controller
// in the Pods talks to the apiserver through the default/kubernetes Service and to the service simulator on
// the node's address.

const RELEASE = 'ugo';
const SYSTEM = 'usergroup-system';
const TENANT = 'team-a';
const API_KEY = 'e2e-node-key';
const FULLNAME = `${RELEASE}-usergroup-operator`;
const SELECTOR = `app.kubernetes.io/instance=${RELEASE}`;
const chart = path.join(repoRoot, 'deploy/helm/usergroup-operator');

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
    await kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'usergroup.dev/v1alpha1',
        kind: 'UserGroup',
        metadata: { name: 'acme', namespace: TENANT },
        spec: { userGroupId: `${TENANT}.acme`, name: 'Acme Corporation' },
      }),
    );
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

      const request = `e2e-${Date.now()}`;
      await kubectl(['-n', TENANT, 'annotate', 'usergroup', 'acme', `usergroup.dev/rotate-requested-at=${request}`, '--overwrite']);
      await readyUserGroup('acme', (ug) => ug.status?.rotation?.lastHandledRequest === request);
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
    const request = `e2e-upgrade-${Date.now()}`;
    await kubectl(['-n', TENANT, 'annotate', 'usergroup', 'acme', `usergroup.dev/rotate-requested-at=${request}`, '--overwrite']);
    await readyUserGroup('acme', (ug) => ug.status?.rotation?.lastHandledRequest === request);
  });

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
