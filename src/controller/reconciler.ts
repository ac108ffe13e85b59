import type { Logger } from 'pino';
import { API_VERSION, RESTART_CONSENT_ANNOTATION, ROTATE_ANNOTATION, USERGROUP_KIND } from '../api/constants.js';
import { claimName, type ClaimSpec, type UserGroupClaim } from '../api/claim.js';
import { objectKey } from '../api/meta.js';
import type { ObservedSecret } from '../api/secret.js';
import { findReadyCondition, type ConditionStatus, type ServiceRef, type UserGroup, type UserGroupSpec, type UserGroupStatus } from '../api/usergroup.js';
import type { ClaimWriteResult } from '../kube/claim-writer.js';
import type { ServiceFailure, ServiceResult, ServiceUserGroup, UpsertRequest } from '../service/types.js';
import { SecretValue } from '../service/secret-value.js';
import type { EventType } from '../kube/events.js';
import type { SecretWriteResult } from '../kube/secret-writer.js';
import { decideClaim } from './claim-decision.js';
import { nextReadyCondition, Reason } from './conditions.js';
import type { CallContext, CallResult, Connection, Deferral, Resolution } from './connections.js';
import type { FailureCause, ReconcileResult } from './retry-policy.js';
import {
  decideRotation,
  decideSync,
  effectiveMaxTokenAge,
  nextResyncAt,
  scheduledRotation,
  syncHash,
  upsertRequestFor,
  type RotationDecision,
  type ScheduledRotation,
  type SyncDecision,
} from './decide.js';
import { canonicalJson, sha256Hex } from './hash.js';
import { desiredSecret, holdsRecord, inspectSecret, secretMatches, type SecretContent, type SecretInspection } from './token-secret.js';
import { decideRestarts, describeTarget, workloadAction } from './restart-decision.js';
import type { ObservedWorkload, RestartKind, RestartTarget } from '../api/workload.js';
import type { RestartResult } from '../kube/workload-restarter.js';
import { errorText } from '../platform/error-text.js';
import { dropUndefined } from '../platform/json-value.js';

export interface ReconcilerPorts {
  readonly userGroup: (key: string) => UserGroup | undefined;
  /** UserGroups sharing a userGroupId (holders of claims, and installs older than claims). */
  readonly userGroupsWithId: (userGroupId: string) => UserGroup[];
  /** The UserGroupClaim cache (cluster-scoped, by name). */
  readonly claim: (name: string) => UserGroupClaim | undefined;
  readonly readClaim: (name: string) => Promise<UserGroupClaim | undefined>;
  readonly createClaim: (spec: ClaimSpec) => Promise<ClaimWriteResult>;
  readonly replaceClaim: (current: UserGroupClaim, spec: ClaimSpec) => Promise<ClaimWriteResult>;
  readonly releaseClaim: (claim: UserGroupClaim) => Promise<void>;
  /** The token-Secret cache: Secrets a UserGroup controls, metadata only (read the data with readSecret). */
  readonly cachedSecret: (key: string) => ObservedSecret | undefined;
  /**
   * Whether this resourceVersion of the Secret has data the operator wrote or checked (its own write, a
   * read that matched the sealed digest, or what was there when the controller started): if not, someone
   * else wrote it since and the data must be read before the metadata is believed about it.
   */
  readonly secretVerified: (key: string, resourceVersion: string) => boolean;
  /** The token this process wrote or read at that resourceVersion, if it still knows it (spares a read). */
  readonly heldToken: (key: string, resourceVersion: string) => SecretValue | undefined;
  readonly markSecretVerified: (key: string, resourceVersion: string, token: SecretValue | undefined) => void;
  /** Whether the metadata-only cache of all other Secrets knows this name (someone else's, or ours unlabelled). */
  readonly otherSecretExists: (key: string) => boolean;
  readonly readSecret: (namespace: string, name: string) => Promise<ObservedSecret | undefined>;
  readonly writeSecret: (desired: ReturnType<typeof desiredSecret>, resourceVersion: string | undefined) => Promise<SecretWriteResult>;
  /** The cached token Secrets this UserGroup controls (the current one, and any left from an earlier spec.tokenSecret.name). */
  readonly ownedSecrets: (ug: UserGroup) => ObservedSecret[];
  readonly deleteSecret: (secret: ObservedSecret) => Promise<void>;
  readonly patchStatus: (ug: UserGroup, status: UserGroupStatus, clear: readonly (keyof UserGroupStatus)[]) => Promise<void>;
  readonly resolveConnection: (namespace: string, ref: ServiceRef | undefined, userGroupId: string) => Promise<Resolution>;
  /** Forget the connection's cached API key (after a 401). */
  readonly invalidateConnection: (connection: Connection) => void;
  readonly event: (ug: UserGroup, type: EventType, reason: string, action: string, note: string) => void;
  readonly tokenRotated: (trigger: RotationTrigger) => void;
  /** A rotation the service did not do (not one that was only deferred: that is no failure). */
  readonly rotationFailed: (trigger: RotationTrigger) => void;
  /**
   * Takes a slot of the global cap on scheduled rotations for this UserGroup key: 0 when it may rotate now, else
   * the milliseconds until the slot kept for it (come back then).
   */
  readonly scheduledRotationSlot: (key: string) => number;
  /** A workload of the namespace, as far as restarting it needs (undefined: there is none). */
  readonly readWorkload: (namespace: string, target: RestartTarget) => Promise<ObservedWorkload | undefined>;
  readonly restartWorkload: (namespace: string, target: RestartTarget, resourceVersion: string, userGroupName: string, value: string) => Promise<RestartResult>;
  /** Takes a slot of the global cap on workload restarts, as scheduledRotationSlot does. */
  readonly workloadRestartSlot: (key: string) => number;
  readonly workloadRestarted: (kind: RestartKind, outcome: RestartOutcome) => void;
  readonly now: () => number;
}

/** What became of one restart target. */
export type RestartOutcome = 'restarted' | 'not-allowed' | 'missing' | 'failed';

/** Why a token was rotated: someone asked, its schedule, or the adoption of a group found at the service. */
export type RotationTrigger = 'requested' | 'scheduled' | 'adoption';

export interface ReconcilerOptions {
  readonly resyncPeriodMs: number;
  /** The operator's floor under spec.rotation.maxTokenAge (--min-token-age): a tenant cannot make rotations more frequent. */
  readonly minTokenAgeMs: number;
  /** Whether the operator restarts spec.rolloutRestartTargets (the chart's opt-in, which also grants the RBAC). */
  readonly workloadRestarts: boolean;
  readonly log: Logger;
}

/** A token Secret write the apiserver refused; already reported on the UserGroup. */
class SecretWriteRefused extends Error {}

/**
 * Brings one UserGroup's world in line with its spec: the group at the service,
 * its token in the Secret, and its status. Level-triggered: every decision is
 * made from what is observed now, so running it twice changes nothing.
 */
export class Reconciler {
  constructor(
    private readonly ports: ReconcilerPorts,
    private readonly options: ReconcilerOptions,
  ) {}

  /** `wake` queues the key again: a connection that deferred a call runs it when the call may go out. */
  async reconcile(key: string, reconcileId: string, signal?: AbortSignal, wake: () => void = () => undefined): Promise<ReconcileResult> {
    const ug = this.ports.userGroup(key);
    // Gone or going: nothing to do. The service has no delete; the Secret goes by garbage collection.
    if (!ug || ug.metadata.deletionTimestamp) return { kind: 'done' };
    const log = this.options.log.child({ usergroup: key, reconcileId });
    const reconciliation = new Reconciliation(key, ug, this.ports, log, this.options, signal, wake);
    try {
      return await reconciliation.run();
    } catch (err) {
      if (err instanceof SecretWriteRefused) return failed('secret-write-refused');
      if (signal?.aborted) {
        log.info('stopped before finishing: work was withdrawn (shutdown or lost leadership)');
        return failed('crashed');
      }
      log.error({ err: errorText(err) }, 'reconcile failed');
      return failed('crashed');
    }
  }
}

/** A create met a Secret neither cache knew of (a watch lagging behind a creation): decide again from a live read. */
interface SecretAppeared {
  readonly kind: 'secret-appeared';
}
const SECRET_APPEARED: SecretAppeared = { kind: 'secret-appeared' };

/** The decisions of one reconcile, made from what it observed before any effect. */
interface Plan {
  readonly spec: UserGroupSpec;
  readonly connection: Connection;
  readonly claim: UserGroupClaim;
  readonly request: UpsertRequest;
  /** Digest of the request on this connection: status.syncedHash once it is synced. */
  readonly hash: string;
  readonly now: number;
  /** The token Secret this UserGroup controls, as observed. */
  readonly owned: Extract<SecretInspection, { state: 'owned' }> | undefined;
  readonly sync: SyncDecision;
  readonly rotation: RotationDecision;
  /** When the held token was obtained, as far as anything records it (the Secret, else the status, else creation). */
  readonly issuedAt: string;
  /** The scheduled rotation of the held token, with spec.rotation.maxTokenAge. */
  readonly schedule: ScheduledRotation | undefined;
}

/** What the steps have done so far; each step hands on a new one. */
interface Progress {
  /** The token to store: the held one, or what the service returned. */
  readonly token: SecretValue | undefined;
  /** The service's answer, when a call went out. */
  readonly group: ServiceUserGroup | undefined;
  /** Rotation bookkeeping as the Secret will record it. */
  readonly handled: string | undefined;
  readonly pending: string | undefined;
  readonly rotatedAt: string | undefined;
  /** When the stored token was obtained, once the store step has decided it. */
  readonly issuedAt?: string;
  /** The store step stored a token other than the one held before. */
  readonly tokenChanged?: boolean;
  /** A scheduled rotation fell due but the global cap said wait this long. */
  readonly rotationCappedForMs?: number;
  /** status.rolloutRestarts as the restart step leaves it. */
  readonly restarts?: UserGroupStatus['rolloutRestarts'];
  /** Restarts are left to do: the cap said wait this long, or (failure) a target could not be restarted. */
  readonly restartsCappedForMs?: number;
  readonly restartFailure?: FailureCause;
  readonly adopted: UserGroupStatus['adoption'];
  /** The token Secret as stored now (after our own writes), if any. */
  readonly secret: ObservedSecret | undefined;
}

/** A step hands on its progress, or ends the reconcile. */
type Step = { readonly ok: true; readonly progress: Progress } | { readonly ok: false; readonly end: ReconcileResult | SecretAppeared };

const end = (result: ReconcileResult | SecretAppeared): Step => ({ ok: false, end: result });

/** What a rotation is for, in Events. */
function describeRotation(rotation: Extract<RotationDecision, { value: string; scheduled: boolean }>): string {
  return rotation.scheduled ? `its schedule (the token had reached spec.rotation.maxTokenAge)` : `rotation request "${rotation.value}"`;
}

function triggerOf(rotation: Extract<RotationDecision, { scheduled: boolean }>): RotationTrigger {
  return rotation.scheduled ? 'scheduled' : 'requested';
}

/** Only a requested value is remembered as handled; a scheduled rotation is done once the token's issue time moves. */
function handledAfter(rotation: Extract<RotationDecision, { value: string; scheduled: boolean }>, progress: Progress): string | undefined {
  return rotation.scheduled ? progress.handled : rotation.value;
}

/** Before any step: what the Secret holds, and what the status said was handled. */
function startingPoint(plan: Plan, previous: UserGroupStatus): Progress {
  const { owned } = plan;
  return {
    token: owned?.token,
    group: undefined,
    handled: owned?.handled ?? previous.rotation?.lastHandledRequest,
    pending: owned?.pending,
    rotatedAt: undefined,
    adopted: undefined,
    secret: owned?.secret,
  };
}

/** One reconcile of one UserGroup: gathers what it needs, decides, and applies the effects. */
class Reconciliation {
  private readonly previous: UserGroupStatus;
  /** Service calls that went out in this run: later ones are follow-ups, never held back for their turn. */
  private callsMade = 0;
  /** A rotation intent is stored: its POST finishes work begun, like a follow-up (deferring it costs a recovery PUT). */
  private intentStored = false;

  constructor(
    private readonly key: string,
    private readonly ug: UserGroup,
    private readonly ports: ReconcilerPorts,
    private readonly log: Logger,
    private readonly options: ReconcilerOptions,
    private readonly signal: AbortSignal | undefined,
    private readonly wake: () => void,
  ) {
    this.previous = ug.status;
  }

  private context(): CallContext {
    return { key: this.key, followUp: this.callsMade > 0 || this.intentStored, signal: this.signal, wake: this.wake };
  }

  private async upsert(connection: Connection, request: UpsertRequest): Promise<ServiceResult | Deferral> {
    return this.made(await connection.upsert(request, this.context()));
  }

  private async rotate(connection: Connection, token: SecretValue): Promise<ServiceResult | Deferral> {
    return this.made(await connection.rotate(token, this.context()));
  }

  private made(result: CallResult): ServiceResult | Deferral {
    if (!result.ok && 'deferred' in result) return result.deferred;
    this.callsMade += 1;
    return result;
  }

  /** The preconditions (a valid spec, not suspended, a connection the rules allow, the id's claim), then converge. */
  async run(): Promise<ReconcileResult> {
    const { ug } = this;
    if (!ug.spec.ok) return this.blocked(Reason.InvalidSpec, ug.spec.error);
    const spec = ug.spec.value;
    if (spec.suspend) {
      await this.writeStatus('False', Reason.Suspended, 'spec.suspend is true: the operator makes no call to the service', {});
      return { kind: 'done' };
    }

    const resolution = await this.ports.resolveConnection(ug.metadata.namespace, spec.serviceRef, spec.userGroupId);
    if (!resolution.ok) {
      // The tenant rules say no: the namespace may not hold this group's token either. A rule change requeues us.
      if (resolution.reason === Reason.NamespaceNotAllowed || resolution.reason === Reason.UserGroupIdNotAllowed) {
        return this.refused(resolution.reason, resolution.message, spec);
      }
      // A missing UserGroupService is watched; a missing API-key Secret is not, so poll for it, slowly.
      return this.blocked(resolution.reason, resolution.message, 'connection-unresolved');
    }
    const connection = resolution.connection;

    // Refused adoption is final for this generation and policy: no claim and no PUT on every restart to hear it again.
    const ready = findReadyCondition(this.previous);
    if (connection.adoption === 'Refuse' && ready?.reason === Reason.AdoptionRefused && ready.observedGeneration === ug.metadata.generation) {
      return { kind: 'done' };
    }

    // A connection that cannot be called now gets no claim written either: a flood of UserGroups on a dead
    // connection then costs one status write each, and they are woken when it may be called again.
    // (Only before a first claim: a synced UserGroup that needs no call must not be reported as failing.)
    const existing = this.ports.claim(claimName(connection.account, spec.userGroupId));
    const unavailable = existing === undefined ? connection.unavailable(this.context()) : undefined;
    if (unavailable) return this.deferred(unavailable, 'sync', connection);

    const held = await this.holdClaim(spec, connection);
    if (!held.ok) return held.result;

    // Neither cache knowing the name means no Secret exists, unless a watch lags behind a creation: then our
    // create meets AlreadyExists before any rotation or Secret write, and the second pass reads it live.
    const first = await this.converge(spec, connection, held.claim, false);
    if (first.kind !== 'secret-appeared') return first;
    const second = await this.converge(spec, connection, held.claim, true);
    return second.kind === 'secret-appeared' ? failed('lost-race') : second;
  }

  /**
   * Takes or keeps the UserGroupClaim for (account, userGroupId) before any call: the apiserver decides which
   * namespace holds an id, once, for every deployment of the operator.
   */
  private async holdClaim(spec: UserGroupSpec, connection: Connection): Promise<{ ok: true; claim: UserGroupClaim } | { ok: false; result: ReconcileResult }> {
    const name = claimName(connection.account, spec.userGroupId);
    let claim = this.ports.claim(name);
    // Two rounds: a lost race (someone created or took over the claim first) is decided again on what won.
    for (let round = 0; round < 2; round++) {
      const decision = decideClaim({
        claim,
        me: this.ug.metadata,
        userGroupId: spec.userGroupId,
        account: connection.account,
        holderAlive: claim !== undefined && this.holderAlive(claim),
        syncedSibling: claim === undefined ? await this.syncedSibling(spec, connection) : undefined,
      });
      switch (decision.kind) {
        case 'held':
          return { ok: true, claim: decision.claim };
        case 'duplicate':
          return {
            ok: false,
            result: await this.blocked(
              Reason.DuplicateUserGroupId,
              `userGroupId "${spec.userGroupId}" is already used by UserGroup ${decision.holder} on ${connection.description}; this one makes no call until that one is deleted`,
            ),
          };
        case 'claimed-elsewhere':
          return {
            ok: false,
            result: await this.refused(
              Reason.UserGroupIdClaimed,
              `userGroupId "${spec.userGroupId}" is held by another namespace on the account of ${connection.description} (UserGroupClaim ${decision.claimName}); only a cluster admin can release it`,
              spec,
            ),
          };
        case 'create':
        case 'take-over': {
          this.signal?.throwIfAborted();
          const written =
            decision.kind === 'create' ? await this.ports.createClaim(decision.spec) : await this.ports.replaceClaim(decision.claim, decision.spec);
          if (written.ok) {
            // Debug: every first sync takes a claim, and its "user group synced" line follows at info.
            this.log.debug({ claim: written.claim.metadata.name, how: decision.kind }, 'claimed the userGroupId');
            return { ok: true, claim: written.claim };
          }
          claim = await this.ports.readClaim(name);
        }
      }
    }
    return { ok: false, result: failed('lost-race') };
  }

  /** The claim's holder still exists: the same UserGroup (uid), in the cache, not being deleted. */
  private holderAlive(claim: UserGroupClaim): boolean {
    const holder = this.ports.userGroup(objectKey({ namespace: claim.spec.namespace, name: claim.spec.userGroup.name }));
    return holder?.metadata.uid === claim.spec.userGroup.uid && !holder.metadata.deletionTimestamp;
  }

  /**
   * Installs older than claims may have a synced UserGroup and a newer duplicate of it in one namespace, neither
   * holding a claim yet: the synced one must get it, whichever the queue reconciles first.
   */
  private async syncedSibling(spec: UserGroupSpec, connection: Connection): Promise<string | undefined> {
    if (this.previous.syncedHash !== undefined) return undefined;
    for (const other of this.ports.userGroupsWithId(spec.userGroupId)) {
      const meta = other.metadata;
      if (meta.uid === this.ug.metadata.uid || meta.namespace !== this.ug.metadata.namespace || meta.deletionTimestamp) continue;
      if (other.status.syncedHash === undefined || !other.spec.ok) continue;
      const resolved = await this.ports.resolveConnection(meta.namespace, other.spec.value.serviceRef, other.spec.value.userGroupId);
      if (resolved.ok && resolved.connection.account === connection.account) return objectKey(meta);
    }
    return undefined;
  }

  /**
   * The steps after the preconditions, each handing on what it did: observe the token Secret → sync at the
   * service → rotate if asked → store the token → report status.
   */
  private async converge(spec: UserGroupSpec, connection: Connection, claim: UserGroupClaim, readLive: boolean): Promise<ReconcileResult | SecretAppeared> {
    const secretKey = objectKey({ namespace: this.ug.metadata.namespace, name: spec.tokenSecret.name });
    const inspection = await this.observeSecret(spec, connection, secretKey, readLive);
    if (inspection.state === 'foreign') {
      return this.blocked(
        Reason.SecretConflict,
        `Secret ${secretKey} exists and is not owned by this UserGroup; the operator never modifies it. Delete it, or set spec.tokenSecret.name to another name`,
        'secret-taken',
      );
    }
    const plan = this.plan(spec, connection, claim, inspection);
    let step = await this.syncAtService(plan, startingPoint(plan, this.previous));
    if (step.ok) step = await this.rotateIfAsked(plan, step.progress);
    if (step.ok) step = await this.storeToken(plan, step.progress);
    if (step.ok) step = await this.restartConsumers(plan, step.progress);
    if (!step.ok) return step.end;
    return this.reportSynced(plan, step.progress);
  }

  /**
   * The token Secret as far as this reconcile must know it. The cache has no data: it is read when the held
   * token is needed (a rotation) or the data may have been changed by someone else since the operator last
   * wrote or checked it.
   */
  private async observeSecret(spec: UserGroupSpec, connection: Connection, secretKey: string, readLive: boolean): Promise<SecretInspection> {
    const { ug } = this;
    const observed = readLive
      ? await this.readSecret(spec)
      : (this.ports.cachedSecret(secretKey) ?? (this.ports.otherSecretExists(secretKey) ? await this.readSecret(spec) : undefined));
    let inspection = inspectSecret(observed, ug.metadata, spec, connection.seal);
    if (inspection.state === 'owned' && inspection.secret.data === undefined && inspection.trusted) {
      const { rotation } = this.rotationFor(spec, inspection, this.ports.now());
      const verified = this.ports.secretVerified(secretKey, inspection.resourceVersion);
      if (rotation.kind === 'rotate' || rotation.kind === 'recover' || rotation.kind === 'settle' || !verified) {
        // The token this process itself wrote at this very version, checked against the sealed digest; else a read.
        const known = verified ? this.ports.heldToken(secretKey, inspection.resourceVersion) : undefined;
        const withKnown =
          known &&
          inspectSecret(
            { ...inspection.secret, data: { [spec.tokenSecret.key]: Buffer.from(known.reveal(), 'utf8').toString('base64') } },
            ug.metadata,
            spec,
            connection.seal,
          );
        inspection =
          withKnown?.state === 'owned' && withKnown.token ? withKnown : inspectSecret(await this.readSecret(spec), ug.metadata, spec, connection.seal);
      }
    }
    if (inspection.state === 'owned' && inspection.token) this.ports.markSecretVerified(secretKey, inspection.resourceVersion, inspection.token);
    return inspection;
  }

  /** The decisions, from what was observed: no I/O. */
  private plan(spec: UserGroupSpec, connection: Connection, claim: UserGroupClaim, secret: Exclude<SecretInspection, { state: 'foreign' }>): Plan {
    const request = upsertRequestFor(spec);
    const hash = syncHash(request, connection.id);
    const now = this.ports.now();
    const resyncAt = nextResyncAt(this.previous.lastSyncTime, this.ug.metadata.uid, this.options.resyncPeriodMs);
    const { rotation, issuedAt, schedule } = this.rotationFor(spec, secret, now);
    return {
      spec,
      connection,
      claim,
      request,
      hash,
      now,
      owned: secret.state === 'owned' ? secret : undefined,
      sync: decideSync({ status: this.previous, desiredHash: hash, secret, resyncDue: resyncAt !== undefined && now >= resyncAt }),
      rotation,
      issuedAt,
      schedule,
    };
  }

  /**
   * The rotation to do, requested or scheduled. A schedule needs a token to rotate (a trusted Secret) and counts
   * from when that token was obtained: the Secret records it; older Secrets fall back to the status, then to the
   * UserGroup's creation (the earliest the token can date from: never later than its real due time).
   */
  private rotationFor(
    spec: UserGroupSpec,
    secret: SecretInspection,
    now: number,
  ): { rotation: RotationDecision; issuedAt: string; schedule: ScheduledRotation | undefined } {
    const owned = secret.state === 'owned' && secret.trusted ? secret : undefined;
    const recorded = this.previous.rotation;
    const issuedAt = owned?.issuedAt ?? recorded?.tokenIssuedTime ?? recorded?.lastRotationTime ?? this.ug.metadata.creationTimestamp;
    const maxAge = this.maxTokenAge(spec);
    const schedule = owned && maxAge !== undefined ? scheduledRotation(issuedAt, maxAge, this.ug.metadata.uid) : undefined;
    const rotation = decideRotation(
      this.ug.metadata.annotations[ROTATE_ANNOTATION],
      secret,
      recorded?.lastHandledRequest,
      schedule && { value: schedule.value, due: now >= schedule.dueAt },
    );
    return { rotation, issuedAt, schedule };
  }

  /** PUT when the plan says so (or a rotation may have happened before a crash), and adopt what was there. */
  private async syncAtService(plan: Plan, progress: Progress): Promise<Step> {
    const { spec, connection, sync, rotation } = plan;
    if (sync.kind !== 'upsert' && rotation.kind !== 'recover' && rotation.kind !== 'settle') return { ok: true, progress };
    const result = await this.upsert(connection, plan.request);
    if (isDeferral(result)) return end(await this.deferred(result, 'sync', connection));
    if (!result.ok) return end(await this.serviceFailed('sync', result.failure, connection));
    const group = result.group;
    let next: Progress = { ...progress, group, token: group.token };
    this.log.info({ why: sync.kind === 'upsert' ? sync.why : 'rotation-recovery', created: group.created }, 'user group synced');

    // The group was there before this UserGroup ever synced it on this account: adoption, as the rules say.
    // (No created indicator counts as "was there": the safe reading.)
    if (group.created === true || (await this.syncedBefore(spec, connection, plan.hash, plan.owned?.trusted === true))) return { ok: true, progress: next };
    if (connection.adoption === 'Refuse') return end(await this.adoptionRefused(spec, connection, plan.claim));
    if (connection.adoption === 'Rotate') {
      // Before anything is stored: a crash before the next store repeats the adoption, never skips the rotation.
      const rotated = await this.rotate(connection, group.token);
      if (isDeferral(rotated)) return end(await this.deferred(rotated, 'rotate', connection));
      if (!rotated.ok) return end(await this.rotationFailed('adoption', rotated.failure, connection));
      next = { ...next, token: rotated.group.token, rotatedAt: iso(this.ports.now()) };
      this.ports.tokenRotated('adoption');
    }
    const adopted = { adoptedAt: iso(plan.now), tokenRotated: connection.adoption === 'Rotate' };
    this.event(
      'Normal',
      'Adopted',
      'Sync',
      `user group "${spec.userGroupId}" already existed at the service (${connection.description}): adopted${
        adopted.tokenRotated ? ', and its token rotated so that earlier holders lose access' : '; its token was kept (adoption: Keep)'
      }`,
    );
    this.log.info({ tokenRotated: adopted.tokenRotated }, 'adopted an existing user group');
    return { ok: true, progress: { ...next, adopted } };
  }

  /**
   * The exactly-once rotation protocol. The request is recorded as pending on the Secret before the POST, so a
   * run that dies after the service rotated finds it pending and checks with a PUT (the syncAtService step)
   * instead of rotating a second time; a value recorded as handled is never rotated again.
   */
  private async rotateIfAsked(plan: Plan, progress: Progress): Promise<Step> {
    const { rotation, connection } = plan;
    const held = plan.owned?.token;
    switch (rotation.kind) {
      case 'none':
        return { ok: true, progress };
      case 'record':
        return { ok: true, progress: { ...progress, handled: rotation.value } };
      case 'settle': {
        // The PUT (syncAtService) returned the current token: a different one means the rotation had happened.
        const happened = held !== undefined && progress.token !== undefined && !progress.token.equals(held);
        if (happened) {
          this.ports.tokenRotated(triggerOf(rotation));
          this.event('Normal', 'TokenRotated', 'Rotate', `token rotated for ${describeRotation(rotation)} (completed after a restart; no longer asked for)`);
        }
        this.log.info({ request: rotation.value, happened }, 'settled a rotation begun before a restart and no longer asked for');
        return {
          ok: true,
          progress: {
            ...progress,
            handled: happened ? handledAfter(rotation, progress) : progress.handled,
            pending: undefined,
            ...(happened ? { rotatedAt: iso(plan.now) } : {}),
          },
        };
      }
      case 'recover':
        if (held && progress.token && !progress.token.equals(held)) {
          // The rotation reached the service before we could store its result: the PUT returned the new token.
          this.ports.tokenRotated(triggerOf(rotation));
          this.event('Normal', 'TokenRotated', 'Rotate', `token rotated for ${describeRotation(rotation)} (completed after a restart)`);
          return { ok: true, progress: { ...progress, handled: handledAfter(rotation, progress), pending: undefined, rotatedAt: iso(plan.now) } };
        }
        break;
      case 'rotate':
        // An adoption rotation made the token newer than any rotation request: that request is satisfied.
        if (progress.adopted?.tokenRotated) return { ok: true, progress: { ...progress, handled: handledAfter(rotation, progress) } };
        if (rotation.scheduled) {
          // The global cap spreads scheduled rotations out; work already begun (recover) is never held back.
          const waitMs = this.ports.scheduledRotationSlot(this.key);
          if (waitMs > 0) return { ok: true, progress: { ...progress, rotationCappedForMs: waitMs } };
        }
        break;
    }
    const value = rotation.value;
    const token = progress.token;
    if (!token) throw new Error('no trusted token to rotate');
    // A schedule counted from a fallback (no issue time on the Secret yet) records it with the intent: after a
    // crash the same value is found pending.
    const issuedAt = rotation.scheduled ? plan.issuedAt : plan.owned?.issuedAt;
    const intent = await this.storeSecret(plan.spec, connection, { token, handled: progress.handled, pending: value, issuedAt }, progress.secret);
    if (!intent.ok) return end(intent.conflict === 'exists' ? SECRET_APPEARED : failed('lost-race'));
    this.intentStored = true;
    let next: Progress = { ...progress, secret: intent.secret };

    const rotated = await this.rotate(connection, token);
    if (isDeferral(rotated)) return end(await this.deferred(rotated, 'rotate', connection));
    if (rotated.ok) {
      this.ports.tokenRotated(triggerOf(rotation));
      next = { ...next, token: rotated.group.token, rotatedAt: iso(this.ports.now()) };
      this.event('Normal', 'TokenRotated', 'Rotate', `token rotated for ${describeRotation(rotation)}`);
      this.log.info({ request: value, scheduled: rotation.scheduled }, 'token rotated');
    } else if (rotated.failure.kind === 'rejected') {
      // The held token is not current (rotated elsewhere, or by us just before a crash). A PUT returns
      // the current one; store it and call the request handled, so it is never rotated twice.
      const current = await this.upsert(connection, plan.request);
      if (isDeferral(current)) return end(await this.deferred(current, 'sync', connection));
      if (!current.ok) return end(await this.serviceFailed('sync', current.failure, connection));
      // Still the same token: the service refused the rotation itself. Not handled; retry it.
      if (current.group.token.equals(token)) return end(await this.rotationFailed(triggerOf(rotation), rotated.failure, connection));
      next = { ...next, group: current.group, token: current.group.token };
      this.event(
        'Warning',
        'RotationRecovered',
        'Rotate',
        `the service refused to rotate the held token (${rotated.failure.message}); stored the current token instead and marked ${describeRotation(rotation)} handled`,
      );
      this.log.warn({ request: value }, 'rotation refused; recovered the current token');
    } else {
      return end(await this.rotationFailed(triggerOf(rotation), rotated.failure, connection));
    }
    return { ok: true, progress: { ...next, handled: handledAfter(rotation, progress), pending: undefined } };
  }

  /** Writes the token Secret as it should be now, and removes token Secrets of an earlier spec.tokenSecret.name. */
  private async storeToken(plan: Plan, progress: Progress): Promise<Step> {
    const { spec, connection, sync } = plan;
    // No call was made and the Secret holds the sealed token: its digest is enough to tell whether only
    // metadata (bookkeeping, the user's labels) must change, and then the token is read to write it.
    const sealedDigest = plan.owned?.trusted ? plan.owned.tokenSha256 : undefined;
    const content = progress.token ?? (sealedDigest !== undefined ? { sha256: sealedDigest } : undefined);
    if (!content) throw new Error('no token to store');
    // A token's age counts from when the operator obtained it; a Secret written before that was recorded keeps
    // going without it until its token changes (no write for every Secret on upgrade).
    const changed = progress.token !== undefined && sha256Hex(progress.token.reveal()) !== plan.owned?.tokenSha256;
    // To the millisecond: the issue time names the token (restart targets), and two rotations may share a second.
    const issuedAt = changed ? new Date(this.ports.now()).toISOString() : plan.owned?.issuedAt;
    const stored = await this.storeSecret(
      spec,
      connection,
      { token: content, handled: progress.handled, pending: progress.pending, issuedAt },
      progress.secret,
    );
    if (!stored.ok) return end(stored.conflict === 'exists' ? SECRET_APPEARED : failed('lost-race'));
    // A renamed tokenSecret leaves a copy of a live token behind: remove the old Secrets we own.
    for (const stale of this.ports.ownedSecrets(this.ug).filter((s) => s.metadata.name !== spec.tokenSecret.name)) {
      await this.ports.deleteSecret(stale);
      this.log.info({ secret: stale.metadata.name }, 'deleted the token Secret of an earlier spec.tokenSecret.name');
    }
    const { group } = progress;
    if (group) {
      const restored = sync.kind === 'upsert' && (sync.why === 'secret-missing' || sync.why === 'secret-unreadable');
      this.event(
        'Normal',
        'Synced',
        'Sync',
        restored
          ? `user group synced; token Secret ${spec.tokenSecret.name} restored`
          : `user group ${group.created ? 'created' : 'updated'} at the service (${connection.description}); token in Secret ${spec.tokenSecret.name}`,
      );
    }
    return { ok: true, progress: { ...progress, secret: stored.secret, issuedAt: issuedAt ?? plan.issuedAt, tokenChanged: changed } };
  }

  /**
   * After the new token is stored (pods restarted before would start with the old one): restart the workloads
   * listed in spec.rolloutRestartTargets whose owners allow it, once per token (restart-decision.ts).
   */
  private async restartConsumers(plan: Plan, progress: Progress): Promise<Step> {
    const { spec } = plan;
    const issuedAt = progress.issuedAt ?? plan.issuedAt;
    const decision = decideRestarts({
      targets: spec.rolloutRestartTargets,
      restartedFor: this.previous.rolloutRestarts?.tokenIssuedTime,
      foundIssuedAt: plan.owned ? plan.issuedAt : undefined,
      issuedAt,
    });
    const recorded = { ...this.previous.rolloutRestarts, tokenIssuedTime: issuedAt };
    if (decision.kind === 'none')
      return { ok: true, progress: spec.rolloutRestartTargets.length === 0 ? progress : { ...progress, restarts: this.previous.rolloutRestarts } };
    if (decision.kind === 'record') return { ok: true, progress: { ...progress, restarts: recorded } };
    const names = spec.rolloutRestartTargets.map(describeTarget).join(', ');
    if (!this.options.workloadRestarts) {
      this.event(
        'Warning',
        'RolloutRestartDisabled',
        'Restart',
        `the token changed but ${names} were not restarted: this operator does not restart workloads (the chart's rolloutRestart.enabled is off)`,
      );
      return { ok: true, progress: { ...progress, restarts: recorded } };
    }
    const { namespace, name } = this.ug.metadata;
    let restartedAny = false;
    for (const target of spec.rolloutRestartTargets) {
      this.signal?.throwIfAborted();
      const what = describeTarget(target);
      try {
        const workload = await this.ports.readWorkload(namespace, target);
        const action = workloadAction(workload, name, issuedAt);
        if (action === 'current') continue;
        if (action === 'missing' || action === 'not-allowed') {
          this.ports.workloadRestarted(target.kind, action);
          this.event(
            'Warning',
            action === 'missing' ? 'RestartTargetNotFound' : 'RestartTargetNotAllowed',
            'Restart',
            action === 'missing'
              ? `${what} does not exist in namespace ${namespace}; not restarted for the new token`
              : `${what} was not restarted for the new token: its owner has not named this UserGroup in its ${RESTART_CONSENT_ANNOTATION} annotation`,
          );
          continue;
        }
        const waitMs = this.ports.workloadRestartSlot(this.key);
        if (waitMs > 0) return { ok: true, progress: { ...progress, restartsCappedForMs: waitMs, restarts: this.previous.rolloutRestarts } };
        if (!workload) continue;
        const restarted = await this.ports.restartWorkload(namespace, target, workload.resourceVersion, name, issuedAt);
        if (!restarted.ok) {
          // Changed since it was read (its consent too, perhaps), or deleted: decide again on what is there now.
          return { ok: true, progress: { ...progress, restartFailure: 'lost-race', restarts: this.previous.rolloutRestarts } };
        }
        restartedAny = true;
        this.ports.workloadRestarted(target.kind, 'restarted');
        this.event('Normal', 'RolloutRestarted', 'Restart', `restarted ${what} for the new token (issued ${issuedAt})`);
        this.log.info({ target: what }, 'restarted a workload for the new token');
      } catch (err) {
        if (this.signal?.aborted) throw err;
        this.ports.workloadRestarted(target.kind, 'failed');
        const message = `could not restart ${what} for the new token: ${errorText(err)}`;
        this.event('Warning', 'RestartFailed', 'Restart', message);
        this.log.warn({ target: what, err: errorText(err) }, 'workload restart failed');
        return { ok: true, progress: { ...progress, restartFailure: 'restart-refused', restarts: this.previous.rolloutRestarts } };
      }
    }
    return { ok: true, progress: { ...progress, restarts: restartedAny ? { tokenIssuedTime: issuedAt, lastRestartTime: iso(this.ports.now()) } : recorded } };
  }

  /** Ready=True Synced with what the service said, and when to come back for the periodic resync. */
  private async reportSynced(plan: Plan, progress: Progress): Promise<ReconcileResult> {
    const { group } = progress;
    const lastSyncTime = group ? iso(plan.now) : this.previous.lastSyncTime;
    const issuedAt = progress.issuedAt ?? plan.issuedAt;
    const maxAge = this.maxTokenAge(plan.spec);
    const schedule = maxAge === undefined ? undefined : scheduledRotation(issuedAt, maxAge, this.ug.metadata.uid);
    const rotationStatus = dropUndefined({
      lastHandledRequest: progress.handled,
      lastRotationTime: progress.rotatedAt ?? this.previous.rotation?.lastRotationTime,
      // Known precisely once the token changes; a fallback is shown only where a schedule counts from it (no
      // status write for every UserGroup on upgrade).
      tokenIssuedTime: progress.tokenChanged === true || schedule || this.previous.rotation?.tokenIssuedTime ? issuedAt : undefined,
      nextRotationTime: schedule && iso(schedule.dueAt),
    });
    await this.writeStatus('True', Reason.Synced, `user group synced; token in Secret ${plan.spec.tokenSecret.name}`, {
      teamId: group ? group.teamId : this.previous.teamId,
      providedId: group ? group.providedId : this.previous.providedId,
      environmentTag: group ? group.environmentTag : this.previous.environmentTag,
      tokenSecretName: plan.spec.tokenSecret.name,
      lastSyncTime,
      syncedHash: group ? plan.hash : this.previous.syncedHash,
      ...(Object.keys(rotationStatus).length > 0 ? { rotation: rotationStatus } : {}),
      ...(progress.adopted ? { adoption: progress.adopted } : {}),
      // Dropped with the last target: listing targets again later starts from the token of that day.
      rolloutRestarts: progress.restarts,
    });
    if (progress.restartFailure) return failed(progress.restartFailure);
    // Back for whichever comes first: the periodic resync, the scheduled rotation (not sooner than a second:
    // clocks differ), or the slot the cap keeps for this key (at that very time: it is ours only then).
    const now = this.ports.now();
    const nextResync = nextResyncAt(lastSyncTime, this.ug.metadata.uid, this.options.resyncPeriodMs);
    const timers = [
      nextResync === undefined ? undefined : nextResync - now,
      schedule === undefined || progress.rotationCappedForMs !== undefined ? undefined : schedule.dueAt - now,
    ].filter((ms): ms is number => ms !== undefined);
    const waits = [timers.length === 0 ? undefined : Math.max(1_000, Math.min(...timers)), progress.rotationCappedForMs, progress.restartsCappedForMs].filter(
      (ms): ms is number => ms !== undefined,
    );
    return waits.length === 0 ? { kind: 'done' } : { kind: 'done', resyncAfterMs: Math.min(...waits) };
  }

  private maxTokenAge(spec: UserGroupSpec): number | undefined {
    return effectiveMaxTokenAge(spec, this.options.minTokenAgeMs);
  }

  /**
   * Whether this UserGroup has synced on this account before: its status says it synced this very request on
   * this connection, or a Secret it owns carries a record sealed under this account's key. Tenants write
   * neither (status needs usergroups/status; a seal needs the API key).
   */
  private async syncedBefore(spec: UserGroupSpec, connection: Connection, hash: string, trustedRecord: boolean): Promise<boolean> {
    if (trustedRecord || this.previous.syncedHash === hash) return true;
    // Rare (an adoption check): the cache has no data, and a record is proof only with the token it seals.
    for (const cached of this.ports.ownedSecrets(this.ug)) {
      const live = await this.ports.readSecret(cached.metadata.namespace, cached.metadata.name);
      if (live && holdsRecord(live, this.ug.metadata, spec.userGroupId, connection.seal)) return true;
    }
    return false;
  }

  /** The rules refuse to adopt an existing group: nothing stored, the claim given back for whoever may adopt it. */
  private async adoptionRefused(spec: UserGroupSpec, connection: Connection, claim: UserGroupClaim): Promise<ReconcileResult> {
    await this.ports.releaseClaim(claim);
    return this.refused(
      Reason.AdoptionRefused,
      `user group "${spec.userGroupId}" already existed at the service (${connection.description}) before this UserGroup synced it, and the tenant rule ` +
        'that admits it says adoption: Refuse; its token was not stored. (The service has no read operation: the PUT that found it has set its name and properties.) ' +
        'A cluster admin can allow adoption (adoption: Rotate or Keep), or use another userGroupId',
      spec,
    );
  }

  /**
   * The rules or a claim say this namespace may not hold this group: report it, and delete any token Secret
   * this UserGroup holds from before (a rule or a claim changed), so no token stays where it no longer belongs.
   */
  private async refused(reason: Reason, message: string, spec: UserGroupSpec): Promise<ReconcileResult> {
    const revoked = await this.revokeTokenSecrets(spec);
    return this.blocked(reason, revoked.length > 0 ? `${message}; deleted token Secret ${revoked.join(', ')}` : message);
  }

  private async revokeTokenSecrets(spec: UserGroupSpec): Promise<string[]> {
    const { metadata } = this.ug;
    const owned = new Map(this.ports.ownedSecrets(this.ug).map((s) => [s.metadata.name, s]));
    // The owned-Secret cache selects by a label its tenant can remove: look at the named Secret itself too.
    const key = objectKey({ namespace: metadata.namespace, name: spec.tokenSecret.name });
    if (!owned.has(spec.tokenSecret.name) && (this.ports.cachedSecret(key) || this.ports.otherSecretExists(key))) {
      const named = await this.ports.readSecret(metadata.namespace, spec.tokenSecret.name);
      if (named?.metadata.ownerReferences.some((o) => o.controller && o.uid === metadata.uid)) owned.set(named.metadata.name, named);
    }
    for (const secret of owned.values()) {
      this.signal?.throwIfAborted();
      await this.ports.deleteSecret(secret);
      this.log.info({ secret: secret.metadata.name }, 'deleted a token Secret the namespace may no longer hold');
    }
    return [...owned.keys()];
  }

  /** Reads the token Secret live, data included. */
  private readSecret(spec: UserGroupSpec): Promise<ObservedSecret | undefined> {
    return this.ports.readSecret(this.ug.metadata.namespace, spec.tokenSecret.name);
  }

  /** Writes the token Secret unless `current` (what is stored now, as far as we know) already matches. */
  private async storeSecret(
    spec: UserGroupSpec,
    connection: Connection,
    content: SecretContent,
    current: ObservedSecret | undefined,
  ): Promise<SecretWriteResult> {
    const resourceVersion = current?.metadata.resourceVersion;
    let desired = desiredSecret(this.ug.metadata, spec, content, connection.seal);
    if (current && secretMatches(current, desired)) return { ok: true, secret: current };
    if (!(content.token instanceof SecretValue)) {
      // Metadata must change and only the digest is at hand: read the token it stands for.
      const live = await this.readSecret(spec);
      const inspection = inspectSecret(live, this.ug.metadata, spec, connection.seal);
      if (inspection.state !== 'owned' || !inspection.token || inspection.resourceVersion !== resourceVersion) {
        return { ok: false, conflict: 'changed', message: `Secret ${spec.tokenSecret.name} changed while we worked` };
      }
      desired = desiredSecret(this.ug.metadata, spec, { ...content, token: inspection.token }, connection.seal);
    }
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
    else this.ports.markSecretVerified(objectKey(written.secret.metadata), written.secret.metadata.resourceVersion, tokenOf(desired, spec.tokenSecret.key));
    return written;
  }

  /**
   * A call was not made now (rate limit, a failing connection): the key comes back when woken or after the
   * connection's delay. Only a paused connection is news for the user; waiting one's turn is not.
   */
  private async deferred(deferral: Deferral, operation: 'sync' | 'rotate', connection: Connection): Promise<ReconcileResult> {
    if (deferral.why === 'paused') {
      // Reported as the failure that paused the connection: that is what the user can act on.
      const last = deferral.lastFailure;
      const reason = last ? reasonFor(last) : Reason.ServiceUnavailable;
      const cause = last ? ` (last failure: ${connection.shared ? last.message : coarseFailure(last)})` : '';
      const message = `${operation === 'sync' ? 'PUT /api/user' : 'POST /api/user (rotate)'} via ${connection.description} ${deferral.message}${cause}`;
      await this.writeStatus('False', reason, message, {});
      this.event('Warning', operation === 'sync' ? 'SyncFailed' : 'RotationFailed', operation === 'sync' ? 'Sync' : 'Rotate', `${reason}: ${message}`);
    }
    return { kind: 'wait', afterMs: deferral.afterMs };
  }

  private async rotationFailed(trigger: RotationTrigger, failure: ServiceFailure, connection: Connection): Promise<ReconcileResult> {
    this.ports.rotationFailed(trigger);
    return this.serviceFailed('rotate', failure, connection);
  }

  private async serviceFailed(operation: 'sync' | 'rotate', failure: ServiceFailure, connection: Connection): Promise<ReconcileResult> {
    const reason = reasonFor(failure);
    // A tenant's own connection may point anywhere its egress rule allows: what comes back (remote text,
    // which network error) would make the operator its port scanner. It gets the kind and HTTP status only.
    const detail = connection.shared ? failure.message : coarseFailure(failure);
    const message = `${operation === 'sync' ? 'PUT /api/user' : 'POST /api/user (rotate)'} via ${connection.description} failed: ${detail}`;
    this.log.warn({ reason, status: failure.status, operation, detail: failure.message }, 'service call failed');
    if (failure.kind === 'unauthorized') this.ports.invalidateConnection(connection);
    await this.writeStatus('False', reason, message, {});
    this.event('Warning', operation === 'sync' ? 'SyncFailed' : 'RotationFailed', operation === 'sync' ? 'Sync' : 'Rotate', `${reason}: ${message}`);
    // The pause is the account's (connections.ts): the keys it turned away come back at its end plus up to 1 s
    // of jitter, and so does this one, or the key that met the 429 would take every next slot before them.
    if (failure.kind === 'rate-limited' && failure.retryAfterMs !== undefined) return { kind: 'wait', afterMs: failure.retryAfterMs + Math.random() * 1_000 };
    return failed(failure.kind === 'unauthorized' ? 'key-refused' : failure.kind === 'rejected' ? 'request-refused' : 'call-failed');
  }

  /** A condition the user must fix: status + Event, and a retry (`poll`) only where nothing else will wake us. */
  private async blocked(reason: Reason, message: string, poll?: FailureCause): Promise<ReconcileResult> {
    this.log.info({ reason }, message);
    await this.writeStatus('False', reason, message, {});
    this.event('Warning', reason, 'Sync', message);
    return poll ? failed(poll) : { kind: 'done' };
  }

  /** Writes status unless it already says exactly this (no write, no watch event, no loop). */
  private async writeStatus(status: ConditionStatus, reason: Reason, message: string, fields: UserGroupStatus): Promise<void> {
    const now = iso(this.ports.now());
    const generation = this.ug.metadata.generation;
    const ready = nextReadyCondition(findReadyCondition(this.previous), status, reason, message, generation, now);
    const clear = (Object.keys(fields) as (keyof UserGroupStatus)[]).filter((k) => fields[k] === undefined);
    const next = dropUndefined<UserGroupStatus>({
      ...this.previous,
      ...fields,
      observedGeneration: generation,
      conditions: [...(this.previous.conditions ?? []).filter((c) => c.type !== 'Ready'), ready],
    });
    if (canonicalJson(next) === canonicalJson(this.previous)) return;
    this.signal?.throwIfAborted();
    await this.ports.patchStatus(this.ug, next, clear);
  }

  private event(type: EventType, reason: string, action: string, note: string): void {
    this.ports.event(this.ug, type, reason, action, note);
  }
}

const failed = (cause: FailureCause): ReconcileResult => ({ kind: 'failed', cause });

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

/** The token a desired Secret carries (what was just written). */
function tokenOf(desired: ReturnType<typeof desiredSecret>, key: string): SecretValue | undefined {
  const encoded = desired.data?.[key];
  return encoded === undefined ? undefined : new SecretValue(Buffer.from(encoded, 'base64').toString('utf8'));
}

function isDeferral(result: ServiceResult | Deferral): result is Deferral {
  return 'why' in result;
}

/** What a tenant may learn of a failed call to its own connection: the kind of failure and the HTTP status. */
function coarseFailure(failure: ServiceFailure): string {
  const status = failure.status === undefined ? '' : ` (HTTP ${failure.status})`;
  switch (failure.kind) {
    case 'unavailable':
      return failure.status === undefined ? 'no answer from the service (connection failed or timed out)' : `service unavailable${status}`;
    case 'unauthorized':
      return `service refused the API key${status}`;
    case 'rate-limited':
      return `service rate limit reached${status}`;
    case 'rejected':
      return `service rejected the request${status}`;
    case 'invalid-response':
      return `service answered with an invalid response${status}`;
  }
}

function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export const regardingUserGroup = (ug: UserGroup): { apiVersion: string; kind: string; namespace: string; name: string; uid: string } => ({
  apiVersion: API_VERSION,
  kind: USERGROUP_KIND,
  namespace: ug.metadata.namespace,
  name: ug.metadata.name,
  uid: ug.metadata.uid,
});
