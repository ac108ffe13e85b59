import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { inject } from 'vitest';
import type { WatchEventType } from './resumable-watch.js';

// What test/e2e/upgrade.test.ts records while the chart is upgraded and rolled back, fed by its watches. Each
// recorder keeps what it saw with the time it saw it, so a failure can say which object, what and when.

/** Milliseconds since `start`, for the printed timelines. */
export function since(start: number, at: number): string {
  return `+${((at - start) / 1000).toFixed(1)} s`;
}

export interface ConditionView {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface UserGroupView {
  apiVersion: string;
  metadata: { name: string; generation?: number; resourceVersion?: string; annotations?: Record<string, string> };
  status?: { observedGeneration?: number; conditions?: ConditionView[]; tokenSecretName?: string; rotation?: { lastHandledRequest?: string } };
}

export function readyOf(ug: UserGroupView): ConditionView | undefined {
  return ug.status?.conditions?.find((c) => c.type === 'Ready');
}

/** A UserGroup seen without Ready=True (or deleted) at some moment. */
export interface NotReadySighting {
  readonly at: number;
  readonly name: string;
  readonly event: WatchEventType;
  /** The Ready condition's status, 'absent' without one, 'deleted' for a deletion. */
  readonly status: string;
  readonly reason: string | undefined;
}

/** Every UserGroup's Ready condition as the watch delivers it: any sighting that is not True, and status writes. */
export class ReadyRecorder {
  readonly notReady: NotReadySighting[] = [];
  /** Per UserGroup, how many watch events changed it (its resourceVersion moved): status writes, mostly. */
  readonly changes = new Map<string, number>();
  readonly #resourceVersions = new Map<string, string>();

  readonly onEvent = (type: WatchEventType, ug: UserGroupView): void => {
    const name = ug.metadata.name;
    const rv = ug.metadata.resourceVersion ?? '';
    const before = this.#resourceVersions.get(name);
    if (before !== undefined && before !== rv) this.changes.set(name, (this.changes.get(name) ?? 0) + 1);
    this.#resourceVersions.set(name, rv);
    const ready = readyOf(ug);
    if (type === 'DELETED') this.notReady.push({ at: Date.now(), name, event: type, status: 'deleted', reason: undefined });
    else if (ready?.status !== 'True') this.notReady.push({ at: Date.now(), name, event: type, status: ready?.status ?? 'absent', reason: ready?.reason });
  };

  /** Sightings from `from` on. */
  sightingsSince(from: number): NotReadySighting[] {
    return this.notReady.filter((s) => s.at >= from);
  }

  changesTotal(): number {
    return [...this.changes.values()].reduce((a, b) => a + b, 0);
  }
}

export interface ConsumerPodView {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  status: { containerStatuses?: { name: string; restartCount: number }[] };
}

/** Every consumer Pod the watch ever showed, with the highest restartCount seen per Pod and when it was deleted. */
export class PodRecorder {
  readonly pods = new Map<string, { name: string; restarts: number; deletedAt: number | undefined }>();

  readonly onEvent = (type: WatchEventType, pod: ConsumerPodView): void => {
    const restarts = Math.max(0, ...(pod.status.containerStatuses ?? []).map((c) => c.restartCount));
    const known = this.pods.get(pod.metadata.uid) ?? { name: pod.metadata.name, restarts, deletedAt: undefined };
    known.restarts = Math.max(known.restarts, restarts);
    if (type === 'DELETED' || pod.metadata.deletionTimestamp !== undefined) known.deletedAt ??= Date.now();
    this.pods.set(pod.metadata.uid, known);
  };

  /** uid → name and restarts of every Pod that existed at some moment from `from` on (deleted or not since). */
  podsSince(from: number): Record<string, { name: string; restarts: number }> {
    return Object.fromEntries(
      [...this.pods].filter(([, p]) => p.deletedAt === undefined || p.deletedAt >= from).map(([uid, p]) => [uid, { name: p.name, restarts: p.restarts }]),
    );
  }
}

export interface LeaseObject {
  metadata: { resourceVersion?: string };
  spec: { holderIdentity?: string; leaseTransitions?: number };
}

/** The Lease's holders in the order they held it ('' when released), with the time each was first seen. */
export class LeaseRecorder {
  readonly holders: { at: number; holder: string }[] = [];

  readonly onEvent = (_type: WatchEventType, lease: LeaseObject): void => {
    const holder = lease.spec.holderIdentity ?? '';
    if (this.holders.at(-1)?.holder !== holder) this.holders.push({ at: Date.now(), holder });
  };

  /** Holder changes from `from` on (a release to '' counts as one). */
  handOversSince(from: number): { at: number; holder: string }[] {
    return this.holders.filter((h) => h.at >= from);
  }
}

/**
 * The operator Pods' logs, streamed with `kubectl logs -f` from the moment each container runs until it ends,
 * so the logs of the Pods an upgrade deletes are still there to read: which reconcile called the service, and why.
 * The controller never logs a token or the API key (src/service/redact.ts).
 */
export class OperatorLogs {
  readonly lines = new Map<string, string[]>();
  readonly #followers = new Map<string, ChildProcess>();

  /** `sinceTime` (RFC 3339): only lines logged from then on. */
  constructor(private readonly sinceTime: string) {}

  /** Starts following a Pod's controller container (once per Pod; call again after a failed start). */
  follow(namespace: string, pod: string): void {
    if (this.#followers.has(pod)) return;
    const child = spawn(
      path.join(inject('binDir'), 'kubectl'),
      ['--kubeconfig', inject('kubeconfig'), '-n', namespace, 'logs', '-f', `--since-time=${this.sinceTime}`, pod, '-c', 'controller'],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    this.#followers.set(pod, child);
    const lines = this.lines.get(pod) ?? [];
    this.lines.set(pod, lines);
    let partial = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      lines.push(...parts);
    });
    // Not yet running (ContainerCreating): `kubectl logs` fails at once; the next Pod event tries again. A stream
    // that ended after lines arrived is kept ended (the container stopped).
    child.on('exit', () => {
      if (lines.length === 0) this.#followers.delete(pod);
    });
  }

  /**
   * Lines logged from `from` on (by their own time) whose message says the service was called: the controller
   * logs each call that changed something (a sync, a rotation, an adoption).
   */
  serviceCallLines(from: number): string[] {
    const callMessages = /"msg":"(user group synced|token rotated|adopted an existing user group|settled a rotation[^"]*)"/;
    const loggedAt = (line: string): number => Date.parse(/"time":"([^"]+)"/.exec(line)?.[1] ?? '') || Infinity;
    return [...this.lines].flatMap(([pod, lines]) => lines.filter((l) => callMessages.test(l) && loggedAt(l) >= from).map((l) => `${pod}: ${l}`));
  }

  stop(): void {
    for (const child of this.#followers.values()) child.kill('SIGTERM');
  }
}
