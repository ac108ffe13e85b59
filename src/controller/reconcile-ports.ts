// The reconcile's ports wired to the controller's caches and writers (each writer fences and writes through itself).
import { objectKey, splitKey } from '../api/meta.js';
import type { UserGroup } from '../api/usergroup.js';
import type { ClaimWriter } from '../kube/claim-writer.js';
import type { EventRecorder, EventRegarding } from '../kube/event-recorder.js';
import type { FinalizerWriter } from '../kube/finalizer-writer.js';
import { paths } from '../kube/paths.js';
import type { PodPrompter } from '../kube/pod-prompter.js';
import type { SecretWriter } from '../kube/secret-writer.js';
import type { StatusWriter } from '../kube/status-writer.js';
import type { WorkloadRestarter } from '../kube/workload-restarter.js';
import { API_VERSION, USERGROUP_KIND } from '../api/constants.js';
import type { Caches } from './caches.js';
import type { Connections } from './connections.js';
import type { RateCap } from './rate-cap.js';
import type { RequestBudget, RequestBudgets } from './request-budget.js';
import type { Cap, MetricsPort, NamespaceView, ReconcilePorts, Slot } from './usergroup-ports.js';

/** The apiserver writers a reconcile uses, each made with the Lease fence and the caches it writes through to (controller.ts). */
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
}

/**
 * The ports of the UserGroup reconcile: the writers themselves for every write (fenced by the Lease and written
 * through to the caches by the writer, so what it writes is known before its watch event), the caches for reads.
 */
export function reconcilePorts(deps: PortDeps): ReconcilePorts {
  const { caches, writers, connections } = deps;
  return {
    userGroups: { get: (key) => caches.userGroups.get(key), withId: (id) => caches.withUserGroupId(id) },
    claims: {
      cached: (name) => caches.claims.get(objectKey({ namespace: '', name })),
      write: (current, spec) => writers.claims.write(current, spec),
      release: (claim) => writers.claims.release(claim),
    },
    secretCache: {
      seen: (key) => ({
        cached: caches.secrets.get(key),
        otherExists: caches.otherSecretExists(key),
        known: (rv) => ({ ...caches.verified.known(key, rv), remember: (at, token) => caches.verified.remember(key, at, token) }),
      }),
      owned: (ug) => caches.ownedSecrets(ug),
    },
    namespaces: { get: (namespace) => namespaceView(deps, namespace) },
    secrets: writers.secrets,
    status: writers.status,
    connections: { resolve: (ns, ref, id) => connections.resolve(ns, ref, id) },
    workloads: writers.workloads,
    pods: writers.pods,
    events: { emit: (ug, event) => deps.recorder.emit(regarding(ug), event.type, event.reason, event.action, event.note) },
    metrics: deps.metrics,
    caps: { take: (cap, key) => take(deps.caps, cap, key) },
    clock: { now: () => Date.now() },
    finalizers: writers.finalizers,
  };
}

function namespaceView({ caches, writers }: PortDeps, namespace: string): NamespaceView {
  const key = objectKey({ namespace: '', name: namespace });
  const uid = caches.namespaces.get(key)?.metadata.uid;
  return {
    keeper: uid === undefined ? undefined : { apiVersion: 'v1', kind: 'Namespace', name: namespace, uid, controller: false },
    terminating: async () =>
      caches.namespaces.get(key)?.metadata.deletionTimestamp !== undefined || (await writers.finalizers.deleting(paths.namespace(namespace))),
  };
}

const NOW_TAKEN: Slot = { kind: 'now', spend: () => undefined };

function take(caps: PortDeps['caps'], cap: Cap, key: string): Slot {
  switch (cap) {
    case 'scheduled-rotation':
      return capSlot(caps.rotations, key);
    // Restarts or prompts off: the step never asks (it reports them disabled, or skips them).
    case 'restart':
      return caps.restarts ? capSlot(caps.restarts, key) : NOW_TAKEN;
    case 'prompt':
      return caps.prompts ? capSlot(caps.prompts, key) : NOW_TAKEN;
    case 'sync-request':
      return budgetSlot(caps.requests.sync, key);
    case 'rotation-request':
      return budgetSlot(caps.requests.rotation, key);
  }
}

function capSlot(cap: RateCap, key: string): Slot {
  const { inMs, first } = cap.reserve(key);
  return inMs > 0 ? { kind: 'wait', inMs, first } : NOW_TAKEN;
}

function budgetSlot(budget: RequestBudget, key: string): Slot {
  const { namespace } = splitKey(key);
  const slot = budget.take(namespace, key);
  return slot.kind === 'wait' ? slot : { kind: 'now', spend: () => budget.spent(namespace, key) };
}

/** What an Event about a UserGroup is about. */
function regarding(ug: UserGroup): EventRegarding {
  return { apiVersion: API_VERSION, kind: USERGROUP_KIND, namespace: ug.metadata.namespace, name: ug.metadata.name, uid: ug.metadata.uid };
}
