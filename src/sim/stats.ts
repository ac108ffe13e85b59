// The simulator's call counters per team, operation and outcome.
import { INJECTED_FAULTS } from './faults.js';

export const OPERATIONS = ['upsert', 'rotate'] as const;
/** upsert is PUT /api/user, rotate is POST /api/user. */
export type Operation = (typeof OPERATIONS)[number];

/**
 * How one API call ended. Every call counts exactly one outcome: a successful upsert counts
 * as created or updated, a successful rotation as ok.
 */
export const OUTCOMES = [
  'ok',
  'created',
  'updated',
  'unauthorized',
  'bad_request',
  'unknown_token',
  'payload_too_large',
  'account_rate_limited',
  ...INJECTED_FAULTS,
] as const;
export type Outcome = (typeof OUTCOMES)[number];

export type OutcomeCounts = Readonly<Record<Outcome, number>>;

export interface SimStats {
  /** Calls per operation and outcome; every outcome is present, zero if it never happened. */
  readonly operations: Readonly<Record<Operation, OutcomeCounts>>;
  /** Calls delayed by a latency spike; they also count their normal outcome. */
  readonly spikes: Readonly<Record<Operation, number>>;
  /** Successful rotations per user_group_id. */
  readonly rotationsByUserGroupId: Readonly<Record<string, number>>;
  /** Successful upserts per user_group_id. */
  readonly upsertsByUserGroupId: Readonly<Record<string, number>>;
}

interface Counters {
  readonly operations: Record<Operation, Record<Outcome, number>>;
  readonly spikes: Record<Operation, number>;
  // Maps because user_group_id is client input ("__proto__" must stay an ordinary key).
  readonly rotations: Map<string, number>;
  readonly upserts: Map<string, number>;
}

function emptyCounters(): Counters {
  const outcomes = (): Record<Outcome, number> => Object.fromEntries(OUTCOMES.map((outcome) => [outcome, 0])) as Record<Outcome, number>;
  return {
    operations: { upsert: outcomes(), rotate: outcomes() },
    spikes: { upsert: 0, rotate: 0 },
    rotations: new Map(),
    upserts: new Map(),
  };
}

// Calls that fail authentication belong to no team; they show in the simulator-wide view only.
const NO_TEAM = 0;

/** Counts since the last reset, per team, so each API key's admin view shows only its own calls. */
export class StatsRecorder {
  readonly #teams = new Map<number, Counters>();

  #counters(teamId: number | undefined): Counters {
    const key = teamId ?? NO_TEAM;
    let counters = this.#teams.get(key);
    if (counters === undefined) {
      counters = emptyCounters();
      this.#teams.set(key, counters);
    }
    return counters;
  }

  record(teamId: number | undefined, operation: Operation, outcome: Outcome): void {
    this.#counters(teamId).operations[operation][outcome] += 1;
  }

  recordSpike(teamId: number | undefined, operation: Operation): void {
    this.#counters(teamId).spikes[operation] += 1;
  }

  recordRotation(teamId: number, userGroupId: string): void {
    const rotations = this.#counters(teamId).rotations;
    rotations.set(userGroupId, (rotations.get(userGroupId) ?? 0) + 1);
  }

  recordUpsert(teamId: number, userGroupId: string): void {
    const upserts = this.#counters(teamId).upserts;
    upserts.set(userGroupId, (upserts.get(userGroupId) ?? 0) + 1);
  }

  /** One team's counts, or with no team the sum over all teams and unauthenticated calls. */
  snapshot(teamId?: number): SimStats {
    const sources = teamId === undefined ? [...this.#teams.values()] : [this.#teams.get(teamId) ?? emptyCounters()];
    const total = emptyCounters();
    for (const source of sources) {
      for (const operation of OPERATIONS) {
        for (const outcome of OUTCOMES) {
          total.operations[operation][outcome] += source.operations[operation][outcome];
        }
        total.spikes[operation] += source.spikes[operation];
      }
      for (const [userGroupId, count] of source.rotations) {
        total.rotations.set(userGroupId, (total.rotations.get(userGroupId) ?? 0) + count);
      }
      for (const [userGroupId, count] of source.upserts) {
        total.upserts.set(userGroupId, (total.upserts.get(userGroupId) ?? 0) + count);
      }
    }
    return {
      operations: total.operations,
      spikes: total.spikes,
      rotationsByUserGroupId: Object.fromEntries(total.rotations),
      upsertsByUserGroupId: Object.fromEntries(total.upserts),
    };
  }

  /** Resets one team's counts, or with no team everything. */
  reset(teamId?: number): void {
    if (teamId === undefined) this.#teams.clear();
    else this.#teams.delete(teamId);
  }
}
