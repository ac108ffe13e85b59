import type { Logger } from 'pino';
import { API_VERSION, ROTATE_ANNOTATION, USERGROUP_KIND } from '../api/constants.js';
import { objectKey } from '../api/meta.js';
import type { ObservedSecret } from '../api/secret.js';
import { readyCondition as currentReady, type ConditionStatus, type UserGroup, type UserGroupSpec, type UserGroupStatus } from '../api/usergroup.js';
import type { ServiceFailure, ServiceUserGroup } from '../service/types.js';
import type { EventType } from '../kube/events.js';
import type { SecretWriteResult } from '../kube/secret-writer.js';
import { Reason, readyCondition } from './conditions.js';
import type { Connection, Resolution } from './connections.js';
import { decideRotation, decideSync, nextResyncAt, syncHash, upsertRequestFor } from './decide.js';
import { canonicalJson } from './hash.js';
import { desiredSecret, inspectSecret, secretMatches, type SecretContent } from './token-secret.js';

/** What the work queue does next with the key, like controller-runtime's Result / error_policy. */
export type ReconcileResult =
  | { readonly kind: 'done'; readonly requeueAfterMs?: number }
  /** Failed: retry with the per-key backoff, but not sooner than minDelayMs, or exactly after afterMs. */
  | { readonly kind: 'retry'; readonly minDelayMs?: number; readonly afterMs?: number };

export interface ReconcilerPorts {
  readonly userGroup: (key: string) => UserGroup | undefined;
  /** UserGroups sharing a userGroupId (for duplicate detection). */
  readonly userGroupsWithId: (userGroupId: string) => UserGroup[];
  /** The owned-Secret cache (Secrets carrying our managed-by label, with their data). */
  readonly cachedSecret: (key: string) => ObservedSecret | undefined;
  /** Whether the metadata-only cache of all other Secrets knows this name (someone else's, or ours unlabelled). */
  readonly otherSecretExists: (key: string) => boolean;
  readonly readSecret: (namespace: string, name: string) => Promise<ObservedSecret | undefined>;
  readonly writeSecret: (desired: ReturnType<typeof desiredSecret>, resourceVersion: string | undefined) => Promise<SecretWriteResult>;
  /** Owned token Secrets of this UserGroup other than `keep` (left over from an earlier spec.tokenSecret.name). */
  readonly staleSecrets: (ug: UserGroup, keep: string) => ObservedSecret[];
  readonly deleteSecret: (secret: ObservedSecret) => Promise<void>;
  readonly patchStatus: (ug: UserGroup, status: UserGroupStatus, clear: readonly (keyof UserGroupStatus)[]) => Promise<void>;
  readonly resolveConnection: (namespace: string, ref: { readonly name: string } | undefined) => Promise<Resolution>;
  readonly invalidateConnection: (namespace: string) => void;
  readonly event: (ug: UserGroup, type: EventType, reason: string, action: string, note: string) => void;
  readonly tokenRotated: () => void;
  readonly now: () => number;
}

export interface ReconcilerOptions {
  readonly resyncPeriodMs: number;
  readonly log: Logger;
}

const SLOW_RETRY_MS = 60_000;

/** A token Secret write the apiserver refused; already reported on the UserGroup. */
class SecretWriteRefused extends Error {}

/**
 * Brings one UserGroup's world in line with its spec: the group at the service,
 * its token in the Secret, and its status. Level-triggered: every decision is
 * made from what is observed now, so running it twice changes nothing.
 */
export class Reconciler {
  constructor(private readonly ports: ReconcilerPorts, private readonly options: ReconcilerOptions) {}

  async reconcile(key: string, reconcileId: string, signal?: AbortSignal): Promise<ReconcileResult> {
    const ug = this.ports.userGroup(key);
    // Gone or going: nothing to do. The service has no delete; the Secret goes by garbage collection.
    if (!ug || ug.metadata.deletionTimestamp) return { kind: 'done' };
    const log = this.options.log.child({ usergroup: key, reconcileId });
    const run = new Run(ug, this.ports, log, this.options, signal);
    try {
      return await run.execute();
    } catch (err) {
      if (err instanceof SecretWriteRefused) return { kind: 'retry', minDelayMs: 30_000 };
      if (signal?.aborted) {
        log.info('stopped before finishing: work was withdrawn (shutdown or lost leadership)');
        return { kind: 'retry' };
      }
      log.error({ err: errorText(err) }, 'reconcile failed');
      return { kind: 'retry' };
    }
  }
}

/** One reconcile of one UserGroup: gathers what it needs, decides, and applies the effects. */
class Run {
  private readonly previous: UserGroupStatus;

  constructor(
    private readonly ug: UserGroup,
    private readonly ports: ReconcilerPorts,
    private readonly log: Logger,
    private readonly options: ReconcilerOptions,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.previous = ug.status;
  }

  async execute(): Promise<ReconcileResult> {
    const { ug } = this;
    if (!ug.spec.ok) return this.blocked(Reason.InvalidSpec, ug.spec.error, {});
    const spec = ug.spec.value;
    if (spec.suspend) {
      await this.writeStatus('False', Reason.Suspended, 'spec.suspend is true: the operator makes no call to the service', {});
      return { kind: 'done' };
    }

    const resolution = await this.ports.resolveConnection(ug.metadata.namespace, spec.serviceRef);
    // A missing UserGroupService is watched; a missing API-key Secret is not, so poll for it, slowly.
    if (!resolution.ok) return this.blocked(resolution.reason, resolution.message, { retry: { minDelayMs: 10_000 } });
    const connection = resolution.connection;

    const older = await this.olderDuplicate(spec, connection);
    if (older) {
      return this.blocked(Reason.DuplicateUserGroupId,
        `userGroupId "${spec.userGroupId}" is already declared by the older UserGroup ${objectKey(older.metadata)} on ${connection.description}; this one makes no call`, {});
    }

    // Neither cache knowing the name means no Secret exists, unless a watch lags behind a creation: then our
    // create meets AlreadyExists before any rotation or Secret write, and the second pass reads it live.
    const first = await this.converge(spec, connection, false);
    if (first !== 'exists') return first;
    const second = await this.converge(spec, connection, true);
    return second === 'exists' ? { kind: 'retry' } : second;
  }

  /** Everything after the preconditions; 'exists' when a create found a Secret neither cache knew of. */
  private async converge(spec: UserGroupSpec, connection: Connection, readLive: boolean): Promise<ReconcileResult | 'exists'> {
    const { ug } = this;
    const secretKey = objectKey({ namespace: ug.metadata.namespace, name: spec.tokenSecret.name });
    const observedSecret = readLive
      ? await this.ports.readSecret(ug.metadata.namespace, spec.tokenSecret.name)
      : this.ports.cachedSecret(secretKey) ?? (this.ports.otherSecretExists(secretKey) ? await this.ports.readSecret(ug.metadata.namespace, spec.tokenSecret.name) : undefined);
    const inspection = inspectSecret(observedSecret, ug.metadata, spec);
    if (inspection.state === 'foreign') {
      return this.blocked(Reason.SecretConflict,
        `Secret ${secretKey} exists and is not owned by this UserGroup; the operator never modifies it. Delete it, or set spec.tokenSecret.name to another name`,
        { retry: { minDelayMs: 30_000 } });
    }
    const owned = inspection.state === 'owned' ? inspection : undefined;

    const request = upsertRequestFor(spec);
    const hash = syncHash(request, connection.id);
    const now = this.ports.now();
    const resyncAt = nextResyncAt(this.previous.lastSyncTime, ug.metadata.uid, this.options.resyncPeriodMs);
    const sync = decideSync({ status: this.previous, desiredHash: hash, secret: inspection, resyncDue: resyncAt !== undefined && now >= resyncAt });
    const rotation = decideRotation(ug.metadata.annotations[ROTATE_ANNOTATION], inspection, this.previous.rotation?.lastHandledRequest);

    const held = owned?.token;
    let token = held;
    let group: ServiceUserGroup | undefined;
    let handled = owned?.handled ?? this.previous.rotation?.lastHandledRequest;
    let pending = owned?.pending;
    let rotatedAt: string | undefined;
    let secretVersion = owned?.resourceVersion;
    let secretNow: ObservedSecret | undefined = owned?.secret;

    if (sync.kind === 'upsert' || rotation.kind === 'recover') {
      const result = await connection.upsert(request, this.signal);
      if (!result.ok) return this.serviceFailed('sync', result.failure, connection);
      group = result.group;
      token = result.group.token;
      this.log.info({ why: sync.kind === 'upsert' ? sync.why : 'rotation-recovery', created: group.created }, 'user group synced');
    }

    let rotateFor: string | undefined;
    if (rotation.kind === 'rotate') rotateFor = rotation.value;
    if (rotation.kind === 'record') handled = rotation.value;
    if (rotation.kind === 'recover') {
      if (held && token && !token.equals(held)) {
        // The rotation reached the service before we could store its result: the PUT returned the new token.
        handled = rotation.value;
        pending = undefined;
        rotatedAt = iso(now);
        this.ports.tokenRotated();
        this.event('Normal', 'TokenRotated', 'Rotate', `token rotated for rotation request "${rotation.value}" (completed after a restart)`);
      } else {
        rotateFor = rotation.value;
      }
    }

    if (rotateFor !== undefined) {
      if (!token) throw new Error('no trusted token to rotate');
      // Record the intent on the Secret first: if we die after the service rotates, the next run knows
      // a rotation may have happened and checks with a PUT instead of rotating a second time.
      const intent = await this.storeSecret(spec, { token, handled, pending: rotateFor }, secretNow, secretVersion);
      if (!intent.ok) return intent.conflict === 'exists' ? 'exists' : { kind: 'retry' };
      secretNow = intent.secret;
      secretVersion = intent.secret.metadata.resourceVersion;

      const rotated = await connection.rotate(token, this.signal);
      if (rotated.ok) {
        token = rotated.group.token;
        this.ports.tokenRotated();
        rotatedAt = iso(this.ports.now());
        this.event('Normal', 'TokenRotated', 'Rotate', `token rotated for rotation request "${rotateFor}"`);
        this.log.info({ request: rotateFor }, 'token rotated');
      } else if (rotated.failure.kind === 'rejected') {
        // The held token is not current (rotated elsewhere, or by us just before a crash). A PUT returns
        // the current one; store it and call the request handled, so it is never rotated twice.
        const current = await connection.upsert(request, this.signal);
        if (!current.ok) return this.serviceFailed('sync', current.failure, connection);
        // Still the same token: the service refused the rotation itself. Not handled; retry it.
        if (current.group.token.equals(token)) return this.serviceFailed('rotate', rotated.failure, connection);
        group = current.group;
        token = current.group.token;
        this.event('Warning', 'RotationRecovered', 'Rotate',
          `the service refused to rotate the held token (${rotated.failure.message}); stored the current token instead and marked request "${rotateFor}" handled`);
        this.log.warn({ request: rotateFor }, 'rotation refused; recovered the current token');
      } else {
        return this.serviceFailed('rotate', rotated.failure, connection);
      }
      handled = rotateFor;
      pending = undefined;
    }

    if (!token) throw new Error('no token to store');
    const stored = await this.storeSecret(spec, { token, handled, pending }, secretNow, secretVersion);
    if (!stored.ok) return stored.conflict === 'exists' ? 'exists' : { kind: 'retry' };
    // A renamed tokenSecret leaves a copy of a live token behind: remove the old Secrets we own.
    for (const stale of this.ports.staleSecrets(ug, spec.tokenSecret.name)) {
      await this.ports.deleteSecret(stale);
      this.log.info({ secret: stale.metadata.name }, 'deleted the token Secret of an earlier spec.tokenSecret.name');
    }
    if (group) {
      const restored = sync.kind === 'upsert' && (sync.why === 'secret-missing' || sync.why === 'secret-unreadable');
      this.event('Normal', 'Synced', 'Sync', restored
        ? `user group synced; token Secret ${spec.tokenSecret.name} restored`
        : `user group ${group.created ? 'created' : 'updated'} at the service (${connection.description}); token in Secret ${spec.tokenSecret.name}`);
    }

    const lastSyncTime = group ? iso(now) : this.previous.lastSyncTime;
    const rotationStatus = dropUndefined({ lastHandledRequest: handled, lastRotationTime: rotatedAt ?? this.previous.rotation?.lastRotationTime });
    await this.writeStatus('True', Reason.Synced, `user group synced; token in Secret ${spec.tokenSecret.name}`, {
      teamId: group ? group.teamId : this.previous.teamId,
      providedId: group ? group.providedId : this.previous.providedId,
      environmentTag: group ? group.environmentTag : this.previous.environmentTag,
      tokenSecretName: spec.tokenSecret.name,
      lastSyncTime,
      syncedHash: group ? hash : this.previous.syncedHash,
      ...(Object.keys(rotationStatus).length > 0 ? { rotation: rotationStatus } : {}),
    });
    const nextResync = nextResyncAt(lastSyncTime, this.ug.metadata.uid, this.options.resyncPeriodMs);
    return nextResync === undefined ? { kind: 'done' } : { kind: 'done', requeueAfterMs: Math.max(1_000, nextResync - this.ports.now()) };
  }

  private async olderDuplicate(spec: UserGroupSpec, connection: Connection): Promise<UserGroup | undefined> {
    const mine = this.ug.metadata;
    const candidates = this.ports
      .userGroupsWithId(spec.userGroupId)
      .filter((o) => o.metadata.uid !== mine.uid && !o.metadata.deletionTimestamp && isOlder(o, this.ug))
      .sort((a, b) => (isOlder(a, b) ? -1 : 1));
    for (const other of candidates) {
      if (!other.spec.ok) continue;
      const resolved = await this.ports.resolveConnection(other.metadata.namespace, other.spec.value.serviceRef);
      if (resolved.ok && resolved.connection.id === connection.id) return other;
    }
    return undefined;
  }

  private async storeSecret(spec: UserGroupSpec, content: SecretContent, current: ObservedSecret | undefined, resourceVersion: string | undefined): Promise<SecretWriteResult> {
    const desired = desiredSecret(this.ug.metadata, spec, content);
    if (current && secretMatches(current, desired)) return { ok: true, secret: current };
    this.signal?.throwIfAborted();
    let written;
    try {
      written = await this.ports.writeSecret(desired, resourceVersion);
    } catch (err) {
      // Refused by the apiserver (validation, quota, RBAC): say so on the object, never just in a log.
      const message = `the apiserver refused to write token Secret ${spec.tokenSecret.name}: ${err instanceof Error ? err.message : String(err)}`;
      await this.writeStatus('False', Reason.SecretWriteFailed, message, {});
      this.event('Warning', Reason.SecretWriteFailed, 'Sync', message);
      throw new SecretWriteRefused(message);
    }
    if (!written.ok) this.log.info({ secret: spec.tokenSecret.name, conflict: written.conflict }, 'token Secret changed while we worked; deciding again');
    return written;
  }

  private async serviceFailed(operation: 'sync' | 'rotate', failure: ServiceFailure, connection: Connection): Promise<ReconcileResult> {
    const reason = reasonFor(failure);
    const message = `${operation === 'sync' ? 'PUT /api/user' : 'POST /api/user (rotate)'} via ${connection.description} failed: ${failure.message}`;
    this.log.warn({ reason, status: failure.status, operation }, 'service call failed');
    if (failure.kind === 'unauthorized') this.ports.invalidateConnection(this.ug.metadata.namespace);
    await this.writeStatus('False', reason, message, {});
    this.event('Warning', operation === 'sync' ? 'SyncFailed' : 'RotationFailed', operation === 'sync' ? 'Sync' : 'Rotate', `${reason}: ${message}`);
    switch (failure.kind) {
      case 'rate-limited':
        return failure.retryAfterMs !== undefined ? { kind: 'retry', afterMs: failure.retryAfterMs } : { kind: 'retry' };
      case 'unauthorized':
        return { kind: 'retry', minDelayMs: SLOW_RETRY_MS };
      default:
        return { kind: 'retry' };
    }
  }

  /** A condition the user must fix: status + Event, and a retry only where nothing else will wake us. */
  private async blocked(reason: Reason, message: string, options: { retry?: { minDelayMs: number } }): Promise<ReconcileResult> {
    this.log.info({ reason }, message);
    await this.writeStatus('False', reason, message, {});
    this.event('Warning', reason, 'Sync', message);
    return options.retry ? { kind: 'retry', minDelayMs: options.retry.minDelayMs } : { kind: 'done' };
  }

  /** Writes status unless it already says exactly this (no write, no watch event, no loop). */
  private async writeStatus(status: ConditionStatus, reason: Reason, message: string, fields: UserGroupStatus): Promise<void> {
    const now = iso(this.ports.now());
    const generation = this.ug.metadata.generation;
    const ready = readyCondition(currentReady(this.previous), status, reason, message, generation, now);
    const next: UserGroupStatus = {
      ...this.previous,
      ...fields,
      observedGeneration: generation,
      conditions: [...(this.previous.conditions ?? []).filter((c) => c.type !== 'Ready'), ready],
    };
    const clear = (Object.keys(fields) as (keyof UserGroupStatus)[]).filter((k) => fields[k] === undefined);
    for (const k of clear) delete (next as Record<string, unknown>)[k];
    if (canonicalJson(next) === canonicalJson(this.previous)) return;
    this.signal?.throwIfAborted();
    await this.ports.patchStatus(this.ug, next, clear);
  }

  private event(type: EventType, reason: string, action: string, note: string): void {
    this.ports.event(this.ug, type, reason, action, note);
  }
}

function reasonFor(failure: ServiceFailure): Reason {
  switch (failure.kind) {
    case 'unauthorized':
      return Reason.Unauthorized;
    case 'rate-limited':
      return Reason.RateLimited;
    case 'unavailable':
      return Reason.ServiceUnavailable;
    case 'rejected':
      return Reason.Rejected;
    case 'invalid-response':
      return Reason.InvalidResponse;
  }
}

/**
 * Older = created earlier. creationTimestamp has one-second resolution, so within
 * a second the one already synced keeps the id (no flip-flop), then namespace/name
 * decides so every replica agrees.
 */
function isOlder(a: UserGroup, b: UserGroup): boolean {
  if (a.metadata.creationTimestamp !== b.metadata.creationTimestamp) return a.metadata.creationTimestamp < b.metadata.creationTimestamp;
  const aSynced = a.status.syncedHash !== undefined;
  if (aSynced !== (b.status.syncedHash !== undefined)) return aSynced;
  return objectKey(a.metadata) < objectKey(b.metadata);
}

function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function dropUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export const regardingUserGroup = (ug: UserGroup): { apiVersion: string; kind: string; namespace: string; name: string; uid: string } => ({
  apiVersion: API_VERSION,
  kind: USERGROUP_KIND,
  namespace: ug.metadata.namespace,
  name: ug.metadata.name,
  uid: ug.metadata.uid,
});

