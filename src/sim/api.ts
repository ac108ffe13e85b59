// The simulator's PUT and POST /api/user: validation, the account's rate limit, injected faults, the operation.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AccountRateLimit } from './account-limit.js';
import { planCall, type Faults } from './faults.js';
import { readBody, sendFailure, sendJson } from './http-io.js';
import { injectFault, type GroupPreview } from './inject.js';
import { parseJsonObject } from './json.js';
import type { RandomSource } from './random.js';
import { parseRotateRequest, parseUpsertRequest, type RotateRequest, type UpsertRequest } from './requests.js';
import { hiddenFields, rotatedGroup, succeeded, upsertedGroup, type HiddenFieldNames } from './responses.js';
import type { Operation, StatsRecorder } from './stats.js';
import type { GroupStore } from './store.js';
import type { ApiKeys, Team } from './teams.js';

export interface ApiContext {
  readonly keys: ApiKeys;
  readonly store: GroupStore;
  readonly stats: StatsRecorder;
  readonly faults: () => Faults;
  readonly random: RandomSource;
  readonly stopping: AbortSignal;
  /** Request bodies above this are answered 413 (default MAX_BODY_BYTES). */
  readonly maxBodyBytes: number;
  readonly hiddenFields: HiddenFieldNames;
  readonly accountLimit: AccountRateLimit;
}

type Call = { readonly operation: 'upsert'; readonly request: UpsertRequest } | { readonly operation: 'rotate'; readonly request: RotateRequest };

/**
 * PUT /api/user (upsert) and POST /api/user (rotate). Order: body size (413), latency,
 * authentication (401), body validation (400), the account's rate limit (429), then either an injected fault or
 * the operation. Faults therefore hit only calls that would otherwise succeed or name an
 * unknown token, and 401/400 stay deterministic whatever the knobs are.
 */
export async function handleUserCall(context: ApiContext, operation: Operation, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const { stats } = context;
  const auth = context.keys.authenticate(request.headers.authorization);
  const teamId = auth.ok ? auth.team.id : undefined;
  const body = await readBody(request, context.maxBodyBytes);
  // Once stop() has begun the state may already be flushed: a late mutation would be lost.
  if (context.stopping.aborted) return;
  if (!body.ok) {
    if (body.problem === 'aborted') return;
    if (body.problem === 'too_large') {
      stats.record(teamId, operation, 'payload_too_large');
      // Closing the connection spares reading the rest of an oversized upload.
      sendFailure(response, 413, `request body is larger than ${context.maxBodyBytes} bytes`, { connection: 'close' });
      return;
    }
  }

  const plan = planCall(context.faults(), context.random);
  if (plan.spiked) stats.recordSpike(teamId, operation);
  if (plan.delayMs > 0) {
    try {
      await sleep(plan.delayMs, undefined, { signal: context.stopping });
    } catch {
      return; // stopping: the socket is being destroyed
    }
  }
  // A client that gave up during the delay still gets its call applied, as with a real
  // service whose answer is lost on the way back.

  if (!auth.ok) {
    stats.record(undefined, operation, 'unauthorized');
    sendFailure(response, 401, auth.message, { 'www-authenticate': 'Token' });
    return;
  }
  const call = parseCall(operation, body.ok ? body.text : undefined);
  if (!call.ok) {
    stats.record(auth.team.id, operation, 'bad_request');
    sendFailure(response, 400, call.message);
    return;
  }

  const retryAfterSeconds = context.accountLimit.take(auth.team.id, context.faults().accountRequestsPerMinute);
  if (retryAfterSeconds > 0) {
    stats.record(auth.team.id, operation, 'account_rate_limited');
    sendFailure(response, 429, `rate limit of the account exceeded; retry after ${retryAfterSeconds} s; the operation was not applied`, {
      'retry-after': String(retryAfterSeconds),
    });
    return;
  }

  if (plan.fault !== undefined) {
    stats.record(auth.team.id, operation, plan.fault);
    injectFault({
      fault: plan.fault,
      response,
      faults: context.faults(),
      preview: preview(context, auth.team, call.value),
      stopping: context.stopping,
    });
    return;
  }

  if (call.value.operation === 'upsert') {
    const { group, created } = context.store.upsert(auth.team, call.value.request);
    stats.record(auth.team.id, 'upsert', created ? 'created' : 'updated');
    stats.recordUpsert(auth.team.id, group.userGroupId);
    sendJson(response, 200, succeeded(upsertedGroup(group, created, context.hiddenFields)));
    return;
  }
  const group = context.store.rotate(auth.team.id, call.value.request.currentToken);
  if (group === undefined) {
    stats.record(auth.team.id, 'rotate', 'unknown_token');
    sendFailure(response, 400, 'current_token does not match any user group');
    return;
  }
  stats.record(auth.team.id, 'rotate', 'ok');
  stats.recordRotation(auth.team.id, group.userGroupId);
  sendJson(response, 200, succeeded(rotatedGroup(group)));
}

function parseCall(operation: Operation, text: string | undefined): { ok: true; value: Call } | { ok: false; message: string } {
  if (text === undefined) return { ok: false, message: 'request body is not valid UTF-8' };
  if (text.trim() === '') return { ok: false, message: 'request body is empty; expected a JSON object' };
  const body = parseJsonObject(text, 'request body');
  if (!body.ok) return body;
  if (operation === 'upsert') {
    const request = parseUpsertRequest(body.value);
    return request.ok ? { ok: true, value: { operation, request: request.value } } : request;
  }
  const request = parseRotateRequest(body.value);
  return request.ok ? { ok: true, value: { operation, request: request.value } } : request;
}

/** What the answer would have said, read from the store without changing it. */
function preview(context: ApiContext, team: Team, call: Call): GroupPreview {
  if (call.operation === 'upsert') {
    const { request } = call;
    return {
      team_id: team.id,
      name: request.name,
      provided_id: request.userGroupId,
      ...(request.properties === undefined ? {} : { properties: request.properties }),
      ...hiddenFields(context.hiddenFields, context.store.find(team.id, request.userGroupId) === undefined, team.environmentTag),
    };
  }
  const group = context.store.findByToken(team.id, call.request.currentToken);
  return { team_id: team.id, name: group?.name ?? '', provided_id: group?.userGroupId ?? '' };
}
