import { createHash, randomBytes } from 'node:crypto';
import { API_VERSION, MANAGED_BY_LABEL, MANAGED_BY_VALUE, TOKEN_SHA256_ANNOTATION, USERGROUP_KIND, USERGROUP_LABEL } from '../../../src/api/constants.js';
import { KubeClient } from '../../../src/kube/http.js';
import { paths } from '../../../src/kube/paths.js';
import { ServiceClient } from '../../../src/service/client.js';
import { SecretValue } from '../../../src/service/secret-value.js';
import { errorText } from '../../../src/platform/error-text.js';
import { userGroupName, userGroupSpec, type BenchCluster } from '../cluster.js';
import { startProgress } from '../progress.js';
import type { LimitMode, LimitResult } from '../report.js';

/**
 * mode 'concurrent-creation' (a diagnostic): no untimed set-up; the UserGroups are applied while the loop runs, with
 * the cold phase's parallelism, and each is worked on once created: the limit under the cold phase's creation load.
 *
 * mode 'controller-pattern' (a diagnostic, --limit-modes): the same loop plus the two requests the controller makes
 * besides the minimal ones, a GET of the Secret before creating it and a background Event POST, to tell the cost of
 * those requests from the controller's own overhead.
 *
 * The limit: the least work the operator's job needs for N groups, done by a tight loop in this process with the
 * controller's service concurrency: per group one PUT to the service, one Secret create and one status patch,
 * against the same simulator and apiserver. The UserGroups it patches are created first, untimed, in a
 * namespace no controller watches. Same HTTP clients as the controller (KubeClient, ServiceClient).
 */
export async function runLimit(
  cluster: BenchCluster,
  n: number,
  concurrency: number,
  applyParallelism: number,
  mode: LimitMode = 'minimal',
): Promise<LimitResult> {
  const label = mode === 'minimal' ? `limit N=${n}` : `limit (${mode}) N=${n}`;
  const namespace = await cluster.createNamespace(`bench-limit-${n}`);
  let applied = 0;
  const uids: string[] = new Array<string>(n);
  // Indices of UserGroups that exist, in the order the workers take them.
  const ready: number[] = [];
  let taken = 0;
  const waiting: (() => void)[] = [];
  const wakeAll = (): void => {
    for (const resolve of waiting.splice(0)) resolve();
  };
  const push = (i: number, uid: string): void => {
    uids[i] = uid;
    applied++;
    ready.push(i);
    waiting.shift()?.();
  };
  let applyError: unknown;
  let applying: Promise<void> = Promise.resolve();
  if (mode !== 'concurrent-creation') {
    const setupStarted = performance.now();
    const setupProgress = startProgress(label, () => `setup: ${applied}/${n} UserGroups created (untimed)`);
    try {
      await cluster.applyUserGroups(namespace, n, applyParallelism, push);
    } finally {
      setupProgress.stop(`setup: ${applied}/${n} UserGroups created in ${((performance.now() - setupStarted) / 1000).toFixed(1)} s (untimed)`);
    }
  }
  /** The next UserGroup to work on, waiting for its creation when needed; undefined when all are taken. */
  const next = async (): Promise<number | undefined> => {
    while (taken < n) {
      const i = ready.shift();
      if (i !== undefined) {
        // The last one: nobody else needs to wait any more.
        if (++taken >= n) wakeAll();
        return i;
      }
      if (applyError !== undefined) throw applyError instanceof Error ? applyError : new Error(errorText(applyError));
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
    return undefined;
  };

  const kube = await KubeClient.create(cluster.access, 'usergroup-bench-limit');
  const service = new ServiceClient({ url: cluster.sim.url, apiKey: new SecretValue(cluster.limitKey) }, { userAgent: 'usergroup-bench-limit' });
  let done = 0;
  let failures = 0;
  const spent = { put: 0, secretCreate: 0, statusPatch: 0 };
  let firstFailure: string | undefined;
  const fail = (what: string): void => {
    failures++;
    firstFailure ??= what;
  };
  const progress = startProgress(label, () => `${done}/${n} groups done (PUT + Secret + status), ${failures} failed`);
  const started = performance.now();
  if (mode === 'concurrent-creation') {
    // As in the cold phase: the UserGroups are applied while the loop runs, and each is worked on once it exists.
    applying = cluster.applyUserGroups(namespace, n, applyParallelism, push).then(
      () => undefined,
      (err: unknown) => {
        applyError = err;
        wakeAll();
      },
    );
  }
  const work = async (i: number): Promise<void> => {
    const name = userGroupName(i);
    const spec = userGroupSpec(namespace, i);
    if (mode === 'controller-pattern') {
      // The controller's extra read: is there a Secret of that name it does not own?
      const existing = await kube.request('GET', paths.secret(namespace, name));
      if (existing.status !== 404) {
        fail(`GET Secret ${name}: HTTP ${existing.status}`);
        return;
      }
    }
    const t0 = performance.now();
    const upserted = await service.upsert({
      userGroupId: String(spec['userGroupId']),
      name: String(spec['name']),
      properties: spec['properties'] as Record<string, unknown>,
    });
    if (!upserted.ok) {
      fail(`PUT ${name}: ${upserted.failure.message}`);
      return;
    }
    const token = upserted.group.token.reveal();
    const t1 = performance.now();
    spent.put += t1 - t0;
    const secret = await kube.request('POST', paths.secrets(namespace), {
      query: { fieldManager: 'usergroup-bench-limit' },
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: {
          name,
          namespace,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [USERGROUP_LABEL]: name },
          annotations: { [TOKEN_SHA256_ANNOTATION]: createHash('sha256').update(token).digest('hex') },
          ownerReferences: [{ apiVersion: API_VERSION, kind: USERGROUP_KIND, name, uid: uids[i] ?? '', controller: true }],
        },
        data: { token: Buffer.from(token).toString('base64') },
      },
    });
    if (secret.status !== 201) {
      fail(`Secret ${name}: HTTP ${secret.status}`);
      return;
    }
    const t2 = performance.now();
    spent.secretCreate += t2 - t1;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const status = await kube.request('PATCH', paths.userGroupStatus(namespace, name), {
      query: { fieldManager: 'usergroup-bench-limit' },
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          observedGeneration: 1,
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Synced',
              message: `user group synced; token in Secret ${name}`,
              lastTransitionTime: now,
              observedGeneration: 1,
            },
          ],
          teamId: upserted.group.teamId,
          providedId: upserted.group.providedId,
          environmentTag: upserted.group.environmentTag,
          tokenSecretName: name,
          lastSyncTime: now,
          syncedHash: createHash('sha256').update(JSON.stringify(spec)).digest('hex'),
        },
      },
    });
    if (status.status !== 200) {
      fail(`status ${name}: HTTP ${status.status}`);
      return;
    }
    spent.statusPatch += performance.now() - t2;
    if (mode === 'controller-pattern') {
      // The controller's Synced Event, written in the background as its EventRecorder does.
      void kube
        .request('POST', paths.events(namespace), {
          body: {
            apiVersion: 'events.k8s.io/v1',
            kind: 'Event',
            metadata: { name: `${name}.${randomBytes(8).toString('hex')}`, namespace },
            eventTime: new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z'),
            reportingController: 'usergroup.dev/usergroup-bench-limit',
            reportingInstance: 'bench',
            action: 'Sync',
            reason: 'Synced',
            type: 'Normal',
            note: `user group created at the service (the default connection); token in Secret ${name}`,
            regarding: { apiVersion: API_VERSION, kind: USERGROUP_KIND, namespace, name, uid: uids[i] ?? '' },
          },
        })
        .then(
          (r) => {
            if (r.status !== 201) fail(`Event ${name}: HTTP ${r.status}`);
          },
          (err: unknown) => fail(`Event ${name}: ${String(err)}`),
        );
    }
    done++;
  };
  try {
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n) }, async () => {
        for (let i = await next(); i !== undefined; i = await next()) await work(i);
      }),
    );
    await applying;
  } finally {
    kube.close();
  }
  const wallMs = performance.now() - started;
  progress.stop(`${done}/${n} done in ${(wallMs / 1000).toFixed(2)} s${failures ? `, ${failures} FAILED (first: ${firstFailure})` : ''}`);
  return {
    n,
    namespace,
    ok: failures === 0,
    ...(failures ? { error: `${failures} of ${n} groups failed; first: ${firstFailure}` } : {}),
    wallMs,
    concurrency,
    mode,
    stepMeansMs: {
      put: spent.put / Math.max(1, done),
      secretCreate: spent.secretCreate / Math.max(1, done),
      statusPatch: spent.statusPatch / Math.max(1, done),
    },
  };
}
