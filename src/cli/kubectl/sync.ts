// `kubectl usergroup sync`: requests one PUT of the group now and reports how it ended.
import { formatGoDuration } from '../../platform/go-duration.js';
import { describeWait, requestAndWait, type RequestArgs, type RequestDeps } from './request-wait.js';
import { SYNC_REQUEST } from './sync-outcome.js';

/**
 * `kubectl usergroup sync`: ask for one PUT of the group now (drift at the service is otherwise repaired only at
 * the periodic resync), then (unless --no-wait) wait until the operator records the request handled. Resolves
 * with the exit code, as `rotate` does.
 */
export async function syncCommand(request: RequestArgs, deps: RequestDeps): Promise<number> {
  const { io } = deps;
  const ref = `usergroup/${request.name}`;
  const result = await requestAndWait(SYNC_REQUEST, request, deps);
  switch (result.kind) {
    case 'refused':
      return 1;
    case 'requested':
      io.out(`${ref} sync requested (${SYNC_REQUEST.annotation}=${result.value})\n`);
      return 0;
    case 'timeout': {
      // With no failure to show, the request may be waiting for its namespace's budget: the Event says so.
      const hint = result.last.blocker ? '' : `; sync requests wait their turn beyond a namespace's budget (see kubectl events -n ${request.namespace})`;
      io.err(
        `error: timed out after ${formatGoDuration(request.timeoutMs)} waiting for ${ref} ${SYNC_REQUEST.awaited} (request "${result.value}"): ${describeWait(SYNC_REQUEST, result.last)}${hint}\n`,
      );
      return 1;
    }
    case 'decided': {
      const { outcome } = result;
      if (outcome.kind === 'synced') {
        io.out(`${ref} synced${outcome.lastSyncTime ? ` at ${outcome.lastSyncTime}` : ''}: Ready=${outcome.ready} ${outcome.reason}\n`);
        return 0;
      }
      io.err(`error: ${ref} sync failed: ${outcome.reason}: ${outcome.message}\n`);
      return 1;
    }
  }
}
