// How the simulator's admin endpoints show a group: the token as its digest only.
import type { JsonObject } from './json.js';
import type { Mapping } from './requests.js';
import type { GroupRecord } from './store.js';
import type { EnvironmentTag } from './teams.js';
import { sha256Hex } from './token.js';

/** A group as the admin endpoints show it: the token only as its SHA-256, never itself. */
export interface SimGroupView {
  readonly teamId: number;
  readonly userGroupId: string;
  readonly name: string;
  readonly mapping: Mapping | null;
  readonly properties: JsonObject | null;
  readonly environmentTag: EnvironmentTag;
  /** Hex SHA-256 of the current token: lets a test check which token a client holds without exposing it. */
  readonly tokenSha256: string;
  readonly rotations: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export function groupView(group: GroupRecord): SimGroupView {
  return {
    teamId: group.teamId,
    userGroupId: group.userGroupId,
    name: group.name,
    // Copies, so a caller that edits a view cannot change the stored group.
    mapping: group.mapping === undefined ? null : structuredClone(group.mapping),
    properties: group.properties === undefined ? null : structuredClone(group.properties),
    environmentTag: group.environmentTag,
    tokenSha256: sha256Hex(group.token),
    rotations: group.rotations,
    createdAt: group.createdAt,
    updatedAt: group.updatedAt,
  };
}
