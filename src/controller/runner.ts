// Picks how this replica runs the controller (alone, leader-elected or sharded) and runs it alone or elected.
import type { Logger } from 'pino';
import { LeaderElector, type LeaderElectionOptions } from '../kube/leader-election.js';
import type { ShardMembershipOptions } from '../kube/shard-membership.js';
import { ALWAYS_HELD, type Controller } from './controller.js';
import type { NewController, Runner } from './runner-contract.js';
import { ShardedRunner } from './sharded-runner.js';

/** What the runner leaves to the caller of a leader election: the runner wires what happens on a change, and what the Lease carries. */
type ElectionOptions = Omit<LeaderElectionOptions, 'onStartedLeading' | 'onStoppedLeading' | 'log' | 'annotations'>;

/** How this replica works: alone, as the elected leader among hot standbys, or on its share of the namespaces. */
export type RunMode =
  | { readonly kind: 'single' }
  | { readonly kind: 'leader-elected'; readonly election: ElectionOptions }
  | {
      readonly kind: 'sharded';
      readonly membership: Omit<ShardMembershipOptions, 'onChange' | 'onLost' | 'log'>;
      readonly onMembers?: (count: number) => void;
      readonly onRebalanced?: () => void;
    };

export interface RunnerOptions {
  readonly mode: RunMode;
  readonly create: NewController;
  /** How long in-flight reconciles may finish on shutdown (and when namespaces move away). */
  readonly graceMs: number;
  readonly log: Logger;
  /** Whether this replica is at work now (usergroup_leader). */
  readonly onWorking?: (working: boolean) => void;
}

export function createRunner(options: RunnerOptions): Runner {
  switch (options.mode.kind) {
    case 'single':
      return new ElectedRunner(options, undefined);
    case 'leader-elected':
      return new ElectedRunner(options, options.mode.election);
    case 'sharded':
      return new ShardedRunner({ ...options, mode: options.mode });
  }
}

/**
 * One controller over every namespace. With leader election only the leader's workers run; every replica starts its
 * informers and is ready once its caches are synced, so a standby takes over warm; the leader's Lease carries what
 * the request budgets owe, for the next leader. Without it, the workers start as soon as the caches are synced, and
 * a restart starts with full budgets (nothing else would hold them).
 */
class ElectedRunner implements Runner {
  readonly controller: Controller;
  private readonly elector: LeaderElector | undefined;
  private leading = false;
  private readonly identity: string | undefined;
  private readonly leaseName: string | undefined;

  constructor(
    private readonly options: RunnerOptions,
    election: ElectionOptions | undefined,
  ) {
    this.elector =
      election &&
      new LeaderElector({
        ...election,
        log: options.log,
        // The request budgets the last leader spent are taken on before any request is answered (not refilled).
        onStartedLeading: (taken) => {
          this.controller.takeOverRequestBudgets(taken);
          this.setWorking(true);
          this.controller.startWorkers();
        },
        annotations: () => this.controller.requestBudgetAnnotations(),
        state: () => this.controller.rotateOnDeleteState(),
        // The Lease is lost: in-flight reconciles and their service calls are aborted at once.
        onStoppedLeading: () => {
          this.setWorking(false);
          void this.controller.abortWorkers();
        },
      });
    this.identity = election?.identity;
    this.leaseName = election?.name;
    this.controller = options.create(this.elector ?? ALWAYS_HELD, undefined, 1);
  }

  get synced(): boolean {
    return this.controller.synced;
  }

  get working(): boolean {
    return this.leading;
  }

  async start(): Promise<void> {
    await this.controller.start();
    if (this.elector) {
      this.options.log.info({ identity: this.identity, lease: this.leaseName }, 'waiting to become leader');
      this.elector.start();
    } else {
      this.setWorking(true);
      this.controller.startWorkers();
    }
  }

  async stop(): Promise<void> {
    // Finish in-flight work before giving up the Lease, so a standby never overlaps with us.
    await this.controller.stopWorkers(this.options.graceMs);
    await this.elector?.stop();
    await this.controller.stop(0);
  }

  private setWorking(working: boolean): void {
    this.leading = working;
    this.options.onWorking?.(working);
  }
}
