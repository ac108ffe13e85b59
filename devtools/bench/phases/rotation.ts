import { ROTATE_ANNOTATION, ROTATION_HANDLED_ANNOTATION, TOKEN_SHA256_ANNOTATION } from '../../../src/api/constants.js';
import { paths } from '../../../src/kube/paths.js';
import { OWNED_SECRETS, isRecord, meta, userGroupName, type BenchCluster } from '../cluster.js';
import type { BenchController } from '../controller.js';
import { startProgress } from '../progress.js';
import type { RotationResult } from '../report.js';
import { rotationTargets } from '../spread.js';
import { forEachBounded, percentile, pollUntil } from '../stats.js';

/**
 * Rotation latency: `count` UserGroups spread over the namespace (or, given several, over the namespaces in turn:
 * spread.ts) get a new rotate-requested-at value, all at once (parallel merge patches). Each latency runs from
 * sending that patch to the watch event of its Secret carrying a new token-sha256 and rotation-handled = the
 * requested value. `controllers`: the replicas serving them; any of them exiting fails the phase.
 */
export async function runRotation(
  cluster: BenchCluster,
  namespace: string | readonly string[],
  n: number,
  controllers: BenchController | readonly BenchController[],
  count: number,
  timeoutMs: number,
): Promise<RotationResult> {
  const namespaces = typeof namespace === 'string' ? [namespace] : namespace;
  const running = controllers instanceof Array ? controllers : [controllers];
  const targets = rotationTargets(n, namespaces, count);
  const k = targets.length;
  // One namespace: its own Secrets, as ever; several: the Secrets of the whole cluster, keyed "namespace/name".
  const scope = namespaces.length === 1 ? namespaces[0] : undefined;
  const keyOf = (ns: string, name: string): string => (scope !== undefined ? name : `${ns}/${name}`);
  const names = targets.map((t) => keyOf(t.namespace, userGroupName(t.index)));
  const secretPath = paths.secrets(scope);
  const rotationsBefore = totalRotations(cluster);

  // The token each Secret holds now.
  const before = new Map<string, string>();
  await forEachBounded(k, 16, async (i) => {
    const t = targets[i];
    if (!t) return;
    const name = userGroupName(t.index);
    const res = await cluster.client.request('GET', paths.secret(t.namespace, name));
    if (res.status !== 200 || !isRecord(res.body)) throw new Error(`reading Secret ${t.namespace}/${name}: HTTP ${res.status}`);
    before.set(keyOf(t.namespace, name), meta(res.body).annotations[TOKEN_SHA256_ANNOTATION] ?? '');
  });

  const requested = new Map<string, string>();
  const sentAt = new Map<string, number>();
  const doneAt = new Map<string, number>();
  let watchError: string | undefined;
  const watch = cluster.watch(
    secretPath,
    await cluster.collectionVersion(secretPath, OWNED_SECRETS),
    (event) => {
      const m = meta(event.object);
      const name = keyOf(m.namespace, m.name);
      const value = requested.get(name);
      if (value === undefined || doneAt.has(name) || event.type === 'DELETED') return;
      const sha = m.annotations[TOKEN_SHA256_ANNOTATION];
      if (m.annotations[ROTATION_HANDLED_ANNOTATION] === value && sha && sha !== before.get(name)) doneAt.set(name, performance.now());
    },
    {
      labelSelector: OWNED_SECRETS,
      onError: (m) => {
        watchError ??= m;
      },
    },
  );

  const progress = startProgress(`rotation N=${n}`, () => `${doneAt.size}/${k} new tokens in their Secrets`, 2000);
  const stamp = Date.now();
  let error: string | undefined;
  try {
    await Promise.all(
      targets.map(async (t, i) => {
        const name = names[i] ?? '';
        const value = `bench-${stamp}-${i}`;
        requested.set(name, value);
        sentAt.set(name, performance.now());
        const res = await cluster.client.request('PATCH', `${paths.userGroups(t.namespace)}/${userGroupName(t.index)}`, {
          body: { metadata: { annotations: { [ROTATE_ANNOTATION]: value } } },
          contentType: 'application/merge-patch+json',
        });
        if (res.status !== 200) throw new Error(`annotating ${t.namespace}/${userGroupName(t.index)}: HTTP ${res.status}`);
      }),
    );
    await pollUntil(
      `${k} rotations to reach their Secrets`,
      () => {
        if (watchError) throw new Error(watchError);
        const exited = running.find((c) => c.exited());
        if (exited) throw new Error(`the controller exited:\n${exited.logTail()}`);
        return doneAt.size >= k ? true : undefined;
      },
      timeoutMs,
      50,
    );
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  watch.stop();
  const latencies = names.flatMap((name) => {
    const a = sentAt.get(name);
    const b = doneAt.get(name);
    return a !== undefined && b !== undefined ? [b - a] : [];
  });
  const serviceRotations = totalRotations(cluster) - rotationsBefore;
  const p50Ms = percentile(latencies, 50);
  const p99Ms = percentile(latencies, 99);
  const maxMs = percentile(latencies, 100);
  progress.stop(
    `${latencies.length}/${k} rotated: p50 ${fmt(p50Ms)}, p99 ${fmt(p99Ms)}, max ${fmt(maxMs)}; ${serviceRotations} rotations at the service${error ? `; FAILED: ${error}` : ''}`,
  );
  if (!error && serviceRotations !== k) error = `the service performed ${serviceRotations} rotations for ${k} requests`;
  return { n, ok: error === undefined, ...(error ? { error } : {}), requested: k, completed: latencies.length, p50Ms, p99Ms, maxMs, serviceRotations };
}

/** The result of a rotation phase that threw before it had figures. */
export function rotationFailed(n: number, requested: number, error: string): RotationResult {
  return { n, ok: false, error, requested, completed: 0, p50Ms: undefined, p99Ms: undefined, maxMs: undefined, serviceRotations: 0 };
}

function totalRotations(cluster: BenchCluster): number {
  return Object.values(cluster.sim.stats(cluster.controllerKey).rotationsByUserGroupId).reduce((a, b) => a + b, 0);
}

const fmt = (ms: number | undefined): string => (ms === undefined ? '–' : `${Math.round(ms)} ms`);
