// The sharded runner (--shard-by-namespace): a controller over this replica's share of the namespaces.
import type { Logger } from 'pino';
import { ShardMembership, type Member, type ShardMembershipOptions } from '../kube/shard-membership.js';
import type { Controller } from './controller.js';
import type { NewController, Runner } from './runner-contract.js';
import { constraintsKey, decideShards, INITIAL_SHARD_STATE, ownership, viewId, type ShardState } from './shard-assignment.js';

export interface ShardedRunnerOptions {
  readonly mode: {
    readonly membership: Omit<ShardMembershipOptions, 'onChange' | 'onLost' | 'log'>;
    readonly onMembers?: (count: number) => void;
    readonly onRebalanced?: () => void;
  };
  /** A controller over the namespaces `owns` admits (its informers drop the rest before caching them). */
  readonly create: NewController;
  /** How long in-flight reconciles may finish when namespaces move away (and on shutdown). */
  readonly graceMs: number;
  readonly log: Logger;
  readonly onWorking?: (working: boolean) => void;
}

const NOTHING = (): boolean => false;
/** A constraints key no decision produces: after a lapse, the next decision always rebuilds. */
const LOST = 'lost';

/**
 * Replicas that share the namespaces instead of electing one leader (--shard-by-namespace): each runs a controller
 * over its share (shard-assignment.ts decides it from the live members' Leases), and when the share changes it stops
 * that controller — letting in-flight reconciles finish — before it says so in its Lease, then starts one over the
 * new share. A replica whose Lease lapses stops all work at once.
 */
export class ShardedRunner implements Runner {
  private current: Controller;
  private state: ShardState = INITIAL_SHARD_STATE;
  private applied = constraintsKey([]);
  private pending: readonly Member[] | undefined;
  private processing: Promise<void> | undefined;
  private readonly membership: ShardMembership;
  private syncedOnce = false;
  private settledView: string | undefined;
  private stopped = false;
  private hasShare = false;

  constructor(private readonly options: ShardedRunnerOptions) {
    this.membership = new ShardMembership({
      ...options.mode.membership,
      log: options.log,
      // Its share's request budgets (and what it handed over lately), for whoever takes namespaces over from it.
      annotations: () => ({ ...this.current.requestBudgetAnnotations(), ...this.current.rotateOnDeleteState() }),
      onChange: (live) => this.onMembers(live),
      onLost: () => {
        // At once, not after the queue of decisions: in-flight service calls are aborted. Whatever comes next is
        // decided afresh, as by a newcomer (the others may have moved on without us).
        void this.current.abortWorkers();
        this.setWorking(false);
        this.state = INITIAL_SHARD_STATE;
        this.applied = LOST;
      },
    });
    this.current = this.build(NOTHING, 1);
  }

  /** The controller over the current share (for metrics and tests). */
  get controller(): Controller {
    return this.current;
  }

  /** Ready once a controller has synced: a replica that is rebalancing is working, not broken. */
  get synced(): boolean {
    return this.syncedOnce || this.current.synced;
  }

  get working(): boolean {
    return this.hasShare;
  }

  /** Joins the group; caches are filled once a share is ours (a replica that owns nothing watches nothing). */
  start(): Promise<void> {
    this.setWorking(false);
    this.membership.start();
    this.options.log.info(
      { identity: this.options.mode.membership.identity, group: this.options.mode.membership.group },
      'sharing the namespaces with the other replicas',
    );
    return Promise.resolve();
  }

  /** Finishes in-flight work, then leaves the group (the others take our namespaces without waiting). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.current.stopWorkers(this.options.graceMs);
    await this.processing;
    await this.current.stopWorkers(this.options.graceMs);
    await this.membership.stop();
    await this.current.stop(0);
  }

  private onMembers(live: readonly Member[]): void {
    this.options.mode.onMembers?.(live.length);
    this.pending = live;
    this.processing ??= this.process().finally(() => {
      this.processing = undefined;
    });
  }

  /** One decision at a time, on the latest members seen. */
  private async process(): Promise<void> {
    while (this.pending && !this.stopped) {
      const live = this.pending;
      this.pending = undefined;
      const decision = decideShards(this.state, this.options.mode.membership.identity, live);
      this.state = decision.state;
      const settled = decision.state.settled;
      if (settled && viewId(settled) !== this.settledView) {
        this.settledView = viewId(settled);
        this.options.log.info({ members: settled.length, view: this.settledView }, 'shard view settled');
      }
      const key = constraintsKey(decision.constraints);
      if (key !== this.applied) {
        await this.rebuild(
          decision.constraints.length > 0 ? ownership(this.options.mode.membership.identity, decision.constraints) : NOTHING,
          decision.view.length,
        );
        this.applied = key;
      }
      // Only now that nothing outside the constraints runs any more may the others count on it.
      if (decision.view.includes(this.options.mode.membership.identity)) this.membership.acknowledge(viewId(decision.view));
    }
  }

  /** Stops the controller of the old share (its reconciles may finish), then starts one over the new share. */
  private async rebuild(owns: (namespace: string) => boolean, members: number): Promise<void> {
    const old = this.current;
    this.setWorking(false);
    await old.stop(this.options.graceMs);
    if (this.stopped) return;
    this.current = this.build(owns, members);
    // All of it, what moves away too: this replica's Lease goes on carrying it for the member that takes it over.
    this.current.inheritRequestBudgets(old);
    this.options.mode.onRebalanced?.();
    if (owns === NOTHING) {
      this.options.log.info('shard share is empty; no caches kept');
      return;
    }
    this.options.log.info('shard share changed; caches of the new share are being filled');
    void this.launch(this.current);
  }

  private build(owns: (namespace: string) => boolean, members: number): Controller {
    return this.options.create(this.membership, owns, members);
  }

  private async launch(controller: Controller): Promise<void> {
    await controller.start();
    if (controller !== this.current || this.stopped) return;
    // What the members this share came from spent: their Leases (read once every member acknowledged the view, so
    // after they stopped working on it), and the last Lease of members that left.
    for (const annotations of this.membership.peerAnnotations()) controller.takeOverRequestBudgets(annotations);
    this.syncedOnce = true;
    controller.startWorkers();
    this.setWorking(true);
  }

  private setWorking(working: boolean): void {
    this.hasShare = working;
    this.options.onWorking?.(working);
  }
}
