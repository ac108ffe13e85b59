// The reconcile's ports over the real caches and writers, every write fenced by the Lease.
import { objectKey, parseMeta, withFinalizers } from '../api/meta.js';
import { parseTokenSecretMeta, type ObservedSecret } from '../api/secret.js';
import type { UserGroup } from '../api/usergroup.js';
import type { ClaimWriter, ClaimWriteResult } from '../kube/claim-writer.js';
import type { EventRecorder, EventRegarding } from '../kube/event-recorder.js';
import type { SecretWriter } from '../kube/secret-writer.js';
import type { StatusWriter } from '../kube/status-writer.js';
import type { WorkloadRestarter } from '../kube/workload-restarter.js';
import type { PodPrompter } from '../kube/pod-prompter.js';
import { SecretValue } from '../service/secret-value.js';
import type { Caches } from './caches.js';
import type { Connections } from './connections.js';
import type { RateCap } from './rate-cap.js';
import type { RequestBudgets } from './request-budget.js';
import type {
  ClaimsPort,
  FinalizersPort,
  MetricsPort,
  ReconcilePorts,
  StatusPort,
  TokenSecretApplyPort,
  TokenSecretCacheView,
  WorkloadsPort,
  PodsPort,
} from './usergroup/ports.js';
import { API_VERSION, ROTATE_ON_DELETE_FINALIZER, USERGROUP_KIND } from '../api/constants.js';
import type { FinalizerWriter } from '../kube/finalizer-writer.js';
import { paths } from '../kube/paths.js';

/** The apiserver writers a reconcile uses. */
export interface Writers {
  readonly secrets: SecretWriter;
  readonly claims: ClaimWriter;
  readonly status: StatusWriter;
  readonly workloads: WorkloadRestarter;
  readonly pods: PodPrompter;
  readonly finalizers: FinalizerWriter;
}

export interface PortDeps {
  readonly caches: Caches;
  readonly writers: Writers;
  readonly connections: Connections;
  readonly recorder: EventRecorder;
  readonly metrics: MetricsPort;
  /** The caps on scheduled rotations, workload restarts and Pod prompts (undefined: off), and the request budgets. */
  readonly caps: {
    readonly rotations: RateCap;
    readonly restarts: RateCap | undefined;
    readonly prompts: RateCap | undefined;
    readonly requests: RequestBudgets;
  };
  /** Throws when this replica may no longer act (its Lease not renewed by the clock): runs before every write. */
  readonly fence: () => void;
  /** A status write's answer, newer than the cache may be: the controller decides whether it calls for a reconcile. */
  readonly statusWritten: (before: UserGroup, after: UserGroup) => void;
}

/**
 * The ports of the UserGroup reconcile over the controller's caches and writers. Every write is fenced by the
 * Lease, and goes through to the cache (what we just wrote is known before its watch event, so the next
 * reconcile does not write it again).
 */
export function reconcilePorts(deps: PortDeps): ReconcilePorts {
  const { caches, connections, caps } = deps;
  return {
    userGroups: { get: (key) => caches.userGroups.get(key), withId: (id) => caches.withUserGroupId(id) },
    claims: claimsPort(deps),
    secretCache: secretCacheView(deps),
    secrets: secretApplyPort(deps),
    status: statusPort(deps),
    connections: {
      resolve: (ns, ref, id) => connections.resolve(ns, ref, id),
      invalidate: (connection) => connections.forgetSecret(connection.apiKeySecret),
      clusterServices: () => caches.clusterServices.list(),
    },
    workloads: workloadsPort(deps),
    pods: podsPort(deps),
    events: { emit: (ug, event) => deps.recorder.emit(regarding(ug), event.type, event.reason, event.action, event.note) },
    metrics: deps.metrics,
    caps: {
      rotation: (key) => caps.rotations.take(key),
      // Restarts off: the step never asks (it reports them disabled instead).
      restart: (key) => caps.restarts?.take(key) ?? 0,
      prompt: (key) => caps.prompts?.take(key) ?? 0,
      request: (kind, namespace, key) => caps.requests[kind].take(namespace, key),
      requestSpent: (kind, namespace, key) => caps.requests[kind].spent(namespace, key),
    },
    clock: { now: () => Date.now() },
    finalizers: finalizersPort(deps),
  };
}

function finalizersPort({ caches, writers, fence }: PortDeps): FinalizersPort {
  return {
    userGroup: async (ug, present) => {
      fence();
      const written = await writers.finalizers.set(
        paths.userGroup(ug.metadata.namespace, ug.metadata.name),
        ug.metadata.uid,
        ROTATE_ON_DELETE_FINALIZER,
        present,
      );
      if (written.kind === 'conflict') return false;
      if (written.kind !== 'patched') return true;
      // Known at once, as a status write is: the next reconcile must not write it again. The answer is metadata only,
      // so it goes onto the cached object, and only if that is the version the patch was made on: the reconcile's own
      // object (`ug`) predates its status write, and a stale status under a newer resourceVersion would hide the
      // write from the cache until the next event (the UserGroup then looks never synced: one more PUT). A cached
      // object already past it came from the watch and is right as it is.
      const meta = parseMeta(written.metadata);
      const current = caches.userGroups.get(objectKey(ug.metadata));
      if (meta.ok && current && current.metadata.resourceVersion === written.before) {
        caches.userGroups.upsertLocal({ ...current, metadata: withFinalizers(current.metadata, meta.value.finalizers, meta.value.resourceVersion) });
      }
      return true;
    },
    secret: async (secret, present) => {
      fence();
      const { namespace, name, uid, resourceVersion } = secret.metadata;
      const written = await writers.finalizers.set(paths.secret(namespace, name), uid, ROTATE_ON_DELETE_FINALIZER, present);
      if (written.kind === 'conflict') return false;
      if (written.kind !== 'patched') return true;
      const cached = parseTokenSecretMeta({ metadata: written.metadata });
      if (cached) {
        const key = objectKey(cached.metadata);
        // Only metadata.finalizers changed: data this process knew at the version before is still known.
        const known = caches.verified.known(key, resourceVersion);
        caches.secrets.upsertLocal(cached);
        if (known.verified && written.before === resourceVersion) caches.verified.remember(key, cached.metadata.resourceVersion, known.token);
      }
      return true;
    },
    namespaceTerminating: async (namespace) =>
      caches.namespaces.get(objectKey({ namespace: '', name: namespace }))?.metadata.deletionTimestamp !== undefined ||
      (await writers.finalizers.deleting(paths.namespace(namespace))),
  };
}

function claimsPort({ caches, writers, fence }: PortDeps): ClaimsPort {
  // A claim we just wrote is known at once, before its watch event (the next reconcile must not create it again).
  const keep = (result: ClaimWriteResult): ClaimWriteResult => {
    if (result.ok) caches.claims.upsertLocal(result.claim);
    return result;
  };
  return {
    cached: (name) => caches.claims.get(objectKey({ namespace: '', name })),
    read: async (name) => {
      // Kept: a shard's cache may not hold another namespace's claim, and must hear when it is released.
      const claim = await writers.claims.get(name);
      if (claim) caches.claims.upsertLocal(claim);
      return claim;
    },
    create: async (spec) => {
      fence();
      return keep(await writers.claims.create(spec));
    },
    replace: async (current, spec) => {
      fence();
      return keep(await writers.claims.replace(current, spec));
    },
    release: (claim) => {
      fence();
      return writers.claims.delete(claim);
    },
  };
}

function secretCacheView({ caches }: PortDeps): TokenSecretCacheView {
  return {
    seen: (key) => ({ cached: caches.secrets.get(key), otherExists: caches.otherSecretExists(key) }),
    owned: (ug) => caches.ownedSecrets(ug),
    keeper: (namespace) => {
      const uid = caches.namespaces.get(objectKey({ namespace: '', name: namespace }))?.metadata.uid;
      return uid === undefined ? undefined : { apiVersion: 'v1', kind: 'Namespace', name: namespace, uid, controller: false };
    },
    known: (key, rv) => ({ ...caches.verified.known(key, rv), remember: (at, token) => caches.verified.remember(key, at, token) }),
  };
}

function secretApplyPort({ caches, writers, fence }: PortDeps): TokenSecretApplyPort {
  return {
    read: (ns, name) => writers.secrets.get(ns, name),
    apply: async (desired, current) => {
      fence();
      const applied = await writers.secrets.apply(desired, current);
      if (applied.kind === 'created' || applied.kind === 'updated') {
        // The cache holds what the watch would deliver: metadata only, trimmed; and this version's data is ours.
        const cached = parseTokenSecretMeta(toPartial(applied.secret));
        if (cached) caches.secrets.upsertLocal(cached);
        caches.verified.remember(objectKey(applied.secret.metadata), applied.secret.metadata.resourceVersion, tokenOf(desired.data));
      }
      return applied;
    },
    delete: (secret) => {
      fence();
      return writers.secrets.delete(secret.metadata.namespace, secret.metadata.name, secret.metadata.uid);
    },
  };
}

function statusPort({ caches, writers, fence, statusWritten }: PortDeps): StatusPort {
  return {
    patch: async (ug, status, clear) => {
      fence();
      const updated = await writers.status.patch(ug.metadata.namespace, ug.metadata.name, status, clear);
      if (!updated) return;
      caches.userGroups.upsertLocal(updated);
      statusWritten(ug, updated);
    },
  };
}

function workloadsPort({ writers, fence }: PortDeps): WorkloadsPort {
  return {
    read: (ns, target) => writers.workloads.get(ns, target),
    restart: (ns, target, rv, userGroupName, value) => {
      fence();
      return writers.workloads.restart(ns, target, rv, userGroupName, value);
    },
  };
}

function podsPort({ writers, fence }: PortDeps): PodsPort {
  return {
    consenting: (ns, userGroupName) => writers.pods.consenting(ns, userGroupName),
    prompt: (ns, pod, userGroupName, issuedAt) => {
      fence();
      return writers.pods.prompt(ns, pod, userGroupName, issuedAt);
    },
  };
}

/** What an Event about a UserGroup is about. */
function regarding(ug: UserGroup): EventRegarding {
  return { apiVersion: API_VERSION, kind: USERGROUP_KIND, namespace: ug.metadata.namespace, name: ug.metadata.name, uid: ug.metadata.uid };
}

/** The token a Secret we just wrote holds: the one data value the desired Secret carried. */
function tokenOf(data: Readonly<Record<string, string>> | undefined): SecretValue | undefined {
  const [encoded, ...more] = Object.values(data ?? {});
  return encoded === undefined || more.length > 0 ? undefined : new SecretValue(Buffer.from(encoded, 'base64').toString('utf8'));
}

/** The PartialObjectMetadata shape of a Secret we read or wrote whole, for the metadata-only cache. */
function toPartial(secret: ObservedSecret): unknown {
  const m = secret.metadata;
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
      labels: m.labels,
      annotations: m.annotations,
      ownerReferences: m.ownerReferences.map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid, controller: o.controller })),
      ...(m.deletionTimestamp !== undefined ? { deletionTimestamp: m.deletionTimestamp } : {}),
      ...(m.finalizers !== undefined ? { finalizers: m.finalizers } : {}),
    },
  };
}
