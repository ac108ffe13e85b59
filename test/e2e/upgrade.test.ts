import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { stringify } from 'yaml';
import { repoRoot } from '../support/repo-root.js';
import { buildGoTool } from '../../devtools/go-tool.js';
import { trustPlainHttpRegistry } from '../../devtools/node/containerd.js';
import { run } from '../../devtools/node/exec.js';
import { startRegistry, type Registry } from '../../devtools/registry.js';
import { pushRelease } from '../../devtools/release/push.js';
import { helmPush } from '../../devtools/release/run.js';
import type { ReleaseManifest } from '../../devtools/release/release.js';
import { startSimulator, type Simulator } from '../../src/sim/server.js';
import type { SimStats } from '../../src/sim/stats.js';
import { adminKubeConfig } from '../support/kube.js';
import { parsePrometheus } from '../support/prometheus-text.js';
import { getJson, helm, kubectl, leaderPod, podReady, waitFor, type PodView } from './support/cluster.js';
import { documentedCommands } from './support/doc-commands.js';
import { extractPreviousRelease, PREVIOUS_RELEASE } from './support/previous-release.js';
import { E2E_UPGRADE_REGISTRY, readRelease, releaseDir } from './support/release.js';
import { workflowUploads } from '../support/release-workflow.js';
import { ResumableWatch } from './support/resumable-watch.js';
import {
  LeaseRecorder,
  OperatorLogs,
  PodRecorder,
  ReadyRecorder,
  readyOf,
  since,
  type ConsumerPodView,
  type LeaseObject,
  type UserGroupView,
} from './support/upgrade-observers.js';

// Issue 32: upgrade from the previous release (0.2.0, built from its own commit: support/previous-release.ts) to this
// tree, and roll back, on the real node, with UserGroups a user wrote for 0.2.0 (usergroup.dev/v1alpha1) and a
// workload that consumes their tokens. Issue 43: both releases come from an OCI registry on the node (crane's), as
// users get them: 0.2.0's image and packaged chart pushed there and installed from oci://; this tree's release (made
// by `npm run test:e2e`, pushed as `npm run release:push` does) upgraded to by running README.md's Upgrading block and
// rolled back by docs/operations.md's Rolling back block, read from those files, in a flat download of the release's
// files, with nothing from the clone (the only edits: REGISTRY → the test registry, `--plain-http` on helm's
// oci:// commands as the README says for a registry without TLS, and the revision number). Watches run through both: every UserGroup's Ready condition, the consumer's
// Pods, the leader Lease and the operator Pods' logs. Each step must cost nothing: no service call, no token
// changed, no consumer restarted, Ready never False or Unknown; the Lease ends with a Pod of the new ReplicaSet.
//
// The release and namespace are the README's (usergroup-operator), other files' are not; it needs
// the 0.2.0 CRDs, so it deletes the usergroup.dev CRDs another file left (chart.test.ts keeps them after its
// uninstall, on purpose) and deletes them again at the end, so the next file's chart installs its own.

/** The README's release and namespace: its commands run as they are written. */
const RELEASE = 'usergroup-operator';
const SYSTEM = 'usergroup-operator';
const TENANT = 'ugo-upgrade-team';
/** Issue 42: a namespace of deletionPolicy Rotate UserGroups, made under this release, present at the rollback. */
const ROTATING = 'ugo-upgrade-rotating';
const ROTATE_GROUPS = 3;
/** How long a deletion under the rolled-back release may take (docs/operations.md, "Rolling back"): no finalizer holds it. */
const DELETION_BOUND_MS = 60_000;
/** The release name contains the chart's, so it is the objects' name (the Lease's). */
const FULLNAME = RELEASE;
const SELECTOR = `app.kubernetes.io/instance=${RELEASE}`;
const API_KEY = 'e2e-upgrade-key';
const API_KEY_SECRET = 'upgrade-api-key';
const SCRAPER = 'upgrade-scraper';
const CONSUMER = 'consumer';
/** More than the 50 issue 32 asks for; every few of them use another optional field (userGroupManifest). */
const GROUPS = 60;
const CRDS = ['usergroups', 'usergroupservices', 'clusterusergroupservices', 'usergroupclaims'].map((p) => `${p}.usergroup.dev`);
/** No service call for this long after everything else has settled. */
const QUIET_MS = 5_000;
const BUSYBOX = 'usergroup-operator.dev/e2e/busybox:1';
const THIS_VERSION = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;

let sim: Simulator;
let work: string;
let registry: Registry;
/** This tree's release as made by `npm run test:e2e`, and the reference its image runs under once upgraded to. */
let manifest: ReleaseManifest;
let thisImage: string;
/** 0.2.0 as the registry serves it: `helm install` takes its chart from oci://, the kubelet pulls its image by tag. */
let previousImage: string;
/** The release's files as a user downloads them (flat), where the documented commands run; its plugin on PATH. */
let download: string;
let pluginDir: string;
let scraperToken: string;
let groupNames: string[] = [];
/** The UserGroups the leader must count Ready when a step has settled (the Rotate ones join after the upgrade). */
let expectedGroups = GROUPS;
let watches: { stop(): Promise<void> }[] = [];
const ready = new ReadyRecorder();
const consumerPods = new PodRecorder();
const lease = new LeaseRecorder();
let logs: OperatorLogs | undefined;
/** The figures the closing note quotes, printed at the end. */
const figures: string[] = [];

function groupName(i: number): string {
  return `g-${String(i).padStart(2, '0')}`;
}

/**
 * UserGroup i as a user wrote it for 0.2.0 (usergroup.dev/v1alpha1), every few with one more optional field, so the
 * new version meets each kind of stored state: mapping, properties, its own Secret name, key, labels and
 * annotations, a scheduled rotation (not due for 30 days), and g-00 lists the consumer as a restart target.
 */
function userGroupManifest(i: number): Record<string, unknown> {
  const name = groupName(i);
  const spec: Record<string, unknown> = { userGroupId: `${TENANT}.${name}`, name: `Customer ${i}` };
  if (i % 3 === 0) spec['mapping'] = { sales: `sales_${i}`, support: `support_${i}` };
  if (i % 4 === 1) spec['properties'] = { region: 'eu-west', seats: 10 * i, flags: { beta: i % 2 === 0 } };
  if (i % 5 === 3) spec['tokenSecret'] = { name: `${name}-dashboard-token`, key: 'api-token', labels: { app: 'dashboards' }, annotations: { owner: 'team' } };
  if (i % 7 === 2) spec['rotation'] = { maxTokenAge: '720h' };
  if (i === 0) spec['rolloutRestartTargets'] = [{ kind: 'Deployment', name: CONSUMER }];
  return { apiVersion: 'usergroup.dev/v1alpha1', kind: 'UserGroup', metadata: { name, namespace: TENANT }, spec };
}

/**
 * The values 0.2.0 is installed with: its image from the registry, by tag. The upgrade and the rollback steps reuse
 * them (`--reset-then-reuse-values`, as the README does) and set only the image.
 */
function valuesFile(): string {
  const file = path.join(work, `values-${PREVIOUS_RELEASE.version}.json`);
  const values = {
    image: { repository: `${registry.host}/usergroup-operator`, tag: PREVIOUS_RELEASE.version, pullPolicy: 'IfNotPresent' },
    watchNamespaces: [TENANT, ROTATING],
    connection: { url: sim.url, allowInsecure: true, apiKey: { existingSecret: API_KEY_SECRET, key: 'apiKey' } },
    // Short timings, as chart.test.ts: a hand-over within seconds.
    leaderElection: { leaseDuration: '6s', renewDeadline: '4s', retryPeriod: '1s' },
    // Which reconcile decided what, should a step call the service after all.
    controller: { logLevel: 'debug' },
    rolloutRestart: { enabled: true },
  };
  fs.writeFileSync(file, JSON.stringify(values));
  return file;
}

function callsOf(stats: SimStats): number {
  return Object.values(stats.operations).reduce((sum, outcomes) => sum + Object.values(outcomes).reduce((a, b) => a + b, 0), 0);
}

function sha256(data: string): string {
  return createHash('sha256').update(data).digest('hex');
}

interface SecretView {
  metadata: { name: string; resourceVersion: string };
  data?: Record<string, string>;
}

/** Every token Secret's data as hashes (a token is never printed, not even in a failed assertion's diff). */
async function tokenSecrets(): Promise<Map<string, { data: Record<string, string>; resourceVersion: string }>> {
  const list = await getJson<{ items: SecretView[] }>(['-n', TENANT, 'get', 'secrets', '-l', 'app.kubernetes.io/managed-by=usergroup-operator']);
  return new Map(
    list.items.map((s) => [
      s.metadata.name,
      { data: Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, sha256(v)])), resourceVersion: s.metadata.resourceVersion },
    ]),
  );
}

async function userGroups(): Promise<UserGroupView[]> {
  return (await getJson<{ items: UserGroupView[] }>(['-n', TENANT, 'get', 'usergroups.v1alpha1.usergroup.dev'])).items;
}

interface OperatorPod extends PodView {
  status: PodView['status'] & { podIP?: string };
  spec: PodView['spec'] & { containers: { name: string; image: string }[] };
}

async function operatorPods(): Promise<OperatorPod[]> {
  return (await getJson<{ items: OperatorPod[] }>(['-n', SYSTEM, 'get', 'pods', '-l', SELECTOR])).items;
}

/** The sum of a metric family's samples (optionally only those with `labels`) on a Pod's /metrics. */
async function scrape(pod: OperatorPod): Promise<(name: string, labels?: Record<string, string>) => number> {
  const res = await fetch(`http://${pod.status.podIP ?? ''}:8080/metrics`, { headers: { authorization: `Bearer ${scraperToken}` } });
  if (res.status !== 200) throw new Error(`/metrics of ${pod.metadata.name}: ${res.status}`);
  const families = parsePrometheus(await res.text());
  return (name, labels = {}) =>
    (families.get(name)?.samples ?? [])
      .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      .reduce((sum, s) => sum + s.value, 0);
}

async function podSummary(): Promise<string> {
  const out = await kubectl(['-n', SYSTEM, 'get', 'pods', '-o', 'wide']).catch((err: unknown) => String(err));
  const events = await kubectl(['-n', SYSTEM, 'get', 'events', '--sort-by=.lastTimestamp']).catch((err: unknown) => String(err));
  return `${out}\n${events.split('\n').slice(-20).join('\n')}`;
}

/** What a step must leave unchanged, read just before it. */
interface Baseline {
  readonly at: number;
  readonly calls: number;
  readonly secrets: Awaited<ReturnType<typeof tokenSecrets>>;
  readonly groups: Map<string, { generation: number | undefined; readySince: string | undefined }>;
  readonly simTokens: Map<string, { tokenSha256: string; updatedAt: string }>;
  readonly consumer: { generation: number; template: string; pods: Record<string, { name: string; restarts: number }> };
  readonly operatorPods: Set<string>;
}

async function baseline(): Promise<Baseline> {
  const deployment = await getJson<{ metadata: { generation: number }; spec: { template: unknown } }>(['-n', TENANT, 'get', 'deployment', CONSUMER]);
  const pods = await getJson<{ items: (ConsumerPodView & PodView)[] }>(['-n', TENANT, 'get', 'pods', '-l', `app=${CONSUMER}`]);
  return {
    at: Date.now(),
    calls: callsOf(sim.stats()),
    secrets: await tokenSecrets(),
    groups: new Map((await userGroups()).map((ug) => [ug.metadata.name, { generation: ug.metadata.generation, readySince: readyOf(ug)?.lastTransitionTime }])),
    simTokens: new Map(sim.groups(API_KEY).map((g) => [g.userGroupId, { tokenSha256: g.tokenSha256, updatedAt: g.updatedAt }])),
    consumer: {
      generation: deployment.metadata.generation,
      template: JSON.stringify(deployment.spec.template),
      pods: Object.fromEntries(
        pods.items.map((p) => [p.metadata.uid, { name: p.metadata.name, restarts: p.status.containerStatuses?.[0]?.restartCount ?? -1 }]),
      ),
    },
    operatorPods: new Set((await operatorPods()).map((p) => p.metadata.name)),
  };
}

interface Settled {
  /** From the start of the helm command until everything below held. */
  readonly ms: number;
  readonly leader: string;
  readonly reconciles: number;
  /** What the new leader counts of its own service calls (usergroup_service_requests_total) once settled. */
  readonly leaderServiceRequests: number;
}

/**
 * Waits until a helm upgrade or rollback has settled: the Deployment rolled out (two Ready Pods, all of them
 * new and running the image reference `wanted`, none left terminating), the Lease held by one of the new Pods, that leader's own
 * /metrics say it runs `version`, counts every UserGroup Ready=True in its cache and has reconciled at least as
 * many times as there are UserGroups (each is queued when its informer lists it) with an empty queue, and every
 * UserGroup reads Ready=True for its generation. The quiet period follows (the caller's).
 */
async function settle(before: Baseline, wanted: string, version: string, started: number): Promise<Settled> {
  const fresh = await waitFor(
    `two new Ready Pods running ${wanted}, the old ones gone`,
    async () => {
      const all = await operatorPods();
      const ok =
        all.length === 2 &&
        all.every((p) => !before.operatorPods.has(p.metadata.name) && p.metadata.deletionTimestamp === undefined && podReady(p)) &&
        all.every((p) => p.spec.containers.find((c) => c.name === 'controller')?.image === wanted);
      return ok ? all : undefined;
    },
    240_000,
  ).catch(async (err: unknown) => {
    throw new Error(`${String(err)}\n${await podSummary()}`);
  });
  const leader = await waitFor(
    'the Lease held by a new Pod',
    async () => {
      const name = await leaderPod(SYSTEM, FULLNAME);
      return fresh.find((p) => p.metadata.name === name);
    },
    60_000,
  );
  let reconciles = 0;
  let leaderServiceRequests = 0;
  await waitFor(
    `the leader ${leader.metadata.name} (${version}) has reconciled every UserGroup and is idle`,
    async () => {
      const metric = await scrape(leader);
      reconciles = metric('usergroup_reconcile_total');
      const ok =
        metric('usergroup_build_info', { version }) === 1 &&
        metric('usergroup_usergroups', { ready: 'True' }) === expectedGroups &&
        reconciles >= expectedGroups &&
        metric('workqueue_depth') === 0;
      leaderServiceRequests = metric('usergroup_service_requests_total');
      return ok ? true : undefined;
    },
    120_000,
  );
  await waitFor(
    'every UserGroup Ready=True for its generation',
    async () => {
      const list = await userGroups();
      return list.length === GROUPS && list.every((ug) => readyOf(ug)?.status === 'True' && ug.status?.observedGeneration === ug.metadata.generation)
        ? true
        : undefined;
    },
    60_000,
  );
  return { ms: Date.now() - started, leader: leader.metadata.name, reconciles, leaderServiceRequests };
}

/** Watches the service for QUIET_MS and returns the calls it saw meanwhile. */
async function quietPeriod(): Promise<number> {
  const at = callsOf(sim.stats());
  await sleep(QUIET_MS);
  return callsOf(sim.stats()) - at;
}

/** The four properties of a step that costs nothing, against what was read before it. */
async function expectNothingChanged(step: string, before: Baseline, settled: Settled, calls: number, note = ''): Promise<void> {
  const handOvers = lease.handOversSince(before.at);
  const flips = ready.sightingsSince(before.at);
  const after = await tokenSecrets();
  const rewritten = [...after].filter(([name, s]) => before.secrets.get(name)?.resourceVersion !== s.resourceVersion).length;
  const statusChanges = ready.changesTotal();
  process.stderr.write(
    `[e2e upgrade] ${step}: settled in ${(settled.ms / 1000).toFixed(1)} s (helm start → new Pods Ready, Lease on ${settled.leader}, ` +
      `its ${settled.reconciles} reconciles done, every UserGroup Ready), then ${QUIET_MS / 1000} s quiet; service calls ${calls}; ` +
      `Lease holders ${handOvers.map((h) => `${h.holder || '(released)'} ${since(before.at, h.at)}`).join(' → ')}; ` +
      `Ready not True seen ${flips.length}×; token Secrets rewritten ${rewritten}; UserGroup changes seen so far ${statusChanges}\n`,
  );
  figures.push(
    `| ${step} | ${(settled.ms / 1000).toFixed(1)} s | ${calls} | ${handOvers.length} (${handOvers.map((h) => (h.holder === '' ? 'released' : h.holder.replace(/_[0-9a-f]{8}$/, ''))).join(' → ')}) | ${flips.length} | ${rewritten} | ${note} |`,
  );

  // 1. No service call, from just before the step until the quiet period after it settled.
  const callLines = logs?.serviceCallLines(before.at) ?? [];
  const touched = sim
    .groups(API_KEY)
    .filter((g) => before.simTokens.get(g.userGroupId)?.updatedAt !== g.updatedAt)
    .map((g) => g.userGroupId);
  expect({ calls, leaderCalls: settled.leaderServiceRequests, touched, callLines }, `service calls during ${step}`).toEqual({
    calls: 0,
    leaderCalls: 0,
    touched: [],
    callLines: [],
  });

  // 2. Every token byte-identical, and still the service's.
  expect(new Map([...after].map(([n, s]) => [n, s.data]))).toEqual(new Map([...before.secrets].map(([n, s]) => [n, s.data])));
  for (const g of sim.groups(API_KEY)) expect(g.tokenSha256, g.userGroupId).toBe(before.simTokens.get(g.userGroupId)?.tokenSha256);

  // 3. The consumer untouched: the same Pods, no restart, no new rollout.
  const deployment = await getJson<{ metadata: { generation: number }; spec: { template: unknown } }>(['-n', TENANT, 'get', 'deployment', CONSUMER]);
  expect(deployment.metadata.generation).toBe(before.consumer.generation);
  expect(JSON.stringify(deployment.spec.template)).toBe(before.consumer.template);
  const pods = await getJson<{ items: (ConsumerPodView & PodView)[] }>(['-n', TENANT, 'get', 'pods', '-l', `app=${CONSUMER}`]);
  expect(
    Object.fromEntries(pods.items.map((p) => [p.metadata.uid, { name: p.metadata.name, restarts: p.status.containerStatuses?.[0]?.restartCount ?? -1 }])),
  ).toEqual(before.consumer.pods);
  expect(consumerPods.podsSince(before.at), 'every consumer Pod the watch saw during the step').toEqual(before.consumer.pods);

  // 4. Ready never anything but True, as watched; and the condition's lastTransitionTime unchanged (a flip the
  // watch could have missed would have moved it).
  expect(flips.map((f) => `${since(before.at, f.at)} ${f.name} ${f.event} Ready=${f.status} ${f.reason ?? ''}`)).toEqual([]);
  for (const ug of await userGroups()) {
    const was = before.groups.get(ug.metadata.name);
    expect({ name: ug.metadata.name, generation: ug.metadata.generation, readySince: readyOf(ug)?.lastTransitionTime }).toEqual({
      name: ug.metadata.name,
      ...was,
    });
  }

  // The Lease went to the new leader: the last holder is a Pod of the new ReplicaSet, the old one released it.
  expect(handOvers.at(-1)?.holder.replace(/_[0-9a-f]{8}$/, '')).toBe(settled.leader);
  expect(before.operatorPods.has(settled.leader)).toBe(false);
}

/**
 * A documented command as a user of this test's registry types it: REGISTRY is the registry, and the helm commands
 * that read oci:// get `--plain-http` (README.md, Upgrading: a registry without TLS needs it).
 */
function forTestRegistry(command: string, placeholders: Readonly<Record<string, string>> = {}): string {
  let typed = command.replaceAll('REGISTRY', registry.host);
  for (const [placeholder, value] of Object.entries(placeholders)) typed = typed.replaceAll(placeholder, value);
  return typed.includes('oci://') ? typed.replace(/^helm (\S+) /, 'helm $1 --plain-http ') : typed;
}

/**
 * Runs a documented command in bash, as a user's shell would, in the flat download of the release: kubectl, helm
 * and the release's kubectl plugin on PATH, the cluster in KUBECONFIG, IMAGE and CHART the release's digests (as
 * README.md's Install in a cluster sets them from release.json). Prints the command: the figures quote it.
 */
async function runDocumented(command: string, timeoutMs = 300_000): Promise<{ ms: number; out: string }> {
  process.stderr.write(`[e2e upgrade] $ ${command}\n`);
  const started = Date.now();
  const out = await run('bash', ['-euo', 'pipefail', '-c', command], {
    cwd: download,
    timeoutMs,
    env: {
      ...process.env,
      PATH: `${inject('binDir')}:${pluginDir}:${process.env['PATH'] ?? ''}`,
      KUBECONFIG: inject('kubeconfig'),
      IMAGE: manifest.image.digest,
      CHART: manifest.chart.digest,
    },
  });
  return { ms: Date.now() - started, out };
}

describe(`upgrade from ${PREVIOUS_RELEASE.version} and rollback, on the node`, () => {
  beforeAll(async () => {
    const setup = Date.now();
    const previousTarball = inject('previousOperatorImageTarball');
    if (previousTarball === null) {
      throw new Error(
        `no ${PREVIOUS_RELEASE.version} image: run the e2e tests with \`npm run test:e2e\`, which builds it (test/e2e/support/previous-release-image-cli.ts)`,
      );
    }
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-upgrade-'));
    const crane = buildGoTool('crane', 'devtools/crane/build.sh');
    const helmBin = path.join(inject('binDir'), 'helm');
    registry = await startRegistry({
      crane,
      dir: path.join(inject('nodeRoot'), 'upgrade-registry'),
      address: inject('nodeAddress'),
      port: E2E_UPGRADE_REGISTRY.port,
    });
    trustPlainHttpRegistry({ root: inject('nodeRoot') }, registry.host);

    // 0.2.0 as it would have been published: its image (built from its commit) under its version tag, its chart
    // packaged from its commit and pushed as `npm run release:push` pushes a chart.
    const layout = path.join(work, 'previous-image');
    fs.mkdirSync(layout);
    await run('tar', ['-xf', previousTarball, '-C', layout]);
    previousImage = `${registry.host}/usergroup-operator:${PREVIOUS_RELEASE.version}`;
    await run(crane, ['push', '--insecure', layout, previousImage], { timeoutMs: 300_000 });
    const previousTree = extractPreviousRelease(path.join(work, PREVIOUS_RELEASE.version), ['deploy/helm/usergroup-operator']);
    await run(helmBin, ['package', path.join(previousTree, 'deploy/helm/usergroup-operator'), '--destination', work]);
    await helmPush(helmBin, path.join(work, `usergroup-operator-${PREVIOUS_RELEASE.version}.tgz`), `${registry.host}/charts/usergroup-operator`, true);

    // This tree's release, pushed, and downloaded as the workflow uploads it; its plugin where kubectl finds it.
    manifest = readRelease(releaseDir());
    // To this file's registry, not the one the release was made for (its signatures sign digests: they still hold).
    const pushed = await pushRelease({ tools: { crane, helm: helmBin }, dir: releaseDir(), manifest, registry: registry.host, plainHttp: true });
    thisImage = pushed.image;
    expect(thisImage).toBe(`${registry.host}/usergroup-operator@${manifest.image.digest}`);
    download = fs.mkdtempSync(path.join(work, 'download-'));
    for (const file of workflowUploads(releaseDir())) fs.copyFileSync(path.join(releaseDir(), file), path.join(download, file));
    pluginDir = fs.mkdtempSync(path.join(work, 'bin-'));
    await run('tar', ['-xzf', path.join(download, 'kubectl-usergroup_linux_amd64.tar.gz'), '-C', pluginDir, 'kubectl-usergroup']);

    sim = await startSimulator({ host: inject('nodeAddress'), port: 0, apiKeys: [API_KEY] });
    // A user installing 0.2.0 had no usergroup.dev CRDs yet: another file's leftovers (chart.test.ts keeps its CRDs
    // after uninstalling, on purpose) would make helm skip the 0.2.0 ones.
    const left = (await kubectl(['get', 'crd', '-o', 'name'])).split('\n').filter((l) => l.endsWith('.usergroup.dev'));
    if (left.length > 0) {
      process.stderr.write(`[e2e upgrade] deleting the usergroup.dev CRDs another test left: ${left.join(' ')}\n`);
      await kubectl(['delete', '--wait', ...left], undefined, 180_000);
    }
    await kubectl(['create', 'namespace', SYSTEM]);
    await kubectl(['label', 'namespace', SYSTEM, 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/enforce-version=latest']);
    await kubectl(['create', 'namespace', TENANT]);
    await kubectl(['create', 'namespace', ROTATING]);
    await kubectl(['-n', SYSTEM, 'create', 'secret', 'generic', API_KEY_SECRET, `--from-literal=apiKey=${API_KEY}`]);
    process.stderr.write(`[e2e upgrade] set up in ${((Date.now() - setup) / 1000).toFixed(1)} s\n`);
  });

  afterAll(async () => {
    await Promise.all(watches.map((w) => w.stop()));
    logs?.stop();
    if (figures.length > 0) {
      process.stderr.write(
        [
          `[e2e upgrade] ${PREVIOUS_RELEASE.version} (${PREVIOUS_RELEASE.commit.slice(0, 7)}) ⇄ ${THIS_VERSION}, ${GROUPS} UserGroups (v1alpha1 manifests), a 2-replica consumer, 2 operator replicas`,
          '| step | helm start → settled | service calls | Lease holders after the step began | Ready not True | token Secrets rewritten | |',
          '|---|---|---|---|---|---|---|',
          ...figures,
          '',
        ].join('\n'),
      );
    }
    // The release and the CRDs gone before the next file (its chart installs its own CRDs); the namespaces,
    // emptied with them, may finish terminating while it runs.
    const cleanup = Date.now();
    await helm(['uninstall', RELEASE, '--namespace', SYSTEM, '--wait', '--timeout', '3m']).catch(() => undefined);
    await kubectl(['delete', 'clusterrolebinding', SCRAPER, '--ignore-not-found']).catch(() => undefined);
    await kubectl(['delete', 'crd', ...CRDS, '--ignore-not-found', '--wait'], undefined, 180_000).catch(() => undefined);
    await kubectl(['delete', 'namespace', TENANT, SYSTEM, ROTATING, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    await (sim as Simulator | undefined)?.stop();
    await (registry as Registry | undefined)?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
    process.stderr.write(`[e2e upgrade] cleaned up in ${((Date.now() - cleanup) / 1000).toFixed(1)} s\n`);
  });

  it(`installs ${PREVIOUS_RELEASE.version} from the registry (oci://, built from its own commit): its chart, CRDs and image; ${GROUPS} v1alpha1 UserGroups synced; a consumer of their Secrets`, async () => {
    const started = Date.now();
    await helm([
      'install',
      RELEASE,
      `oci://${registry.host}/charts/usergroup-operator`,
      '--version',
      PREVIOUS_RELEASE.version,
      '--plain-http',
      '--namespace',
      SYSTEM,
      '-f',
      valuesFile(),
    ]);
    // The 0.2.0 CRDs, as its chart installed them: v1alpha1 only.
    const crd = await getJson<{ spec: { versions: { name: string; storage: boolean }[] } }>(['get', 'crd', 'usergroups.usergroup.dev']);
    expect(crd.spec.versions.map((v) => `${v.name}${v.storage ? ' (storage)' : ''}`)).toEqual(['v1alpha1 (storage)']);
    const running = await waitFor(
      'both 0.2.0 Pods Ready',
      async () => {
        const list = await operatorPods();
        return list.length === 2 && list.every(podReady) ? list : undefined;
      },
      240_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await podSummary()}`);
    });
    const leader = await waitFor('a leader', () => leaderPod(SYSTEM, FULLNAME), 60_000);
    expect(running.map((p) => p.metadata.name)).toContain(leader);

    // Who reads the leaders' /metrics: a ServiceAccount bound to the chart's metrics-reader ClusterRole.
    await kubectl(['-n', SYSTEM, 'create', 'serviceaccount', SCRAPER]);
    await kubectl(['create', 'clusterrolebinding', SCRAPER, `--clusterrole=${FULLNAME}-metrics-reader`, `--serviceaccount=${SYSTEM}:${SCRAPER}`]);
    scraperToken = (await kubectl(['-n', SYSTEM, 'create', 'token', SCRAPER, '--duration=2h'])).trim();
    const metric = await scrape(running.find((p) => p.metadata.name === leader) ?? running[0]!);
    expect(metric('usergroup_build_info', { version: PREVIOUS_RELEASE.version })).toBe(1);

    groupNames = Array.from({ length: GROUPS }, (_, i) => groupName(i));
    await kubectl(['apply', '-f', '-'], Array.from({ length: GROUPS }, (_, i) => stringify(userGroupManifest(i))).join('---\n'));
    await waitFor(
      `${GROUPS} UserGroups Ready`,
      async () => {
        const list = await userGroups();
        return list.length === GROUPS && list.every((ug) => readyOf(ug)?.status === 'True') ? true : undefined;
      },
      180_000,
    );
    expect(
      sim
        .groups(API_KEY)
        .map((g) => g.userGroupId)
        .sort(),
    ).toEqual(groupNames.map((n) => `${TENANT}.${n}`));

    // One token rotated on request under 0.2.0: its annotation stays, and a later version must not rotate again.
    const request = `before-upgrade-${Date.now()}`;
    await kubectl(['-n', TENANT, 'annotate', 'usergroups.v1alpha1.usergroup.dev', 'g-02', `usergroup.dev/rotate-requested-at=${request}`]);
    await waitFor(
      'g-02 rotated',
      async () => {
        const ug = await getJson<UserGroupView>(['-n', TENANT, 'get', 'usergroups.v1alpha1.usergroup.dev', 'g-02']);
        return ug.status?.rotation?.lastHandledRequest === request && readyOf(ug)?.status === 'True' ? true : undefined;
      },
      60_000,
    );
    expect(sim.stats(API_KEY).rotationsByUserGroupId).toEqual({ [`${TENANT}.g-02`]: 1 });

    // The consumer: g-00's Secret as files (and it consents to be restarted for g-00's new tokens), g-01's token in
    // an environment variable. Any restart of it would show as a new Pod or a restartCount.
    const secretOf = async (name: string): Promise<{ name: string; key: string }> => {
      const ug = await getJson<UserGroupView & { spec: { tokenSecret?: { key?: string } } }>(['-n', TENANT, 'get', 'usergroups.v1alpha1.usergroup.dev', name]);
      return { name: ug.status?.tokenSecretName ?? '', key: ug.spec.tokenSecret?.key ?? 'token' };
    };
    const mounted = await secretOf('g-00');
    const env = await secretOf('g-01');
    await kubectl(
      ['apply', '-f', '-'],
      stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: CONSUMER, namespace: TENANT, annotations: { 'usergroup.dev/restart-on-token-change': 'g-00' } },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: CONSUMER } },
          template: {
            metadata: { labels: { app: CONSUMER } },
            spec: {
              securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534 },
              containers: [
                {
                  name: 'app',
                  image: BUSYBOX,
                  imagePullPolicy: 'Never',
                  command: ['sh', '-c', `while :; do test -s /tokens/${mounted.key} && test -n "$G01_TOKEN" || echo "a token is missing"; sleep 5; done`],
                  env: [{ name: 'G01_TOKEN', valueFrom: { secretKeyRef: { name: env.name, key: env.key } } }],
                  volumeMounts: [{ name: 'g-00', mountPath: '/tokens', readOnly: true }],
                },
              ],
              volumes: [{ name: 'g-00', secret: { secretName: mounted.name } }],
            },
          },
        },
      }),
    );
    await waitFor(
      'the consumer rolled out',
      async () => {
        const d = await getJson<{
          metadata: { generation: number };
          status: { observedGeneration?: number; readyReplicas?: number; updatedReplicas?: number };
        }>(['-n', TENANT, 'get', 'deployment', CONSUMER]);
        return d.status.observedGeneration === d.metadata.generation && d.status.readyReplicas === 2 && d.status.updatedReplicas === 2 ? true : undefined;
      },
      120_000,
    );
    expect(callsOf(sim.stats())).toBe(GROUPS + 1);
    process.stderr.write(
      `[e2e upgrade] ${PREVIOUS_RELEASE.version} installed, ${GROUPS} UserGroups synced, g-02 rotated, consumer Ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );

    // From here to the end: every UserGroup (read as v1alpha1, the version the user's manifests use, served
    // throughout), the consumer's Pods, the Lease, and every operator Pod's log.
    const kc = adminKubeConfig();
    // What 0.2.0 logged before this is not followed: only calls from here on count.
    logs = new OperatorLogs(new Date().toISOString());
    watches = [
      await ResumableWatch.start<UserGroupView>(kc, `/apis/usergroup.dev/v1alpha1/namespaces/${TENANT}/usergroups`, {}, ready.onEvent),
      await ResumableWatch.start<ConsumerPodView & { metadata: { resourceVersion?: string } }>(
        kc,
        `/api/v1/namespaces/${TENANT}/pods`,
        { labelSelector: `app=${CONSUMER}` },
        consumerPods.onEvent,
      ),
      await ResumableWatch.start<LeaseObject>(
        kc,
        `/apis/coordination.k8s.io/v1/namespaces/${SYSTEM}/leases`,
        { fieldSelector: `metadata.name=${FULLNAME}` },
        lease.onEvent,
      ),
      await ResumableWatch.start<OperatorPod & { metadata: { resourceVersion?: string } }>(
        kc,
        `/api/v1/namespaces/${SYSTEM}/pods`,
        { labelSelector: SELECTOR },
        (_t, pod) => {
          if (pod.status.containerStatuses?.some((c) => c.name === 'controller' && (c.state as { running?: unknown } | undefined)?.running !== undefined)) {
            logs?.follow(SYSTEM, pod.metadata.name);
          }
        },
      ),
    ];
    expect(ready.notReady.filter((s) => s.event !== 'LISTED')).toEqual([]);
  });

  it(`upgrades to ${THIS_VERSION} with README.md's Upgrading commands against the registry: the release's CRDs, helm upgrade oci://…@digest, kubectl usergroup migrate-storage; nothing called, rotated, restarted or flipped`, async () => {
    const before = await baseline();
    const [applyCrds, upgrade, migrate, ...more] = documentedCommands('README.md', '## Upgrading').map((c) => forTestRegistry(c));
    // The README's three steps in its order (a fourth, or another order, is a README this test must be taught).
    expect([applyCrds, upgrade, migrate].map((c) => c?.split(' ').slice(0, 2).join(' '))).toEqual(['kubectl apply', 'helm upgrade', 'kubectl usergroup']);
    expect(more).toEqual([]);
    // 1. The new CRDs first: the new chart's ClusterUserGroupService is usergroup.dev/v1, so `helm upgrade` over the
    // old CRDs fails ("resource mapping not found … no matches for kind "ClusterUserGroupService" in version
    // "usergroup.dev/v1""), and the new operator watches v1, which only the new CRDs serve.
    const crdsApplied = await runDocumented(applyCrds!);
    const crd = await getJson<{ spec: { versions: { name: string; storage: boolean; served: boolean }[] } }>(['get', 'crd', 'usergroups.usergroup.dev']);
    expect(crd.spec.versions.map((v) => `${v.name}${v.storage ? ' (storage)' : ''}`)).toEqual(['v1 (storage)', 'v1alpha1']);
    // 2. The chart from the registry by digest, the image by digest.
    const helmStarted = Date.now();
    await runDocumented(upgrade!);
    const settled = await settle(before, thisImage, THIS_VERSION, helmStarted);
    // 3. What etcd holds rewritten as v1 (a StorageVersionMigration on this 1.37 apiserver): every UserGroup is
    // written once more, and the new operator, which sees each update, calls nothing.
    const migration = await runDocumented(migrate!);
    const stored = await getJson<{ status: { storedVersions: string[] } }>(['get', 'crd', 'usergroups.usergroup.dev']);
    expect(stored.status.storedVersions).toEqual(['v1']);
    const calls = callsOf(sim.stats()) - before.calls + (await quietPeriod());
    await expectNothingChanged(
      'upgrade',
      before,
      settled,
      calls,
      `the CRDs applied ${(crdsApplied.ms / 1000).toFixed(1)} s before; kubectl usergroup migrate-storage ${(migration.ms / 1000).toFixed(1)} s after`,
    );
  });

  it(`${ROTATE_GROUPS} UserGroups with deletionPolicy Rotate under ${THIS_VERSION}: each and its token Secret hold the rotate-on-delete finalizer`, async () => {
    const manifests = Array.from({ length: ROTATE_GROUPS }, (_, i) => ({
      apiVersion: 'usergroup.dev/v1',
      kind: 'UserGroup',
      metadata: { name: `r-${i}`, namespace: ROTATING },
      spec: { userGroupId: `${ROTATING}.r-${i}`, name: `Rotating ${i}`, deletionPolicy: 'Rotate' },
    }));
    await kubectl(['apply', '-f', '-'], manifests.map((m) => stringify(m)).join('---\n'));
    await waitFor(
      `${ROTATE_GROUPS} Rotate UserGroups Ready, they and their Secrets finalized`,
      async () => ((await rotateFinalizers()).filter((f) => f.endsWith(' finalized')).length === 2 * ROTATE_GROUPS ? true : undefined),
      120_000,
    );
    expectedGroups = GROUPS + ROTATE_GROUPS;
  });

  it(`rolls back to ${PREVIOUS_RELEASE.version} with docs/operations.md's Rolling back commands, Rotate UserGroups present: their finalizers removed first (rotateOnDelete=false), then helm rollback; nothing called, rotated, restarted or flipped`, async () => {
    // Revision 1 is 0.2.0's install (2 the upgrade, 3 the refused rollback below, 4 step 1).
    const [removeFinalizers, waitReleased, rollback, ...more] = documentedCommands('docs/operations.md', '### Rolling back').map((c) =>
      forTestRegistry(c, { '<revision>': '1' }),
    );
    expect([removeFinalizers, waitReleased, rollback].map((c) => c?.split(' ').slice(0, 2).join(' '))).toEqual(['helm upgrade', 'kubectl -n', 'helm rollback']);
    expect(more).toEqual([]);
    // Without steps 1 and 2 the chart's guard refuses step 3 at the first object Helm writes: nothing changes.
    const unguarded = await baseline();
    const refusal = await runDocumented(rollback!).then(
      () => 'the rollback went through',
      (err: unknown) => String(err),
    );
    // Helm's deprecation warnings come first: show the guard's words.
    process.stderr.write(
      `[e2e upgrade] helm rollback with Rotate finalizers left: ${refusal.slice(Math.max(0, refusal.indexOf('ValidatingAdmissionPolicy'))).slice(0, 900)}\n`,
    );
    expect(refusal).toMatch(/rollback-guard[\s\S]*rotate-on-delete[\s\S]*controller\.rotateOnDelete=false/);
    const deployment = await getJson<{ spec: { template: { spec: { containers: { image: string }[] } } } }>(['-n', SYSTEM, 'get', 'deployment', FULLNAME]);
    expect(deployment.spec.template.spec.containers.map((c) => c.image)).toContain(thisImage);
    expect(new Set((await operatorPods()).map((p) => p.metadata.name))).toEqual(unguarded.operatorPods);
    expect((await rotateFinalizers()).filter((f) => f.endsWith(' finalized'))).toHaveLength(2 * ROTATE_GROUPS);
    expect(
      { calls: callsOf(sim.stats()) - unguarded.calls, callLines: logs?.serviceCallLines(unguarded.at) ?? [] },
      'service calls around the refused rollback',
    ).toEqual({ calls: 0, callLines: [] });
    figures.push('| helm rollback with Rotate finalizers left | refused by the guard | 0 | | | | Deployment and Pods unchanged, finalizers on |');

    // Step 1: this release removes every rotate-on-delete finalizer (its own chart and image again, reusing the
    // values: after the refused rollback those are 0.2.0's, and the command sets the image).
    const prepared = await baseline();
    const prepStarted = Date.now();
    await runDocumented(removeFinalizers!);
    await settle(prepared, thisImage, THIS_VERSION, prepStarted);
    // Step 2: wait until the leader says none is left, as the chart's notes print it.
    await runDocumented(waitReleased!);
    const prepMs = Date.now() - prepStarted;
    expect(await rotateFinalizers()).toEqual(
      Array.from({ length: ROTATE_GROUPS }, (_, i) => [`UserGroup r-${i}`, `Secret r-${i}`])
        .flat()
        .sort(),
    );
    // The calls with what the operator logged for them and the groups the service saw touched: a failure says which.
    expect(
      {
        calls: callsOf(sim.stats()) - prepared.calls,
        callLines: logs?.serviceCallLines(prepared.at) ?? [],
        touched: sim
          .groups(API_KEY)
          .filter((g) => prepared.simTokens.get(g.userGroupId)?.updatedAt !== g.updatedAt)
          .map((g) => g.userGroupId),
      },
      'service calls while the finalizers were removed',
    ).toEqual({ calls: 0, callLines: [], touched: [] });
    figures.push(
      `| rotateOnDelete=false (before the rollback) | ${(prepMs / 1000).toFixed(1)} s until the Lease said released | 0 | | | | ${2 * ROTATE_GROUPS} finalizers removed |`,
    );

    // Step 3.
    const before = await baseline();
    const started = Date.now();
    await runDocumented(rollback!);
    const settled = await settle(before, previousImage, PREVIOUS_RELEASE.version, started);
    const calls = callsOf(sim.stats()) - before.calls + (await quietPeriod());
    // Helm never touches crds/: the v1 CRDs stay, and 0.2.0 reads and writes through their v1alpha1.
    const crd = await getJson<{ spec: { versions: { name: string; storage: boolean }[] } }>(['get', 'crd', 'usergroups.usergroup.dev']);
    expect(crd.spec.versions.map((v) => `${v.name}${v.storage ? ' (storage)' : ''}`)).toEqual(['v1 (storage)', 'v1alpha1']);
    await expectNothingChanged('rollback', before, settled, calls);

    // And it still works: a new v1alpha1 UserGroup syncs under the rolled-back operator, with one call.
    await kubectl(['apply', '-f', '-'], stringify(userGroupManifest(GROUPS)));
    await waitFor(
      `${groupName(GROUPS)} Ready`,
      async () => {
        const ug = await getJson<UserGroupView>(['-n', TENANT, 'get', 'usergroups.v1alpha1.usergroup.dev', groupName(GROUPS)]);
        return readyOf(ug)?.status === 'True' ? true : undefined;
      },
      60_000,
    );
    expect(callsOf(sim.stats()) - before.calls).toBe(1);
  });

  it(`under ${PREVIOUS_RELEASE.version}, a Rotate UserGroup and then its namespace are deleted: both gone within ${DELETION_BOUND_MS / 1000} s, nothing holds them`, async () => {
    const started = Date.now();
    await kubectl(
      ['-n', ROTATING, 'delete', 'usergroups.v1alpha1.usergroup.dev', 'r-0', '--wait', `--timeout=${DELETION_BOUND_MS / 1000}s`],
      undefined,
      DELETION_BOUND_MS + 10_000,
    );
    const userGroupMs = Date.now() - started;
    const namespaceStarted = Date.now();
    await kubectl(['delete', 'namespace', ROTATING, '--wait', `--timeout=${DELETION_BOUND_MS / 1000}s`], undefined, DELETION_BOUND_MS + 10_000);
    const namespaceMs = Date.now() - namespaceStarted;
    process.stderr.write(
      `[e2e upgrade] under ${PREVIOUS_RELEASE.version}: Rotate UserGroup deleted in ${userGroupMs} ms, its namespace in ${namespaceMs} ms\n`,
    );
    figures.push(
      `| delete a Rotate UserGroup, then its namespace, under ${PREVIOUS_RELEASE.version} | ${(userGroupMs / 1000).toFixed(1)} s, ${(namespaceMs / 1000).toFixed(1)} s | | | | | gone (bound ${DELETION_BOUND_MS / 1000} s) |`,
    );
    expect(userGroupMs).toBeLessThan(DELETION_BOUND_MS);
    expect(namespaceMs).toBeLessThan(DELETION_BOUND_MS);
  });
});

/** "Kind name finalized" or "Kind name" for every UserGroup and token Secret of the Rotate namespace, sorted. */
async function rotateFinalizers(): Promise<string[]> {
  interface Listed {
    items: { kind?: string; metadata: { name: string; finalizers?: string[] } }[];
  }
  const groups = await getJson<Listed>(['-n', ROTATING, 'get', 'usergroups.usergroup.dev']);
  const secrets = await getJson<Listed>(['-n', ROTATING, 'get', 'secrets', '-l', 'app.kubernetes.io/managed-by=usergroup-operator']);
  const describe =
    (kind: string) =>
    (o: Listed['items'][number]): string =>
      `${kind} ${o.metadata.name}${o.metadata.finalizers?.includes('usergroup.dev/rotate-on-delete') ? ' finalized' : ''}`;
  return [...groups.items.map(describe('UserGroup')), ...secrets.items.map(describe('Secret'))].sort();
}
