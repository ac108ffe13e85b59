// One coordination.k8s.io Lease this process writes: acquired, renewed on the fast path, fenced at the renew deadline.
import type { Logger } from 'pino';
import { isRecord, stringValues } from '../platform/json-value.js';
import { isAlreadyExists, isConflict, isNotFound } from './api-error.js';
import { call, type KubeRequester } from './http.js';
import { paths } from './paths.js';
import { Pause } from '../platform/sleep.js';

export interface LeaseSpec {
  /** '' when nobody holds it. */
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number | undefined;
  readonly acquireTime?: string | undefined;
  readonly renewTime?: string | undefined;
  readonly leaseTransitions?: number | undefined;
}

/** A Lease as the apiserver answered it. */
export interface LeaseObject {
  readonly name: string;
  readonly namespace: string;
  readonly resourceVersion: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly spec: LeaseSpec;
}

/** What a user of the Lease writes in it; name, namespace and resourceVersion are the primitive's. */
export interface LeaseContent {
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly spec: LeaseSpec;
}

/** An accepted write: how it went (renewed on the fast path, created, or written over what a read found). */
export type LeaseWrite =
  { readonly how: 'renewed' | 'created'; readonly lease: LeaseObject } | { readonly how: 'replaced'; readonly lease: LeaseObject; readonly found: LeaseObject };

export interface HeldLeaseOptions {
  readonly client: KubeRequester;
  readonly namespace: string;
  readonly name: string;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly log: Logger;
  readonly now?: () => number;
  /** Up to this fraction of retryPeriod added at random to the pause while the Lease is not held (candidates apart). */
  readonly standbyJitter?: number;
  /** What to write; undefined: nothing to write at this point (another holds it; or a Lease that must not come back). */
  readonly content: {
    /** Over the version we wrote last, while we hold it (the fast path: no read first). */
    readonly renewal: (mine: LeaseObject) => LeaseContent;
    /** Over what a read found (the fast path was refused, or we do not hold it). */
    readonly over: (found: LeaseObject, now: number) => LeaseContent | undefined;
    /** When no Lease exists. */
    readonly creation: (now: number) => LeaseContent | undefined;
  };
  /** Every accepted write, before the Lease counts as held. */
  readonly onWritten?: (write: LeaseWrite) => void;
  /** The Lease became held (an accepted write within the renew deadline after none). */
  readonly onHeld?: () => void;
  /** The fence: the renew deadline passed; the caller must stop acting at once. Called once per time held. */
  readonly onLost: () => void;
  /** After every attempt of the loop, accepted or not. */
  readonly afterAttempt?: () => void;
  readonly messages: { readonly failed: string; readonly lost: string };
}

/**
 * A Lease this process writes and holds while its writes are accepted within renewDeadline. Every retryPeriod it
 * renews: on the fast path (client-go's) one PUT on the version it wrote last, while it holds the Lease; otherwise,
 * or when that is refused (409/404: someone wrote or deleted it), a read, then a write over what it found (or a
 * create). The resourceVersion serialises writers: a PUT on a version someone wrote over is refused.
 *
 * The deadline rule: the renew deadline counts from the *send* of the last accepted write. The apiserver
 * stores that write at or after the send, and another process sees it at or after that, and then waits a whole
 * leaseDuration (longer than renewDeadline) on its own clock before taking the Lease or taking us for gone: so we
 * stop acting before anyone else can start, however long the answer took to arrive. Counting from the answer (as
 * client-go does, whose deadline starts a retryPeriod after the last renewal's answer) would add that request's time
 * in flight to our turn. A write answered only after renewDeadline does not count as held at all.
 *
 * The fence: holds() checks the clock before every effect (a process frozen past its deadline resumes in the poll
 * phase, where I/O callbacks of earlier work run before any timer), and a timer fires at the deadline even while a
 * renewal hangs; whichever comes first calls onLost, once.
 */
export class HeldLease {
  private readonly now: () => number;
  /** The Lease as last written or read; undefined once read gone. */
  private known: LeaseObject | undefined;
  /** The version we wrote last (the fast path writes only over it). */
  private writtenVersion: string | undefined;
  private held = false;
  /** The send of the last accepted write, by our clock. */
  private sentAt = 0;
  private deadline: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly pause = new Pause();
  private loop: Promise<void> | undefined;

  constructor(private readonly options: HeldLeaseOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The Lease as last written or read (undefined before the first answer, or once read gone). */
  current(): LeaseObject | undefined {
    return this.known;
  }

  /** Whether this process may still act on the Lease, by its own clock now; fences at once past the deadline. */
  holds(): boolean {
    if (this.held && this.now() - this.sentAt >= this.options.renewDeadlineMs) this.fence();
    return this.held;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** The next attempt at once (news to write). */
  renewSoon(): void {
    this.pause.cut();
  }

  /** Ends the loop (after the attempt under way) and the deadline timer; what the owner does next is its own. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pause.cut();
    await this.loop;
    if (this.deadline) clearTimeout(this.deadline);
  }

  /** One attempt outside the loop: the accepted write, undefined when none (failures reject). */
  async renewOnce(): Promise<LeaseWrite | undefined> {
    return this.attempt();
  }

  private async run(): Promise<void> {
    const { log, name, retryPeriodMs, standbyJitter = 0 } = this.options;
    while (!this.stopped) {
      try {
        await this.attempt();
      } catch (err) {
        log.warn({ lease: name, err: String(err) }, this.options.messages.failed);
      }
      this.holds();
      this.options.afterAttempt?.();
      await this.pause.for(this.held ? retryPeriodMs : retryPeriodMs * (1 + Math.random() * standbyJitter));
    }
  }

  private async attempt(): Promise<LeaseWrite | undefined> {
    const { content } = this.options;
    const mine = this.known;
    if (mine && mine.resourceVersion === this.writtenVersion && this.holds()) {
      const sentAt = this.now();
      const res = await this.write('PUT', content.renewal(mine), mine.resourceVersion);
      if (res.ok) return this.accepted({ how: 'renewed', lease: res.lease }, sentAt);
      if (!isConflict(res.error) && !isNotFound(res.error)) throw res.error;
    }
    const read = await call(this.options.client, 'GET', paths.lease(this.options.namespace, this.options.name), { timeoutMs: this.options.renewDeadlineMs });
    if (!read.ok) {
      if (!isNotFound(read.error)) throw read.error;
      this.known = undefined;
      const body = content.creation(this.now());
      if (!body) return undefined;
      const sentAt = this.now();
      const created = await this.write('POST', body, undefined);
      if (created.ok) return this.accepted({ how: 'created', lease: created.lease }, sentAt);
      // Another process created it first: it won this round.
      if (isAlreadyExists(created.error)) return undefined;
      throw created.error;
    }
    const found = parseLease(read.body);
    if (!found) throw new Error(`lease ${this.options.namespace}/${this.options.name} cannot be parsed`);
    this.known = found;
    const body = content.over(found, this.now());
    if (!body) return undefined;
    const sentAt = this.now();
    const replaced = await this.write('PUT', body, found.resourceVersion);
    if (replaced.ok) return this.accepted({ how: 'replaced', lease: replaced.lease, found }, sentAt);
    // Someone wrote it since we read it: they won this round.
    if (isConflict(replaced.error)) return undefined;
    throw replaced.error;
  }

  private accepted(write: LeaseWrite, sentAt: number): LeaseWrite {
    this.known = write.lease;
    this.writtenVersion = write.lease.resourceVersion;
    this.options.onWritten?.(write);
    this.sentAt = Math.max(this.sentAt, sentAt);
    // Answered too late to count: the deadline from its send has passed already.
    if (this.now() - this.sentAt >= this.options.renewDeadlineMs) {
      this.holds();
      return write;
    }
    if (!this.stopped) this.armDeadline();
    if (!this.held) {
      this.held = true;
      this.options.onHeld?.();
    }
    return write;
  }

  private armDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = setTimeout(
      () => {
        if (this.held) this.fence();
      },
      Math.max(0, this.sentAt + this.options.renewDeadlineMs - this.now()),
    );
    this.deadline.unref();
  }

  private fence(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.held = false;
    this.options.log.error({ lease: this.options.name, sinceRenewMs: this.now() - this.sentAt }, this.options.messages.lost);
    this.options.onLost();
  }

  private async write(
    method: 'PUT' | 'POST',
    content: LeaseContent,
    resourceVersion: string | undefined,
  ): Promise<{ ok: true; lease: LeaseObject } | { ok: false; error: unknown }> {
    const { client, namespace, name, renewDeadlineMs } = this.options;
    const path = method === 'PUT' ? paths.lease(namespace, name) : paths.leases(namespace);
    const res = await call(client, method, path, { body: leaseManifest(namespace, name, resourceVersion, content), timeoutMs: renewDeadlineMs });
    if (!res.ok) return res;
    const lease = parseLease(res.body);
    if (!lease) throw new Error(`lease ${namespace}/${name}: the apiserver's answer cannot be parsed`);
    return { ok: true, lease };
  }
}

/** The Lease object to send: what the user writes, under our name and (for a replace) the version it replaces. */
export function leaseManifest(namespace: string, name: string, resourceVersion: string | undefined, content: LeaseContent): Record<string, unknown> {
  const { spec } = content;
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace,
      ...(resourceVersion ? { resourceVersion } : {}),
      ...(content.labels ? { labels: content.labels } : {}),
      ...(Object.keys(content.annotations).length > 0 ? { annotations: content.annotations } : {}),
    },
    spec: {
      holderIdentity: spec.holderIdentity,
      ...(spec.leaseDurationSeconds !== undefined ? { leaseDurationSeconds: spec.leaseDurationSeconds } : {}),
      ...(spec.acquireTime ? { acquireTime: spec.acquireTime } : {}),
      ...(spec.renewTime ? { renewTime: spec.renewTime } : {}),
      ...(spec.leaseTransitions !== undefined ? { leaseTransitions: spec.leaseTransitions } : {}),
    },
  };
}

export function parseLease(body: unknown): LeaseObject | undefined {
  if (!isRecord(body) || !isRecord(body['metadata'])) return undefined;
  const m = body['metadata'];
  const spec = isRecord(body['spec']) ? body['spec'] : {};
  if (typeof m['name'] !== 'string' || typeof m['namespace'] !== 'string' || typeof m['resourceVersion'] !== 'string') return undefined;
  const text = (key: string): string | undefined => (typeof spec[key] === 'string' ? spec[key] : undefined);
  const count = (key: string): number | undefined => (typeof spec[key] === 'number' ? spec[key] : undefined);
  return {
    name: m['name'],
    namespace: m['namespace'],
    resourceVersion: m['resourceVersion'],
    labels: stringValues(m['labels']),
    annotations: stringValues(m['annotations']),
    spec: {
      holderIdentity: text('holderIdentity') ?? '',
      leaseDurationSeconds: count('leaseDurationSeconds'),
      acquireTime: text('acquireTime'),
      renewTime: text('renewTime'),
      leaseTransitions: count('leaseTransitions'),
    },
  };
}
