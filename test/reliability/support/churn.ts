import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Watch } from '@kubernetes/client-node';
import { group, plural, version, type TestEnv, type UserGroupObject } from '../../support/operator.js';
import type { RotationLedger } from './invariant.js';
import { UNBUDGETED_ARGS } from '../../support/controller-process.js';

/*
 * Load for the process-level scenarios (controller crashes, leader failover): UserGroups created,
 * updated and rotated continuously, with rotation requests kept to what the ledger can promise
 * (a value is only superseded once the controller handled it), and a watch on the owned Secrets.
 */

/** A small seeded PRNG (mulberry32): the same seed gives the same sequence. */
export interface Rng {
  /** In [0, 1). */
  (): number;
  readonly seed: number;
}

export function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return Object.assign(next, { seed: seed >>> 0 });
}

/** RELIABILITY_SEED when set (to replay a failure), else a fresh one; log it. */
export function scenarioSeed(): number {
  const fromEnv = process.env['RELIABILITY_SEED'];
  if (fromEnv !== undefined && fromEnv !== '') {
    const n = Number(fromEnv);
    if (!Number.isInteger(n) || n < 0) throw new Error(`RELIABILITY_SEED must be a non-negative integer, got "${fromEnv}"`);
    return n >>> 0;
  }
  return randomInt(0, 2 ** 31);
}

/** An integer in [min, max]. */
export const between = (rng: Rng, min: number, max: number): number => min + Math.floor(rng() * (max - min + 1));

/** Controller flags for churn scenarios: service rates and workers high enough that churn never waits on them. */
export const CHURN_RATE_ARGS = ['--service-qps', '200', '--service-burst', '400', '--concurrency', '8', ...UNBUDGETED_ARGS];
const pick = <T>(rng: Rng, items: readonly T[]): T | undefined => items[Math.floor(rng() * items.length)];

const ROTATE_ANNOTATION = 'usergroup.dev/rotate-requested-at';
export const PENDING_ANNOTATION = 'usergroup.dev/rotation-pending';

export interface ChurnGroup {
  readonly name: string;
  readonly userGroupId: string;
}

export interface ChurnCounts {
  creates: number;
  /** Created with the rotation annotation already set (a rotation before the first sync). */
  createdWithRotation: number;
  specUpdates: number;
  /** Rotation values recorded while the scenario said the controller was working / not working. */
  rotationsUp: number;
  rotationsDown: number;
}

export interface ChurnOptions {
  /** Object names are `${prefix}${i}`, userGroupIds `${prefix}-id-${i}` (as createUserGroups names them). */
  readonly prefix: string;
  /** UserGroups to create in all (createNext creates them in order). */
  readonly total: number;
}

export interface ChurnLoopOptions {
  readonly intervalMs: number;
  /** Per tick: chance of creating the next group (while any are left), of one spec update, of one rotation request. */
  readonly createChance: number;
  readonly updateChance: number;
  readonly rotateChance: number;
}

/**
 * Drives creates, spec updates (name and properties) and rotation requests against one namespace.
 * A group gets a new rotation value only when its previous value is handled
 * (status.rotation.lastHandledRequest), so every recorded value must execute exactly once.
 */
export class Churn {
  readonly groups: ChurnGroup[] = [];
  readonly counts: ChurnCounts = { creates: 0, createdWithRotation: 0, specUpdates: 0, rotationsUp: 0, rotationsDown: 0 };
  /** Failed API calls of the churn itself (it runs against a healthy apiserver: there should be none). */
  readonly errors: string[] = [];
  /** Set by the scenario: whether a controller is working now (only for counting rotations up / down). */
  controllerUp = false;
  private nextIndex = 0;
  private valueCounter = 0;
  private revision = 0;
  /** name -> the last recorded rotation value, until the controller reports it handled. */
  private readonly outstanding = new Map<string, string>();
  private loop: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly env: TestEnv,
    private readonly ledger: RotationLedger,
    private readonly rng: Rng,
    private readonly options: ChurnOptions,
  ) {}

  get remaining(): number {
    return this.options.total - this.nextIndex;
  }

  /** Creates the next `count` groups, `parallel` at a time; `rotateAtCreation` of them carry a rotation value already. */
  async createNext(count: number, parallel = 20, rotateAtCreationChance = 0): Promise<void> {
    const indexes: number[] = [];
    while (indexes.length < count && this.nextIndex < this.options.total) indexes.push(this.nextIndex++);
    for (let i = 0; i < indexes.length; i += parallel) {
      await Promise.all(indexes.slice(i, i + parallel).map((k) => this.create(k, this.rng() < rotateAtCreationChance)));
    }
  }

  private async create(k: number, withRotation: boolean): Promise<void> {
    const name = `${this.options.prefix}${k}`;
    const userGroupId = `${this.options.prefix}-id-${k}`;
    const value = withRotation ? this.nextValue() : undefined;
    try {
      await this.env.createUserGroup(
        name,
        { userGroupId, name: `Group ${this.options.prefix} ${k}`, properties: { rev: 0 } },
        value === undefined ? undefined : { [ROTATE_ANNOTATION]: value },
      );
    } catch (err) {
      this.errors.push(`create ${name}: ${String(err)}`);
      return;
    }
    if (value !== undefined) {
      this.outstanding.set(name, value);
      this.recordRotation(userGroupId, value);
      this.counts.createdWithRotation++;
    }
    this.groups.push({ name, userGroupId });
    this.counts.creates++;
  }

  /** Changes name and properties of `count` random groups (a new generation each). */
  async updateSpecs(count: number): Promise<void> {
    const targets = Array.from({ length: count }, () => pick(this.rng, this.groups)).filter((g): g is ChurnGroup => g !== undefined);
    await Promise.all(
      targets.map(async (g) => {
        const rev = ++this.revision;
        try {
          await this.env.patchUserGroup(g.name, {
            spec: { name: `Group ${g.name} rev ${rev}`, properties: { rev, region: pick(this.rng, ['eu', 'us', 'ap']) ?? 'eu' } },
          });
          this.counts.specUpdates++;
        } catch (err) {
          this.errors.push(`update ${g.name}: ${String(err)}`);
        }
      }),
    );
  }

  /**
   * Requests one rotation for each of up to `count` random groups whose previous value (if any) is handled;
   * returns the names. Never gives a group a second value before the first is handled.
   */
  async requestRotations(count: number, tag: string): Promise<string[]> {
    await this.refreshHandled();
    const eligible = this.groups.filter((g) => !this.outstanding.has(g.name));
    const chosen: ChurnGroup[] = [];
    while (chosen.length < count && eligible.length > 0) {
      const i = Math.floor(this.rng() * eligible.length);
      chosen.push(...eligible.splice(i, 1));
    }
    // Marked before any await, so that concurrent callers never pick the same group.
    const values = chosen.map((g) => {
      const value = `${tag}-${this.nextValue()}`;
      this.outstanding.set(g.name, value);
      return { g, value };
    });
    await Promise.all(
      values.map(async ({ g, value }) => {
        try {
          await this.env.requestRotation(g.name, value);
          this.recordRotation(g.userGroupId, value);
        } catch (err) {
          // Unknown whether the annotation was set: keep the group out of further requests.
          this.errors.push(`rotate ${g.name}: ${String(err)}`);
        }
      }),
    );
    return chosen.map((g) => g.name);
  }

  private recordRotation(userGroupId: string, value: string): void {
    this.ledger.record(userGroupId, value);
    if (this.controllerUp) this.counts.rotationsUp++;
    else this.counts.rotationsDown++;
  }

  private nextValue(): string {
    return `v${++this.valueCounter}`;
  }

  /** Forgets outstanding values the controller has handled. */
  private async refreshHandled(): Promise<void> {
    if (this.outstanding.size === 0) return;
    const list = (await this.env.custom.listNamespacedCustomObject({ group, version, namespace: this.env.namespace, plural })) as { items: UserGroupObject[] };
    for (const ug of list.items) {
      const value = this.outstanding.get(ug.metadata.name);
      if (value !== undefined && ug.status?.rotation?.lastHandledRequest === value) this.outstanding.delete(ug.metadata.name);
    }
  }

  /** Runs creates, updates and rotations in the background until stop(). */
  start(options: ChurnLoopOptions): void {
    this.stopped = false;
    this.loop ??= (async () => {
      while (!this.stopped) {
        try {
          const work: Promise<unknown>[] = [];
          if (this.remaining > 0 && this.rng() < options.createChance) work.push(this.createNext(1, 1, 0.2));
          if (this.rng() < options.updateChance) work.push(this.updateSpecs(1));
          if (this.rng() < options.rotateChance) work.push(this.requestRotations(1, this.controllerUp ? 'up' : 'down'));
          await Promise.all(work);
        } catch (err) {
          this.errors.push(`churn: ${String(err)}`);
        }
        await sleep(options.intervalMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    this.loop = undefined;
  }
}

/** Groups whose name or properties at the service differ from their spec. */
export async function specDrift(env: TestEnv): Promise<string[]> {
  const list = (await env.custom.listNamespacedCustomObject({ group, version, namespace: env.namespace, plural })) as { items: UserGroupObject[] };
  const atService = new Map(env.sim.groups(env.apiKey).map((g) => [g.userGroupId, g]));
  const drift: string[] = [];
  for (const ug of list.items) {
    const spec = ug.spec as { userGroupId: string; name: string; properties?: Record<string, unknown> };
    const g = atService.get(spec.userGroupId);
    if (g?.name !== spec.name || JSON.stringify(g.properties ?? null) !== JSON.stringify(spec.properties ?? null)) drift.push(ug.metadata.name);
  }
  return drift;
}

interface SecretEventObject {
  metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> };
}

export interface SecretEvent {
  readonly type: string;
  readonly name: string;
  readonly annotations: Readonly<Record<string, string>>;
  /** The rotation-pending annotation this Secret had in the previous event seen (undefined: none, or first sight). */
  readonly pendingBefore: string | undefined;
  readonly at: number;
}

/**
 * Watches the operator-managed Secrets of a namespace for the whole scenario: records every DELETED
 * one (a token Secret must never disappear) and lets a scenario wait for a particular change (e.g.
 * a rotation intent being written). Resumes from the last resourceVersion when a watch ends.
 */
export class SecretWatch {
  readonly deleted: string[] = [];
  /** Every event seen, in order. */
  readonly events: SecretEvent[] = [];
  /** Watch connections that ended and were resumed; `gaps` counts resumes that could not continue (410). */
  restarts = 0;
  gaps = 0;
  private resourceVersion: string | undefined;
  private abort: AbortController | undefined;
  private stopped = false;
  private readonly waiters = new Set<(e: SecretEvent) => void>();
  private readonly pending = new Map<string, string | undefined>();

  private constructor(private readonly env: TestEnv) {}

  static async start(env: TestEnv): Promise<SecretWatch> {
    const w = new SecretWatch(env);
    const list = await env.core.listNamespacedSecret({ namespace: env.namespace, labelSelector: 'app.kubernetes.io/managed-by=usergroup-operator' });
    w.resourceVersion = list.metadata?.resourceVersion;
    await w.connect();
    return w;
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const params: Record<string, string | boolean> = { labelSelector: 'app.kubernetes.io/managed-by=usergroup-operator', allowWatchBookmarks: true };
    if (this.resourceVersion !== undefined) params['resourceVersion'] = this.resourceVersion;
    let expired = false;
    this.abort = await new Watch(this.env.kc).watch(
      `/api/v1/namespaces/${this.env.namespace}/secrets`,
      params,
      (type: string, obj: SecretEventObject & { code?: number }) => {
        if (type === 'ERROR') {
          if (obj.code === 410) expired = true;
          return;
        }
        if (obj.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        const name = obj.metadata?.name ?? '';
        const annotations = obj.metadata?.annotations ?? {};
        const event: SecretEvent = { type, name, annotations, pendingBefore: this.pending.get(name), at: Date.now() };
        this.pending.set(name, annotations[PENDING_ANNOTATION]);
        this.events.push(event);
        if (type === 'DELETED') this.deleted.push(event.name);
        for (const waiter of this.waiters) waiter(event);
      },
      () => {
        if (this.stopped) return;
        this.restarts++;
        if (expired) {
          this.gaps++;
          this.resourceVersion = undefined;
        }
        void sleep(100)
          .then(() => this.connect())
          .catch(() => {
            this.gaps++;
            this.resourceVersion = undefined;
            void sleep(1_000)
              .then(() => this.connect())
              .catch(() => undefined);
          });
      },
    );
  }

  /** Resolves with the first event that matches from now on, or undefined after timeoutMs. */
  waitFor(match: (e: SecretEvent) => boolean, timeoutMs: number): Promise<SecretEvent | undefined> {
    return new Promise((resolve) => {
      const waiter = (e: SecretEvent): void => {
        if (!match(e)) return;
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve(e);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        resolve(undefined);
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }
}
