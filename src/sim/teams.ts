// The simulator's teams: one per API key, with a stable id, the keys held only as digests.
import { createHash } from 'node:crypto';
import { sha256Hex } from './token.js';

export type EnvironmentTag = 'Customer' | 'Testing';

/** Each API key is its own team: groups, stats and admin views are scoped to it. */
export interface Team {
  readonly id: number;
  readonly environmentTag: EnvironmentTag;
}

export type Authentication = { readonly ok: true; readonly team: Team } | { readonly ok: false; readonly message: string };

const MAX_TEAM_ID = 2_147_483_647;

/**
 * A team id derived from the key, so it is the same on every start and for any order of
 * keys, and groups in a state file find their team again. It fits a signed 32-bit int.
 */
export function teamIdForKey(apiKey: string): number {
  const digest = createHash('sha256').update('usergroup-sim team\0').update(apiKey, 'utf8').digest();
  return (digest.readUInt32BE(0) % (MAX_TEAM_ID - 1)) + 1;
}

/** Printable ASCII without spaces: what fits in "Authorization: Token <API_KEY>". */
function isKeyShaped(apiKey: string): boolean {
  return /^[\x21-\x7e]+$/.test(apiKey);
}

/**
 * The configured API keys. Keys are held only as SHA-256 digests: lookups hash the
 * presented key, so no key sits in a map or error message that could be printed.
 */
export class ApiKeys {
  readonly #teams: ReadonlyMap<string, Team>;

  /**
   * @param apiKeys keys whose groups are tagged Customer
   * @param testingApiKeys keys whose groups are tagged Testing; a key in both lists is a testing key
   * @throws Error when no key is given, a key is empty or has spaces, or two keys map to one team
   */
  constructor(apiKeys: readonly string[], testingApiKeys: readonly string[] = []) {
    const teams = new Map<string, Team>();
    const byId = new Map<number, string>();
    const testing = new Set(testingApiKeys);
    for (const [index, apiKey] of [...apiKeys, ...testingApiKeys].entries()) {
      if (!isKeyShaped(apiKey)) {
        throw new Error(`API key #${index + 1} is empty or contains spaces or non-ASCII characters`);
      }
      const digest = sha256Hex(apiKey);
      if (teams.has(digest)) continue;
      const id = teamIdForKey(apiKey);
      if (byId.has(id)) {
        throw new Error(`API keys #${byId.get(id)} and #${index + 1} map to the same team id; use another key`);
      }
      byId.set(id, String(index + 1));
      teams.set(digest, { id, environmentTag: testing.has(apiKey) ? 'Testing' : 'Customer' });
    }
    if (teams.size === 0) {
      throw new Error('at least one API key is required');
    }
    this.#teams = teams;
  }

  teamForKey(apiKey: string): Team | undefined {
    return this.#teams.get(sha256Hex(apiKey));
  }

  /** Checks an Authorization header value against "Token <API_KEY>". */
  authenticate(header: string | undefined): Authentication {
    if (header === undefined || header.trim() === '') {
      return { ok: false, message: 'missing Authorization header; expected "Authorization: Token <API_KEY>"' };
    }
    const match = /^\s*(\S+)\s+(\S+)\s*$/.exec(header);
    // Auth schemes are case-insensitive (RFC 9110), so "token" is accepted too.
    if (match === null || match[1]?.toLowerCase() !== 'token' || match[2] === undefined) {
      return { ok: false, message: 'Authorization header must be "Token <API_KEY>"' };
    }
    const team = this.teamForKey(match[2]);
    return team === undefined ? { ok: false, message: 'invalid API key' } : { ok: true, team };
  }
}
