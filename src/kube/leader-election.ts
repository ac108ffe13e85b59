// Leader election over a coordination.k8s.io Lease, like client-go's leaderelection.
import type { Logger } from 'pino';
import { isRecord, stringValues } from '../platform/json-value.js';
import { microTime } from './event-recorder.js';
import { isAlreadyExists, isConflict, isNotFound } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';
import { Pause } from '../platform/sleep.js';

export interface LeaderElectionOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly log: Logger;
  /**
   * Called the moment this candidate leads, with the annotations of the Lease it took over (as the last holder left
   * them; none when it created the Lease): what the last leader recorded for the next one.
   */
  readonly onStartedLeading: (taken: Readonly<Record<string, string>>) => void;
  /** Called the moment leadership is lost or given up; the caller must stop acting at once. */
  readonly onStoppedLeading: () => void;
  readonly now?: () => number;
  /**
   * Annotations the leader writes on the Lease with every renewal and when it gives the Lease up (state the next
   * leader takes over; the Lease lives where tenants cannot write). Renewals replace the Lease, so only these stay.
   */
  readonly annotations?: () => Readonly<Record<string, string>>;
  /**
   * Annotations that describe this process itself (whether it may leave finalizers an older release cannot remove):
   * written with every write of the Lease, over what the last holder wrote when taking it over too, so that nobody
   * reads the last holder's state as the new one's.
   */
  readonly state?: () => Readonly<Record<string, string>>;
}

interface LeaseRecord {
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number;
  readonly acquireTime: string | undefined;
  readonly renewTime: string | undefined;
  readonly leaseTransitions: number;
}

interface ObservedLease {
  readonly resourceVersion: string;
  readonly record: LeaseRecord;
  readonly annotations: Readonly<Record<string, string>>;
}

/**
 * Leader election on a coordination.k8s.io Lease, with client-go's semantics:
 * a candidate takes the Lease only when its holder has not renewed it for
 * leaseDuration — measured on our own clock from when we last saw the record
 * change, so clock skew between nodes does not matter; a leader renews every
 * retryPeriod and, if it cannot renew within renewDeadline, stops leading at
 * once; concurrent writers are serialised by resourceVersion (409 = lost race).
 */
export class LeaderElector {
  private leading = false;
  private observed: { key: string; at: number } | undefined;
  private lastRenew = 0;
  /** Fires renewDeadline after the last successful renew, even while a renew request hangs. */
  private deadline: NodeJS.Timeout | undefined;
  private current: ObservedLease | undefined;
  private readonly now: () => number;
  private stopped = false;
  private readonly pause = new Pause();
  private loop: Promise<void> | undefined;
  /** The annotations of the Lease as this candidate last found it before writing it (before taking it over). */
  private taken: Readonly<Record<string, string>> = {};

  constructor(private readonly options: LeaderElectionOptions) {
    this.now = options.now ?? Date.now;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; a leader gives the Lease up so a standby can take over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pause.cut();
    await this.loop;
    if (this.leading) {
      this.setLeading(false);
    }
    await this.release();
  }

  private async run(): Promise<void> {
    const { log, retryPeriodMs, renewDeadlineMs } = this.options;
    while (!this.stopped) {
      let ok = false;
      try {
        ok = await this.tryAcquireOrRenew();
      } catch (err) {
        log.warn({ lease: this.options.name, err: String(err) }, 'leader election: lease request failed');
      }
      const now = this.now();
      if (ok) {
        this.lastRenew = now;
        this.armDeadline();
        if (!this.leading) {
          log.info({ lease: this.options.name, identity: this.options.identity }, 'became leader');
          this.setLeading(true);
        }
      } else if (this.leading && now - this.lastRenew >= renewDeadlineMs) {
        log.error({ lease: this.options.name, sinceRenewMs: now - this.lastRenew }, 'could not renew the lease within the renew deadline; stopping work');
        this.setLeading(false);
      }
      await this.pause.for(this.leading ? retryPeriodMs : retryPeriodMs * (1 + Math.random() * 0.2));
    }
  }

  /**
   * Whether this process may still act as the leader, judged by its own clock now. A process frozen past its
   * renew deadline (SIGSTOP, a long pause) resumes in the event loop's poll phase: I/O callbacks of work begun
   * before the freeze run before the deadline timer can. Checked before every effect, this steps down at once.
   */
  holdsLease(): boolean {
    if (this.leading && this.now() - this.lastRenew >= this.options.renewDeadlineMs) this.renewDeadlinePassed();
    return this.leading;
  }

  private armDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = setTimeout(() => {
      if (this.leading) this.renewDeadlinePassed();
    }, this.options.renewDeadlineMs);
    this.deadline.unref();
  }

  private renewDeadlinePassed(): void {
    this.options.log.error({ lease: this.options.name }, 'lease not renewed within the renew deadline; stopping work');
    this.setLeading(false);
  }

  private setLeading(leading: boolean): void {
    if (!leading && this.deadline) clearTimeout(this.deadline);
    if (this.leading === leading) return;
    this.leading = leading;
    if (leading) {
      this.options.onStartedLeading(this.taken);
    } else {
      this.options.onStoppedLeading();
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { client, namespace, name, identity, leaseDurationMs } = this.options;
    const now = this.now();
    if (await this.renewOptimistically(now)) return true;
    const res = await call(client, 'GET', paths.lease(namespace, name), { timeoutMs: this.options.renewDeadlineMs });
    if (!res.ok) {
      if (!isNotFound(res.error)) throw res.error;
      const created = await call(client, 'POST', paths.leases(namespace), {
        body: this.leaseBody(undefined, this.ownAnnotations(), {
          holderIdentity: identity,
          leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
          acquireTime: microTime(now),
          renewTime: microTime(now),
          leaseTransitions: 0,
        }),
        timeoutMs: this.options.renewDeadlineMs,
      });
      if (created.ok) {
        this.taken = {};
        this.remember(parseLease(created.body), now);
        return true;
      }
      // Another candidate created it first and leads; any other refusal is worth a log line (run() writes it).
      if (isAlreadyExists(created.error)) return false;
      throw created.error;
    }
    const lease = parseLease(res.body);
    if (!lease) throw new Error(`lease ${namespace}/${name} cannot be parsed`);
    const key = JSON.stringify(lease.record);
    if (this.observed?.key !== key) this.observed = { key, at: now };
    this.current = lease;

    const held = lease.record.holderIdentity !== '' && lease.record.holderIdentity !== identity;
    const expired = this.observed.at + lease.record.leaseDurationSeconds * 1000 <= now;
    if (held && !expired) return false;

    const takingOver = lease.record.holderIdentity !== identity;
    const record: LeaseRecord = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: takingOver ? microTime(now) : (lease.record.acquireTime ?? microTime(now)),
      renewTime: microTime(now),
      leaseTransitions: takingOver && lease.record.holderIdentity !== '' ? lease.record.leaseTransitions + 1 : lease.record.leaseTransitions,
    };
    // Taking over, the last holder's annotations are written back as they are: should this process die before its
    // first renewal, the next leader still finds them.
    const updated = await call(client, 'PUT', paths.lease(namespace, name), {
      body: this.leaseBody(lease.resourceVersion, takingOver ? { ...lease.annotations, ...this.options.state?.() } : this.ownAnnotations(), record),
      timeoutMs: this.options.renewDeadlineMs,
    });
    if (!updated.ok) {
      // Another candidate wrote the Lease since we read it: it won this round.
      if (isConflict(updated.error)) return false;
      throw updated.error;
    }
    this.taken = lease.annotations;
    this.remember(parseLease(updated.body), now);
    return true;
  }

  /**
   * client-go's fast path: a leader whose lease is still valid writes its renewal on the version it last wrote, without
   * reading the Lease first. One request per renewal instead of two, so an apiserver slowed by load has twice the time
   * to answer within the renew deadline. The resourceVersion still fences it: if anyone wrote the Lease since (another
   * candidate took it, an admin edited it), the apiserver refuses (409) and the read-then-write path below decides.
   */
  private async renewOptimistically(now: number): Promise<boolean> {
    const { client, namespace, name, identity, leaseDurationMs, renewDeadlineMs } = this.options;
    const lease = this.current;
    const valid = this.observed !== undefined && now - this.observed.at < leaseDurationMs;
    if (!this.leading || !valid || lease?.record.holderIdentity !== identity) return false;
    const record: LeaseRecord = { ...lease.record, leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000), renewTime: microTime(now) };
    const updated = await call(client, 'PUT', paths.lease(namespace, name), {
      body: this.leaseBody(lease.resourceVersion, this.ownAnnotations(), record),
      timeoutMs: renewDeadlineMs,
    }).catch(() => undefined);
    if (!updated?.ok) return false;
    this.remember(parseLease(updated.body), now);
    return true;
  }

  /** client-go's ReleaseOnCancel: clear the holder so a standby need not wait out the lease. */
  private async release(): Promise<void> {
    const lease = this.current;
    if (lease?.record.holderIdentity !== this.options.identity) return;
    const now = this.now();
    try {
      const res = await call(this.options.client, 'PUT', paths.lease(this.options.namespace, this.options.name), {
        body: this.leaseBody(lease.resourceVersion, this.ownAnnotations(), {
          ...lease.record,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          renewTime: microTime(now),
        }),
        timeoutMs: 5_000,
      });
      if (res.ok) this.options.log.info({ lease: this.options.name }, 'released the lease');
      else this.options.log.warn({ err: res.error.message }, 'could not release the lease');
    } catch (err) {
      this.options.log.warn({ err: String(err) }, 'could not release the lease');
    }
  }

  private remember(lease: ObservedLease | undefined, now: number): void {
    if (!lease) return;
    this.current = lease;
    this.observed = { key: JSON.stringify(lease.record), at: now };
  }

  private ownAnnotations(): Readonly<Record<string, string>> {
    return { ...this.options.annotations?.(), ...this.options.state?.() };
  }

  private leaseBody(resourceVersion: string | undefined, annotations: Readonly<Record<string, string>>, record: LeaseRecord): Record<string, unknown> {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.options.name,
        namespace: this.options.namespace,
        ...(resourceVersion ? { resourceVersion } : {}),
        ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      },
      spec: {
        holderIdentity: record.holderIdentity,
        leaseDurationSeconds: record.leaseDurationSeconds,
        ...(record.acquireTime ? { acquireTime: record.acquireTime } : {}),
        ...(record.renewTime ? { renewTime: record.renewTime } : {}),
        leaseTransitions: record.leaseTransitions,
      },
    };
  }
}

function parseLease(body: unknown): ObservedLease | undefined {
  if (!isRecord(body) || !isRecord(body['metadata'])) return undefined;
  const rv = body['metadata']['resourceVersion'];
  const spec = isRecord(body['spec']) ? body['spec'] : {};
  if (typeof rv !== 'string') return undefined;
  return {
    resourceVersion: rv,
    annotations: stringValues(body['metadata']['annotations']),
    record: {
      holderIdentity: typeof spec['holderIdentity'] === 'string' ? spec['holderIdentity'] : '',
      leaseDurationSeconds: typeof spec['leaseDurationSeconds'] === 'number' ? spec['leaseDurationSeconds'] : 15,
      acquireTime: typeof spec['acquireTime'] === 'string' ? spec['acquireTime'] : undefined,
      renewTime: typeof spec['renewTime'] === 'string' ? spec['renewTime'] : undefined,
      leaseTransitions: typeof spec['leaseTransitions'] === 'number' ? spec['leaseTransitions'] : 0,
    },
  };
}
