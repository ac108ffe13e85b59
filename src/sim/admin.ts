// The simulator's /_sim/ admin endpoints: stats, fault knobs and groups, scoped to the caller's team.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseFaults, type Faults } from './faults.js';
import { readBody, sendFailure, sendJson } from './http-io.js';
import { parseJsonObject } from './json.js';
import type { StatsRecorder } from './stats.js';
import type { GroupStore } from './store.js';
import type { ApiKeys } from './teams.js';
import { groupView } from './views.js';

export interface AdminContext {
  readonly keys: ApiKeys;
  readonly store: GroupStore;
  readonly stats: StatsRecorder;
  readonly faults: () => Faults;
  readonly setFaults: (faults: Faults) => void;
}

const GROUP_PREFIX = '/_sim/groups/';

type Route = 'stats' | 'stats-reset' | 'faults' | 'groups' | { readonly group: string };

const METHODS: Readonly<Record<'stats' | 'stats-reset' | 'faults' | 'groups' | 'group', readonly string[]>> = {
  stats: ['GET'],
  'stats-reset': ['POST'],
  faults: ['GET', 'PUT'],
  groups: ['GET'],
  group: ['GET'],
};

function route(path: string): Route | undefined {
  switch (path) {
    case '/_sim/stats':
      return 'stats';
    case '/_sim/stats/reset':
      return 'stats-reset';
    case '/_sim/faults':
      return 'faults';
    case '/_sim/groups':
      return 'groups';
  }
  if (path.startsWith(GROUP_PREFIX) && path.length > GROUP_PREFIX.length) {
    return { group: path.slice(GROUP_PREFIX.length) };
  }
  return undefined;
}

/**
 * The simulator's own endpoints, for tests and benchmarks. They need a valid API key and
 * show only that key's team; the fault knobs are simulator-wide. No answer carries a token.
 */
export async function handleAdmin(context: AdminContext, path: string, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const target = route(path);
  if (target === undefined) {
    sendFailure(response, 404, 'not found; admin endpoints: GET /_sim/stats, POST /_sim/stats/reset, GET|PUT /_sim/faults, GET /_sim/groups[/<user_group_id>]');
    return;
  }
  const allowed = METHODS[typeof target === 'string' ? target : 'group'];
  const method = request.method ?? '';
  if (!allowed.includes(method)) {
    sendFailure(response, 405, `method ${method} is not allowed here; use ${allowed.join(' or ')}`, { allow: allowed.join(', ') });
    return;
  }
  const auth = context.keys.authenticate(request.headers.authorization);
  if (!auth.ok) {
    sendFailure(response, 401, auth.message, { 'www-authenticate': 'Token' });
    return;
  }
  const teamId = auth.team.id;

  if (typeof target !== 'string') {
    let userGroupId: string;
    try {
      userGroupId = decodeURIComponent(target.group);
    } catch {
      sendFailure(response, 400, 'the user_group_id in the path is not valid percent-encoding');
      return;
    }
    const group = context.store.find(teamId, userGroupId);
    if (group === undefined) sendFailure(response, 404, 'no user group with that user_group_id');
    else sendJson(response, 200, groupView(group));
    return;
  }
  switch (target) {
    case 'stats':
      sendJson(response, 200, context.stats.snapshot(teamId));
      return;
    case 'stats-reset':
      context.stats.reset(teamId);
      sendJson(response, 200, { success: 1 });
      return;
    case 'groups':
      sendJson(response, 200, { groups: context.store.list(teamId).map(groupView) });
      return;
    case 'faults':
      if (method === 'GET') {
        sendJson(response, 200, context.faults());
        return;
      }
      await replaceFaults(context, request, response);
      return;
  }
}

async function replaceFaults(context: AdminContext, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const body = await readBody(request);
  if (!body.ok) {
    if (body.problem === 'too_large') sendFailure(response, 413, 'request body is too large', { connection: 'close' });
    else if (body.problem === 'not_utf8') sendFailure(response, 400, 'request body is not valid UTF-8');
    return;
  }
  const input = parseJsonObject(body.text, 'request body');
  const faults = input.ok ? parseFaults(input.value) : input;
  if (!faults.ok) {
    sendFailure(response, 400, faults.message);
    return;
  }
  context.setFaults(faults.value);
  sendJson(response, 200, faults.value);
}
