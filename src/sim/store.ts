// The simulator's user groups, keyed by team and id and by token, changed atomically.
import type { JsonObject } from './json.js';
import type { Mapping, UpsertRequest } from './requests.js';
import type { EnvironmentTag, Team } from './teams.js';
import { newToken } from './token.js';

/** One user group as the service stores it, token included. */
export interface GroupRecord {
  readonly teamId: number;
  readonly userGroupId: string;
  readonly name: string;
  readonly mapping: Mapping | undefined;
  readonly properties: JsonObject | undefined;
  readonly environmentTag: EnvironmentTag;
  readonly token: string;
  /** Successful rotations over the group's life (stats count since the last reset). */
  readonly rotations: number;
  /** ISO 8601 timestamps. */
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface UpsertResult {
  readonly group: GroupRecord;
  readonly created: boolean;
}

/**
 * The groups, keyed by (team, user_group_id) and by token. Every method is synchronous, so
 * each call applies atomically however many requests are in flight.
 */
export class GroupStore {
  readonly #byTeam = new Map<number, Map<string, GroupRecord>>();
  // Tokens are unique across teams; lookups still check the team so one key cannot rotate another's group.
  readonly #byToken = new Map<string, GroupRecord>();
  readonly #onChange: () => void;
  readonly #now: () => Date;

  /**
   * @throws Error when two records share a (team, user_group_id) or a token
   */
  constructor(records: readonly GroupRecord[], onChange: () => void = () => undefined, now: () => Date = () => new Date()) {
    for (const record of records) {
      if (this.find(record.teamId, record.userGroupId) !== undefined) {
        throw new Error(`two groups of team ${record.teamId} have user_group_id ${JSON.stringify(record.userGroupId)}`);
      }
      if (this.#byToken.has(record.token)) {
        throw new Error(`two groups have the same token (one is user_group_id ${JSON.stringify(record.userGroupId)})`);
      }
      this.#put(record);
    }
    this.#onChange = onChange;
    this.#now = now;
  }

  find(teamId: number, userGroupId: string): GroupRecord | undefined {
    return this.#byTeam.get(teamId)?.get(userGroupId);
  }

  findByToken(teamId: number, token: string): GroupRecord | undefined {
    const group = this.#byToken.get(token);
    return group?.teamId === teamId ? group : undefined;
  }

  /** Creates the group or replaces its name, mapping and properties; the token survives updates. */
  upsert(team: Team, request: UpsertRequest): UpsertResult {
    const existing = this.find(team.id, request.userGroupId);
    const now = this.#now().toISOString();
    const group: GroupRecord = {
      teamId: team.id,
      userGroupId: request.userGroupId,
      name: request.name,
      mapping: request.mapping,
      properties: request.properties,
      environmentTag: team.environmentTag,
      token: existing?.token ?? this.#unusedToken(),
      rotations: existing?.rotations ?? 0,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    };
    this.#put(group);
    this.#onChange();
    return { group, created: existing === undefined };
  }

  /** Gives the group holding currentToken a new token; the old one stops matching at once. */
  rotate(teamId: number, currentToken: string): GroupRecord | undefined {
    const existing = this.findByToken(teamId, currentToken);
    if (existing === undefined) return undefined;
    const group: GroupRecord = {
      ...existing,
      token: this.#unusedToken(),
      rotations: existing.rotations + 1,
      updatedAt: this.#now().toISOString(),
    };
    this.#byToken.delete(existing.token);
    this.#put(group);
    this.#onChange();
    return group;
  }

  /** One team's groups, or with no team all of them, in creation order per team. */
  list(teamId?: number): GroupRecord[] {
    if (teamId !== undefined) return [...(this.#byTeam.get(teamId)?.values() ?? [])];
    return [...this.#byTeam.values()].flatMap((groups) => [...groups.values()]);
  }

  get size(): number {
    return this.#byToken.size;
  }

  #put(group: GroupRecord): void {
    let groups = this.#byTeam.get(group.teamId);
    if (groups === undefined) {
      groups = new Map();
      this.#byTeam.set(group.teamId, groups);
    }
    groups.set(group.userGroupId, group);
    this.#byToken.set(group.token, group);
  }

  #unusedToken(): string {
    // A collision among 62^64 tokens will not happen, but a duplicate would merge two groups' identities.
    for (;;) {
      const token = newToken();
      if (!this.#byToken.has(token)) return token;
    }
  }
}
