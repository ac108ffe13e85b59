// Leader election over a coordination.k8s.io Lease, like client-go's leaderelection.
import type { Logger } from 'pino';
import { microTime } from './event-recorder.js';
import { call, type KubeClient } from './http.js';
import { HeldLease, leaseManifest, type LeaseContent, type LeaseObject, type LeaseSpec, type LeaseWrite } from './lease.js';
import { paths } from './paths.js';

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

/**
 * Leader election on a coordination.k8s.io Lease (lease.ts holds it: the fast path, the renew deadline, the fence),
 * with client-go's semantics: a candidate takes the Lease only when its holder has not renewed it for leaseDuration —
 * measured on our own clock from when we last saw the record change, so clock skew between nodes does not matter; a
 * leader renews every retryPeriod and, if it cannot renew within renewDeadline, stops leading at once.
 */
export class LeaderElector {
  private leading = false;
  /** The holder's record as last seen, and when it changed by our clock: a holder is gone leaseDuration after. */
  private observed: { key: string; at: number } | undefined;
  private readonly now: () => number;
  private readonly lease: HeldLease;
  /** The annotations of the Lease as this candidate last found it before writing it (before taking it over). */
  private taken: Readonly<Record<string, string>> = {};

  constructor(private readonly options: LeaderElectionOptions) {
    this.now = options.now ?? Date.now;
    this.lease = new HeldLease({
      ...options,
      standbyJitter: 0.2,
      content: {
        renewal: (mine) => ({ annotations: this.ownAnnotations(), spec: { ...mine.spec, ...this.duration(), renewTime: microTime(this.now()) } }),
        over: (found, now) => this.over(found, now),
        creation: (now) => ({
          annotations: this.ownAnnotations(),
          spec: { holderIdentity: options.identity, ...this.duration(), acquireTime: microTime(now), renewTime: microTime(now), leaseTransitions: 0 },
        }),
      },
      onWritten: (write) => this.written(write),
      onHeld: () => {
        options.log.info({ lease: options.name, identity: options.identity }, 'became leader');
        this.setLeading(true);
      },
      onLost: () => this.setLeading(false),
      messages: { failed: 'leader election: lease request failed', lost: 'lease not renewed within the renew deadline; stopping work' },
    });
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.lease.start();
  }

  /** Stops campaigning; a leader gives the Lease up so a standby can take over at once. */
  async stop(): Promise<void> {
    await this.lease.stop();
    if (this.leading) this.setLeading(false);
    await this.release();
  }

  /**
   * Whether this process may still act as the leader, judged by its own clock now (lease.ts holds()): checked before
   * every effect, a leader frozen past its renew deadline steps down at once.
   */
  holdsLease(): boolean {
    return this.leading && this.lease.holds();
  }

  private setLeading(leading: boolean): void {
    if (this.leading === leading) return;
    this.leading = leading;
    if (leading) {
      this.options.onStartedLeading(this.taken);
    } else {
      this.options.onStoppedLeading();
    }
  }

  /** What to write over the Lease as read: nothing while another holder renews it within its leaseDuration. */
  private over(found: LeaseObject, now: number): LeaseContent | undefined {
    const { identity } = this.options;
    const key = JSON.stringify(found.spec);
    if (this.observed?.key !== key) this.observed = { key, at: now };
    const holder = found.spec.holderIdentity;
    const expired = this.observed.at + (found.spec.leaseDurationSeconds ?? 15) * 1000 <= now;
    if (holder !== '' && holder !== identity && !expired) return undefined;
    const takingOver = holder !== identity;
    const transitions = found.spec.leaseTransitions ?? 0;
    const spec: LeaseSpec = {
      holderIdentity: identity,
      ...this.duration(),
      acquireTime: takingOver ? microTime(now) : (found.spec.acquireTime ?? microTime(now)),
      renewTime: microTime(now),
      leaseTransitions: takingOver && holder !== '' ? transitions + 1 : transitions,
    };
    // Taking over, the last holder's annotations are written back as they are: should this process die before its
    // first renewal, the next leader still finds them.
    return { annotations: takingOver ? { ...found.annotations, ...this.options.state?.() } : this.ownAnnotations(), spec };
  }

  private written(write: LeaseWrite): void {
    if (write.how === 'created') this.taken = {};
    if (write.how === 'replaced') this.taken = write.found.annotations;
    this.observed = { key: JSON.stringify(write.lease.spec), at: this.now() };
  }

  /** client-go's ReleaseOnCancel: clear the holder so a standby need not wait out the lease. */
  private async release(): Promise<void> {
    const lease = this.lease.current();
    if (lease?.spec.holderIdentity !== this.options.identity) return;
    const { client, namespace, name, log } = this.options;
    const content = {
      annotations: this.ownAnnotations(),
      spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(this.now()) },
    };
    try {
      const res = await call(client, 'PUT', paths.lease(namespace, name), {
        body: leaseManifest(namespace, name, lease.resourceVersion, content),
        timeoutMs: 5_000,
      });
      if (res.ok) log.info({ lease: name }, 'released the lease');
      else log.warn({ err: res.error.message }, 'could not release the lease');
    } catch (err) {
      log.warn({ err: String(err) }, 'could not release the lease');
    }
  }

  private duration(): { leaseDurationSeconds: number } {
    return { leaseDurationSeconds: Math.ceil(this.options.leaseDurationMs / 1000) };
  }

  private ownAnnotations(): Readonly<Record<string, string>> {
    return { ...this.options.annotations?.(), ...this.options.state?.() };
  }
}
