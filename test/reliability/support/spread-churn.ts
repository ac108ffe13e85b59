import type { TestEnv } from '../../support/operator.js';
import { Churn, mulberry32, SecretWatch, specDrift, type ChurnCounts, type ChurnGroup, type ChurnLoopOptions, type Rng } from './churn.js';
import type { ChurnOutcome } from './churn-outcome.js';
import { awaitInvariant, type InvariantResult, type RotationLedger } from './invariant.js';
import { sized } from './scale.js';

/*
 * The churn of churn.ts spread over several namespaces (scenario 4b, sharded replicas): one Churn and one
 * SecretWatch per namespace, all sharing one RotationLedger and the env's simulator and API key. Churn,
 * SecretWatch and the invariant stay as they are: each works on a view of the env bound to one namespace.
 */

/**
 * The env seen through another namespace: every method that uses `this.namespace` (createUserGroup,
 * patchUserGroup, requestRotation, the invariant's lists, SecretWatch) works there; the clients, the
 * simulator and the API key are the env's own. Not to be closed: the env is.
 */
export function namespaceView(env: TestEnv, namespace: string): TestEnv {
  if (namespace === env.namespace) return env;
  return Object.create(env, { namespace: { value: namespace, enumerable: true } }) as TestEnv;
}

/** One Churn per namespace; the loop of each ticks K times less often, so the total rate is one Churn's. */
export class SpreadChurn {
  readonly views: readonly TestEnv[];
  readonly churns: readonly Churn[];
  private constructor(
    readonly env: TestEnv,
    readonly namespaces: readonly string[],
    readonly watches: readonly SecretWatch[],
    private readonly rng: Rng,
    private readonly ledger: RotationLedger,
    perNamespace: number,
  ) {
    this.views = namespaces.map((ns) => namespaceView(env, ns));
    // Distinct prefixes: the userGroupIds (one id space at the simulator) never collide across namespaces.
    this.churns = this.views.map(
      (v, i) => new Churn(v, ledger, mulberry32((rng.seed ^ (0x9e3779b9 * (i + 1))) >>> 0), { prefix: `t${i}g`, total: perNamespace }),
    );
  }

  /** Starts a SecretWatch in every namespace first (nothing may be missed). */
  static async create(env: TestEnv, namespaces: readonly string[], ledger: RotationLedger, rng: Rng, perNamespace: number): Promise<SpreadChurn> {
    const watches = await Promise.all(namespaces.map((ns) => SecretWatch.start(namespaceView(env, ns))));
    return new SpreadChurn(env, namespaces, watches, rng, ledger, perNamespace);
  }

  set controllerUp(up: boolean) {
    for (const c of this.churns) c.controllerUp = up;
  }

  get remaining(): number {
    return this.churns.reduce((n, c) => n + c.remaining, 0);
  }

  get groups(): ChurnGroup[] {
    return this.churns.flatMap((c) => c.groups);
  }

  get errors(): string[] {
    return this.churns.flatMap((c) => c.errors);
  }

  /** Owned token Secrets deleted, as "namespace/name". */
  get deleted(): string[] {
    return this.watches.flatMap((w, i) => w.deleted.map((name) => `${this.namespaces[i] ?? ''}/${name}`));
  }

  get counts(): ChurnCounts {
    const sum: ChurnCounts = { creates: 0, createdWithRotation: 0, specUpdates: 0, rotationsUp: 0, rotationsDown: 0 };
    for (const c of this.churns) for (const k of Object.keys(sum) as (keyof ChurnCounts)[]) sum[k] += c.counts[k];
    return sum;
  }

  /** The next `perNamespace` groups of every namespace. */
  async createNext(perNamespace: number, parallel = 20, rotateAtCreationChance = 0): Promise<void> {
    const each = Math.max(1, Math.floor(parallel / this.churns.length));
    await Promise.all(this.churns.map((c) => c.createNext(perNamespace, each, rotateAtCreationChance)));
  }

  /** `count` rotation requests, each in a namespace picked at random (see Churn.requestRotations). */
  async requestRotations(count: number, tag: string): Promise<string[]> {
    const per = new Map<Churn, number>();
    for (let k = 0; k < count; k++) {
      const c = this.churns[Math.floor(this.rng() * this.churns.length)];
      if (c) per.set(c, (per.get(c) ?? 0) + 1);
    }
    const names = await Promise.all([...per].map(([c, n]) => c.requestRotations(n, tag)));
    return names.flat();
  }

  start(options: ChurnLoopOptions): void {
    for (const c of this.churns) c.start({ ...options, intervalMs: options.intervalMs * this.churns.length });
  }

  async stop(): Promise<void> {
    await Promise.all(this.churns.map((c) => c.stop()));
  }

  stopWatches(): void {
    for (const w of this.watches) w.stop();
  }

  /** settleChurn over every namespace: stops the churn, waits for the invariant in each, sums the results. */
  async settle(failure: unknown, started: number): Promise<ChurnOutcome> {
    await this.stop();
    let result: InvariantResult | undefined;
    if (failure === undefined) {
      const results = await Promise.all(this.views.map((v) => awaitInvariant(v, this.ledger, sized(240_000, 120_000))));
      result = {
        converged: results.every((r) => r.converged),
        objects: results.reduce((n, r) => n + r.objects, 0),
        tokensLost: results.reduce((n, r) => n + r.tokensLost, 0),
        duplicateRotations: results.reduce((n, r) => n + r.duplicateRotations, 0),
        missingRotations: results.reduce((n, r) => n + r.missingRotations, 0),
        problems: results.flatMap((r, i) => r.problems.map((p) => `${this.namespaces[i] ?? ''}/${p}`)).slice(0, 10),
        elapsedMs: Math.max(...results.map((r) => r.elapsedMs)),
      };
    }
    const drift = failure === undefined ? (await Promise.all(this.views.map((v) => specDrift(v)))).flat() : [];
    const wallMs = Date.now() - started;
    const calls = this.env.calls();
    const faultsAtSim = Object.entries(calls.upsert)
      .concat(Object.entries(calls.rotate))
      .filter(([outcome, n]) => !['ok', 'created', 'updated'].includes(outcome) && n > 0);
    let completedAfterRestart = 0;
    for (const ns of this.namespaces)
      completedAfterRestart += (await this.env.events.listNamespacedEvent({ namespace: ns })).items.filter(
        (ev) => ev.reason === 'TokenRotated' && (ev.note ?? '').includes('completed after a restart'),
      ).length;
    return { result, drift, wallMs, calls, faultsAtSim, completedAfterRestart };
  }
}
