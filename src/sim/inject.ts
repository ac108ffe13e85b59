// Answers a simulator call with its injected fault: errors, hangs, drips, malformed or hostile bodies.
import type { ServerResponse } from 'node:http';
import type { Faults, InjectedFault } from './faults.js';
import { jsonHeaders, sendFailure, sendJson, sendRaw } from './http-io.js';
import { failed, type RotatedGroup, type UpsertedGroup } from './responses.js';

export const DRIP_INTERVAL_MS = 500;
const HUGE_BODY_BYTES = 5 * 1024 * 1024;
const NOT_APPLIED = 'the operation was not applied';

let hugePadding: string | undefined;

/** The user_group a real answer would carry, without its token (the operation is not applied). */
export type GroupPreview = Omit<RotatedGroup, 'token'> & Partial<Omit<UpsertedGroup, keyof RotatedGroup>>;

export interface Injection {
  readonly fault: InjectedFault;
  readonly response: ServerResponse;
  readonly faults: Faults;
  readonly preview: GroupPreview;
  /** Aborted when the simulator stops, which ends a drip. */
  readonly stopping: AbortSignal;
}

/**
 * Answers a call with an injected fault instead of applying it. Hostile answers look
 * plausible at first glance (200, JSON content type) so a client has to check them properly.
 */
export function injectFault({ fault, response, faults, preview, stopping }: Injection): void {
  switch (fault) {
    case 'injected_5xx':
      sendFailure(response, 503, `service unavailable (injected fault); ${NOT_APPLIED}`);
      return;
    case 'injected_429':
      sendFailure(response, 429, `rate limit exceeded (injected fault); retry after ${faults.retryAfterSeconds} s; ${NOT_APPLIED}`, {
        'retry-after': String(faults.retryAfterSeconds),
      });
      return;
    case 'injected_hang':
      // No answer: the socket stays open until the client gives up or the simulator stops.
      return;
    case 'injected_malformed_json':
      sendRaw(response, 200, `{"success":1,"user_group":{"team_id":${preview.team_id},"token":`);
      return;
    case 'injected_success_zero':
      sendJson(response, 200, failed(`request failed (injected fault); ${NOT_APPLIED}`));
      return;
    case 'injected_missing_token':
      sendJson(response, 200, { success: 1, user_group: preview });
      return;
    case 'injected_empty_token':
      sendJson(response, 200, { success: 1, user_group: { ...preview, token: '' } });
      return;
    case 'injected_huge_body':
      hugePadding ??= 'x'.repeat(HUGE_BODY_BYTES);
      sendRaw(response, 200, `{"user_group":${JSON.stringify(preview)},"padding":"${hugePadding}"}`);
      return;
    case 'injected_slow_drip':
      drip(response, JSON.stringify(failed(`slow answer (injected fault); ${NOT_APPLIED}`)), stopping);
      return;
  }
}

/**
 * Sends correct headers, then the body a byte at a time. The body says success 0, so a
 * client patient enough to read it all still learns that nothing was applied.
 */
function drip(response: ServerResponse, text: string, stopping: AbortSignal): void {
  const payload = Buffer.from(text, 'utf8');
  response.writeHead(200, jsonHeaders(payload.length));
  response.flushHeaders();
  let sent = 0;
  const timer = setInterval(() => {
    if (response.destroyed) {
      stop();
      return;
    }
    response.write(payload.subarray(sent, sent + 1));
    sent += 1;
    if (sent >= payload.length) {
      stop();
      response.end();
    }
  }, DRIP_INTERVAL_MS);
  const stop = (): void => {
    clearInterval(timer);
    stopping.removeEventListener('abort', stop);
  };
  stopping.addEventListener('abort', stop);
  response.on('close', stop);
}
