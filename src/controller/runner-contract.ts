// The shape every runner shares (runner.ts's single and elected ones, sharded-runner.ts's): apart from both, so
// neither imports the other for it.
import type { Controller, LeaseCheck } from './controller.js';

/**
 * A controller over `owns` (all namespaces when undefined), as one of `members` replicas at work, acting only while
 * `lease` holds (the caller builds it with its share of the settings: settings.ts shareOf).
 */
export type NewController = (lease: LeaseCheck, owns: ((namespace: string) => boolean) | undefined, members: number) => Controller;

/** Runs the controller as the mode says; the one shape run.ts and the tests see, whatever the mode. */
export interface Runner {
  /** The controller at work now (sharded: the one over this replica's current share). */
  readonly controller: Controller;
  /** Ready: a controller's caches have synced (a standby, or a replica that is rebalancing, can take work at once). */
  readonly synced: boolean;
  /** Whether this replica is at work: always alone; while leading; while it has a share. */
  readonly working: boolean;
  start(): Promise<void>;
  /** Finishes in-flight work within the grace period, then gives up its Lease (a standby takes over at once). */
  stop(): Promise<void>;
}
