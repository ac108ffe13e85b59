import { TOKEN_ISSUED_AT_ANNOTATION, TOKEN_SHA256_ANNOTATION } from '../../../src/api/constants.js';
import { scheduledRotation } from '../../../src/controller/policies/rotation.js';
import { paths } from '../../../src/kube/paths.js';
import { OWNED_SECRETS, isRecord, meta, type BenchCluster, type Json } from '../cluster.js';
import { deltaBy, type BenchController, type PromSamples } from '../controller.js';
import { MiB } from '../proc.js';
import { startProgress } from '../progress.js';
import type { ScheduledResult } from '../report.js';
import { defaultLeadMs, maxAgeForDue, summarizeDueToDone } from '../scheduled-plan.js';
import { forEachBounded, pollUntil, sleep } from '../stats.js';
import { kubeByVerb, reconcilesByResult } from './cold.js';

export interface ScheduledSettings {
  /** The controller's --scheduled-rotations-per-minute (it must run with --min-token-age at most the lead). */
  readonly capPerMinute: number;
  /** From the patches to the due time; undefined: defaultLeadMs. */
  readonly leadMs: number | undefined;
  readonly parallelism: number;
  readonly timeoutMs: number;
}

/** One synced UserGroup as the phase plans it. */
interface Group {
  readonly name: string;
  readonly uid: string;
  readonly userGroupId: string;
  readonly tokenSha: string;
  readonly maxAgeMs: number;
}

/** As the controller writes it (whole seconds), so it compares with status.rotation.nextRotationTime as a string. */
const isoSeconds = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');

/**
 * Scheduled rotation of N groups due at once. Each synced UserGroup gets its own spec.rotation.maxTokenAge, computed
 * from its token's issue time (the Secret's token-issued-at) and its uid-fixed jitter so that every token falls due
 * at the same whole second, `lead` after the patches go out. The spec changes are reconciled before that second
 * (they need no service call; the controller comes back at the due time); from then on only the rotations run,
 * paced by the global cap. Due→done per group runs from the common due time to the watch event of its Secret
 * carrying a new token digest. The simulator counts each group's rotations: exactly one each.
 */
export async function runScheduled(
  cluster: BenchCluster,
  namespace: string,
  n: number,
  controller: BenchController,
  settings: ScheduledSettings,
): Promise<ScheduledResult> {
  const cap = settings.capPerMinute;
  const leadMs = settings.leadMs ?? defaultLeadMs(n, cap);
  const ugPath = paths.userGroups(namespace);
  const secretPath = paths.secrets(namespace);
  const [ugVersion, secretVersion] = await Promise.all([cluster.collectionVersion(ugPath), cluster.collectionVersion(secretPath, OWNED_SECRETS)]);
  const [userGroups, secrets] = await Promise.all([cluster.listAll(ugPath), cluster.listAll(secretPath, OWNED_SECRETS)]);
  const secretByName = new Map(secrets.map((s) => [meta(s).name, meta(s).annotations]));

  // A whole second, as the status shows it: the settle check compares strings.
  const dueAt = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  const groups: Group[] = [];
  for (const ug of userGroups) {
    const { name, uid } = meta(ug);
    const annotations = secretByName.get(name) ?? {};
    const issuedAt = annotations[TOKEN_ISSUED_AT_ANNOTATION];
    const maxAgeMs = issuedAt === undefined ? undefined : maxAgeForDue(issuedAt, uid, dueAt);
    if (maxAgeMs === undefined) throw new Error(`UserGroup ${name}: no token issue time on its Secret to schedule from`);
    groups.push({ name, uid, userGroupId: specId(ug), tokenSha: annotations[TOKEN_SHA256_ANNOTATION] ?? '', maxAgeMs });
  }
  if (groups.length !== n) throw new Error(`expected ${n} UserGroups in ${namespace}, found ${groups.length}`);
  const byName = new Map(groups.map((g) => [g.name, g]));

  // UserGroups showing the common due time for their current generation: the spec change has been reconciled.
  const due = isoSeconds(dueAt);
  const settled = new Set<string>();
  // The first new token each Secret got, and how many token changes it saw (a second would be a double rotation).
  const done = new Map<string, { at: number; issuedAt: string }>();
  const tokenChanges = new Map<string, number>();
  const lastSha = new Map(groups.map((g) => [g.name, g.tokenSha]));
  let watchError: string | undefined;
  const onError = (m: string): void => {
    watchError ??= m;
  };
  const watches = [
    cluster.watch(
      ugPath,
      ugVersion,
      (event) => {
        const { name } = meta(event.object);
        if (event.type !== 'DELETED' && showsDue(event.object, due)) settled.add(name);
        else settled.delete(name);
      },
      { onError },
    ),
    cluster.watch(
      secretPath,
      secretVersion,
      (event) => {
        const { name, annotations } = meta(event.object);
        const sha = annotations[TOKEN_SHA256_ANNOTATION];
        if (event.type === 'DELETED' || !sha || !byName.has(name) || sha === lastSha.get(name)) return;
        lastSha.set(name, sha);
        tokenChanges.set(name, (tokenChanges.get(name) ?? 0) + 1);
        if (!done.has(name)) done.set(name, { at: Date.now(), issuedAt: annotations[TOKEN_ISSUED_AT_ANNOTATION] ?? '' });
      },
      { labelSelector: OWNED_SECRETS, onError },
    ),
  ];

  const rotationsBefore = rotationsOf(cluster);
  const callsBefore = cluster.serviceCalls();
  const started = Date.now();
  let patched = 0;
  let specSettledMs: number | undefined;
  let wave: { calls: Calls; metrics: PromSamples; cpuSeconds: number | undefined } | undefined;
  const progress = startProgress(
    `scheduled N=${n}`,
    () => {
      const p = controller.proc.latest;
      const toDue = dueAt - Date.now();
      const phase = toDue > 0 ? `due in ${(toDue / 1000).toFixed(0)} s; patched ${patched}/${n}, reconciled ${settled.size}/${n}` : `${done.size}/${n} rotated`;
      return `${phase}; controller CPU ${p ? p.cpuSeconds.toFixed(1) : '?'} s, RSS ${p ? (p.rssBytes / MiB).toFixed(0) : '?'} MiB`;
    },
    5000,
  );
  let error: string | undefined;
  const alive = (): void => {
    if (watchError) throw new Error(watchError);
    if (controller.exited()) throw new Error(`the controller exited:\n${controller.logTail()}`);
  };
  try {
    await forEachBounded(groups.length, settings.parallelism, async (i) => {
      const g = groups[i];
      if (!g) return;
      const res = await cluster.client.request('PATCH', `${ugPath}/${g.name}`, {
        body: { spec: { rotation: { maxTokenAge: `${g.maxAgeMs}ms` } } },
        contentType: 'application/merge-patch+json',
      });
      if (res.status !== 200) throw new Error(`patching ${g.name}: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
      patched++;
    });
    // Until every spec change is reconciled, or the due time comes (then the two overlap: reported).
    specSettledMs = await pollUntil(
      'the spec changes to be reconciled',
      () => {
        alive();
        if (settled.size >= n) return Date.now() - started;
        return Date.now() >= dueAt ? -1 : undefined;
      },
      settings.timeoutMs,
      100,
    ).then((ms) => (ms < 0 ? undefined : ms));
    if (done.size > 0) throw new Error(`${done.size} tokens rotated before their due time`);
    await sleep(Math.max(0, dueAt - Date.now()));
    wave = { calls: serviceCalls(cluster), metrics: await controller.metrics(), cpuSeconds: controller.sample()?.cpuSeconds };
    await pollUntil(
      `${n} scheduled rotations`,
      () => {
        alive();
        return done.size >= n ? true : undefined;
      },
      settings.timeoutMs,
      100,
    );
    // A late second rotation of some group would show here.
    await sleep(2000);
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  for (const w of watches) w.stop();
  const readAt = Date.now();
  const after = await controller.metrics().catch(() => undefined);
  const sample = controller.sample();
  const callsAtEnd = serviceCalls(cluster);
  const rotationsAfter = rotationsOf(cluster);

  // Exactly once per group, unless its new token had itself fallen due by now (the bench's maxTokenAges are
  // minutes: a slow wave outlasts some), and then a second rotation is its schedule, not a repeat.
  let rotatedOnce = 0;
  let rotatedTooOften = 0;
  let dueAgain = 0;
  for (const g of groups) {
    const count = (rotationsAfter[g.userGroupId] ?? 0) - (rotationsBefore[g.userGroupId] ?? 0);
    const first = done.get(g.name);
    const next = first ? scheduledRotation(first.issuedAt, g.maxAgeMs, g.uid) : undefined;
    const again = next !== undefined && next.dueAt <= readAt;
    if (again) dueAgain++;
    if (count === 1) rotatedOnce++;
    if (count > (again ? 2 : 1)) rotatedTooOften++;
  }
  const summary = summarizeDueToDone(
    dueAt,
    [...done.values()].map((d) => d.at),
    n,
    cap,
  );
  const waveCalls = wave ? minus(callsAtEnd, wave.calls) : { posts: 0, puts: 0 };
  if (!error && rotatedTooOften > 0) error = `${rotatedTooOften} groups rotated more often than their schedule (a repeated rotation)`;
  if (!error && summary.completed < n) error = `only ${summary.completed}/${n} Secrets got a new token`;
  const fmtS = (ms: number | undefined): string => (ms === undefined ? '–' : `${(ms / 1000).toFixed(1)} s`);
  progress.stop(
    `${summary.completed}/${n} rotated in ${fmtS(summary.wallMs)} from the due time: ${summary.ratePerMinute?.toFixed(0) ?? '–'}/min against a cap of ${cap}/min; ` +
      `due→done p50 ${fmtS(summary.p50Ms)}, p99 ${fmtS(summary.p99Ms)} (the cap alone: ${fmtS(summary.capP99Ms)}); ${waveCalls.posts} POSTs, ${waveCalls.puts} PUTs` +
      (error ? `; FAILED: ${error}` : ''),
  );
  return {
    n,
    ok: error === undefined,
    ...(error ? { error } : {}),
    capPerMinute: cap,
    leadMs,
    dueAt: new Date(dueAt).toISOString(),
    specSettledMs,
    specServiceCalls: (wave ? wave.calls.total : cluster.serviceCalls()) - callsBefore,
    ...summary,
    servicePosts: waveCalls.posts,
    servicePuts: waveCalls.puts,
    rotatedOnce,
    rotatedTooOften,
    dueAgain,
    secretTokenChanges: [...tokenChanges.values()].reduce((a, b) => a + b, 0),
    // The controller's own count, to set beside the simulator's.
    ...(after && wave ? { metricScheduledRotations: scheduledRotations(after) - scheduledRotations(wave.metrics) } : {}),
    controller: {
      peakRssBytes: sample?.peakRssBytes,
      ...(sample ? { rssBytes: sample.rssBytes } : {}),
      cpuSeconds: sample && wave?.cpuSeconds !== undefined ? sample.cpuSeconds - wave.cpuSeconds : undefined,
      kubeRequests: after && wave ? deltaBy(kubeByVerb(wave.metrics), kubeByVerb(after)) : {},
      reconciles: after && wave ? deltaBy(reconcilesByResult(wave.metrics), reconcilesByResult(after)) : {},
    },
  };
}

/** A phase that failed before it could measure anything. */
export function scheduledFailed(n: number, capPerMinute: number, error: string): ScheduledResult {
  return {
    n,
    ok: false,
    error,
    capPerMinute,
    leadMs: 0,
    dueAt: '',
    specSettledMs: undefined,
    specServiceCalls: 0,
    ...summarizeDueToDone(0, [], n, capPerMinute),
    servicePosts: 0,
    servicePuts: 0,
    rotatedOnce: 0,
    rotatedTooOften: 0,
    dueAgain: 0,
    secretTokenChanges: 0,
    controller: { peakRssBytes: undefined, cpuSeconds: undefined, kubeRequests: {}, reconciles: {} },
  };
}

interface Calls {
  readonly posts: number;
  readonly puts: number;
  readonly total: number;
}

/** The controller's calls at the simulator so far: POST = rotate, PUT = upsert, any outcome. */
function serviceCalls(cluster: BenchCluster): Calls {
  const ops = cluster.sim.stats(cluster.controllerKey).operations;
  const sum = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, b) => a + b, 0);
  return { posts: sum(ops.rotate), puts: sum(ops.upsert), total: cluster.serviceCalls() };
}

const minus = (a: Calls, b: Calls): { posts: number; puts: number } => ({ posts: a.posts - b.posts, puts: a.puts - b.puts });

const scheduledRotations = (m: PromSamples): number => m.sum('usergroup_tokens_rotated_total', { trigger: 'scheduled' });

const rotationsOf = (cluster: BenchCluster): Readonly<Record<string, number>> => ({ ...cluster.sim.stats(cluster.controllerKey).rotationsByUserGroupId });

const specId = (ug: Json): string => {
  const spec = isRecord(ug['spec']) ? ug['spec'] : {};
  return typeof spec['userGroupId'] === 'string' ? spec['userGroupId'] : '';
};

/** The UserGroup's status is for its current generation and names `due` as its next rotation. */
function showsDue(ug: Json, due: string): boolean {
  const status = isRecord(ug['status']) ? ug['status'] : {};
  const rotation = isRecord(status['rotation']) ? status['rotation'] : {};
  return status['observedGeneration'] === meta(ug).generation && rotation['nextRotationTime'] === due;
}
