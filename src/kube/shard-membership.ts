// Shard membership: one Lease per replica, renewed, and the live members read back (for --shard-by-namespace).
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { isConflict, isNotFound } from './api-error.js';
import { microTime } from './event-recorder.js';
import { call, type KubeClient } from './http.js';
import { Informer } from './informer.js';
import { HeldLease, parseLease, type LeaseContent } from './lease.js';
import { paths } from './paths.js';

/** On a member's Lease: which shard group it belongs to (--leader-election-id), for the members' watch. */
export const SHARD_GROUP_LABEL = 'usergroup.dev/shard-group';
/** On a member's Lease: the view (shard-assignment viewId) it has stopped acting outside of. */
export const SHARD_VIEW_ANNOTATION = 'usergroup.dev/shard-view';

/** A live member as its Lease shows it: who, and which view it last acknowledged (its viewId). */
export interface Member {
  readonly identity: string;
  readonly acknowledged: string | undefined;
}

export interface ShardMembershipOptions {
  readonly client: KubeClient;
  /** Where the members' Leases live: the operator's own namespace, which tenants cannot write to. */
  readonly namespace: string;
  readonly group: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly log: Logger;
  /** The live members changed (identities or acknowledged views); this one is among them while its Lease holds. */
  readonly onChange: (live: readonly Member[]) => void;
  /** This member's Lease was not renewed within the renew deadline: stop acting at once. */
  readonly onLost: () => void;
  readonly now?: () => number;
  /** Annotations written on this member's Lease with every renewal (state a member taking its namespaces over reads). */
  readonly annotations?: () => Readonly<Record<string, string>>;
}

/** A member's Lease as the watch shows it. */
interface MemberLease {
  readonly metadata: { readonly namespace: string; readonly name: string; readonly resourceVersion: string };
  readonly identity: string;
  readonly acknowledged: string | undefined;
  readonly durationMs: number;
  /** Its annotations other than the view: what its member writes for the others (annotations option). */
  readonly carried: Readonly<Record<string, string>>;
}

/** Departed members whose last Lease is remembered for the members taking their namespaces over (a few: members are few). */
const DEPARTED_KEPT = 8;

/**
 * This replica's Lease among its shard group's (lease.ts holds it: the fast path, the renew deadline, the fence):
 * renewed every retryPeriod (carrying the view it acknowledges), the others' watched. A member is live while its
 * Lease changed within its leaseDuration, judged on our own clock from when we saw it change (client-go's rule, so
 * clock skew does not matter). Before a member is taken for gone, its Lease is read again: a watch that fell behind
 * must not hand a live member's namespaces to another. A member that cannot renew within renewDeadline (shorter than
 * leaseDuration) stops acting before anyone else takes its namespaces over.
 */
export class ShardMembership {
  private readonly leases: Informer<MemberLease>;
  private readonly leaseName: string;
  private readonly now: () => number;
  private readonly lease: HeldLease;
  /** Lease name → resourceVersion and when we saw it change. */
  private readonly seen = new Map<string, { rv: string; at: number }>();
  /** What our Lease says we acknowledge, and what it should say. */
  private published: string | undefined;
  private wanted: string | undefined;
  private lastEmitted = '';
  private stopped = false;
  private evaluating: Promise<void> | undefined;
  private evaluateAgain = false;
  /** What departed members' Leases last carried, by Lease name, oldest first. */
  private readonly departed = new Map<string, Readonly<Record<string, string>>>();

  constructor(private readonly options: ShardMembershipOptions) {
    this.now = options.now ?? Date.now;
    this.leaseName = `${options.group}-shard-${createHash('sha256').update(options.identity, 'utf8').digest('hex').slice(0, 12)}`;
    this.leases = new Informer<MemberLease>({
      name: 'shard-leases',
      client: options.client,
      path: paths.leases(options.namespace),
      labelSelector: `${SHARD_GROUP_LABEL}=${options.group}`,
      parse: parseMemberLease,
      log: options.log,
    });
    this.leases.on((type, lease) => {
      if (type === 'deleted' && lease.metadata.name !== this.leaseName) this.depart(lease);
      this.evaluate();
    });
    const content = (): LeaseContent => this.content();
    this.lease = new HeldLease({
      ...options,
      name: this.leaseName,
      // Our own Lease, whoever wrote it since (an admin's edit; another member's delete): ours to write again, but
      // not to bring back once we leave.
      content: { renewal: content, over: content, creation: () => (this.stopped ? undefined : this.content()) },
      onWritten: (write) => {
        this.published = write.lease.annotations[SHARD_VIEW_ANNOTATION];
      },
      onLost: () => {
        options.onLost();
        this.lastEmitted = '';
        this.evaluate();
      },
      afterAttempt: () => this.evaluate(),
      messages: { failed: 'shard Lease request failed', lost: 'shard Lease not renewed within the renew deadline; stopping work' },
    });
  }

  /**
   * What the other members' Leases carry (annotations option): the live ones', and the last of members that left
   * or were taken for gone, whose namespaces the live ones take over.
   */
  peerAnnotations(): Readonly<Record<string, string>>[] {
    const live = this.leases
      .list()
      .filter((lease) => lease.metadata.name !== this.leaseName)
      .map((lease) => lease.carried);
    return [...live, ...this.departed.values()];
  }

  /** This member's Lease is renewed within the renew deadline, by our clock now (lease.ts holds(): it fences). */
  holdsLease(): boolean {
    return this.lease.holds();
  }

  start(): void {
    this.leases.start();
    this.lease.start();
  }

  /** Publishes that this member acts within `viewId` now; renewed at once. */
  acknowledge(viewId: string): void {
    if (this.wanted === viewId) return;
    this.wanted = viewId;
    this.lease.renewSoon();
  }

  /**
   * Leaves the group: the Lease is deleted, so the others take our namespaces over without waiting it out. Renewed
   * once first: what it carries now (the request budgets spent since the last renewal) is what the others keep of it.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.lease.stop();
    await this.leases.stop();
    if (this.lease.current() === undefined) return;
    if (this.options.annotations) await this.lease.renewOnce().catch(() => undefined);
    // The version to delete: ours as last written or read; none once read gone.
    const version = this.lease.current()?.resourceVersion;
    if (version === undefined) return;
    const res = await call(this.options.client, 'DELETE', paths.lease(this.options.namespace, this.leaseName), {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { resourceVersion: version } },
      timeoutMs: 5_000,
    }).catch((err: unknown) => ({ ok: false as const, error: err }));
    if (res.ok) this.options.log.info({ lease: this.leaseName }, 'left the shard group');
    else this.options.log.warn({ lease: this.leaseName, err: String(res.error) }, 'could not delete the shard Lease; the others wait it out');
  }

  private depart(lease: MemberLease): void {
    this.departed.delete(lease.metadata.name);
    this.departed.set(lease.metadata.name, lease.carried);
    for (const name of this.departed.keys()) {
      if (this.departed.size <= DEPARTED_KEPT) break;
      this.departed.delete(name);
    }
  }

  /** Our Lease: the group's label, what the annotations option carries and the view we acknowledge. */
  private content(): LeaseContent {
    const acknowledged = this.wanted;
    return {
      labels: { [SHARD_GROUP_LABEL]: this.options.group },
      annotations: { ...this.options.annotations?.(), ...(acknowledged ? { [SHARD_VIEW_ANNOTATION]: acknowledged } : {}) },
      spec: { holderIdentity: this.options.identity, leaseDurationSeconds: Math.ceil(this.options.leaseDurationMs / 1000), renewTime: microTime(this.now()) },
    };
  }

  /** Works out the live members (one evaluation at a time: a confirmation read may be under way). */
  private evaluate(): void {
    // A member list read before the watch's first list is complete could leave members out: decide nothing on it.
    if (!this.leases.synced || this.stopped) return;
    if (this.evaluating) {
      this.evaluateAgain = true;
      return;
    }
    this.evaluating = this.liveMembers()
      .then((live) => {
        const key = JSON.stringify(live);
        if (key === this.lastEmitted || this.stopped) return;
        this.lastEmitted = key;
        this.options.onChange(live);
      })
      .catch((err: unknown) => this.options.log.warn({ err: String(err) }, 'shard membership: evaluation failed'))
      .finally(() => {
        this.evaluating = undefined;
        if (this.evaluateAgain) {
          this.evaluateAgain = false;
          this.evaluate();
        }
      });
  }

  private async liveMembers(): Promise<Member[]> {
    const now = this.now();
    const live: Member[] = [];
    if (this.holdsLease()) live.push({ identity: this.options.identity, acknowledged: this.published });
    for (const lease of this.leases.list()) {
      if (lease.metadata.name === this.leaseName) continue;
      if (await this.alive(lease, now)) live.push({ identity: lease.identity, acknowledged: lease.acknowledged });
    }
    for (const name of this.seen.keys()) if (!this.leases.get(`${this.options.namespace}/${name}`)) this.seen.delete(name);
    return live.sort((a, b) => a.identity.localeCompare(b.identity));
  }

  private async alive(lease: MemberLease, now: number): Promise<boolean> {
    const name = lease.metadata.name;
    const seen = this.seen.get(name);
    if (seen?.rv !== lease.metadata.resourceVersion) {
      this.seen.set(name, { rv: lease.metadata.resourceVersion, at: now });
      return true;
    }
    if (now - seen.at < lease.durationMs) return true;
    // Gone by the watch: read it again before believing it.
    const res = await call(this.options.client, 'GET', paths.lease(this.options.namespace, name), { timeoutMs: this.options.renewDeadlineMs });
    if (!res.ok) {
      if (isNotFound(res.error)) return false;
      throw res.error;
    }
    const fresh = parseMemberLease(res.body);
    if (fresh && fresh.metadata.resourceVersion !== seen.rv) {
      this.seen.set(name, { rv: fresh.metadata.resourceVersion, at: this.now() });
      return true;
    }
    // Gone for good (a crashed pod's Lease would stay forever): deleted, unless it was renewed just now.
    const deleted = await call(this.options.client, 'DELETE', paths.lease(this.options.namespace, name), {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { resourceVersion: seen.rv } },
      timeoutMs: this.options.renewDeadlineMs,
    });
    // Renewed between our read and the delete: alive after all (the watch brings the new version).
    if (!deleted.ok && isConflict(deleted.error)) return true;
    if (!deleted.ok && !isNotFound(deleted.error)) throw deleted.error;
    this.options.log.info({ lease: name, member: lease.identity }, 'a shard member stopped renewing its Lease; its namespaces move');
    return false;
  }
}

function parseMemberLease(raw: unknown): MemberLease | undefined {
  const lease = parseLease(raw);
  if (!lease || lease.spec.holderIdentity === '') return undefined;
  const seconds = lease.spec.leaseDurationSeconds;
  const { [SHARD_VIEW_ANNOTATION]: view, ...carried } = lease.annotations;
  return {
    metadata: { namespace: lease.namespace, name: lease.name, resourceVersion: lease.resourceVersion },
    identity: lease.spec.holderIdentity,
    acknowledged: view,
    durationMs: (seconds !== undefined && seconds > 0 ? seconds : 15) * 1000,
    carried,
  };
}
