// `kubectl usergroup rotate`: requests a token rotation and reports how it ended.
import { formatGoDuration } from '../../platform/go-duration.js';
import { describeWait, requestAndWait, type RequestArgs, type RequestDeps } from './request-wait.js';
import { ROTATION_REQUEST } from './rotation-outcome.js';

export type RotateRequest = RequestArgs;
export type RotateDeps = RequestDeps;

/** `kubectl usergroup rotate`: request a rotation, then (unless --no-wait) wait for its outcome. Resolves with the exit code. */
export async function rotateCommand(request: RotateRequest, deps: RotateDeps): Promise<number> {
  const { io } = deps;
  const ref = `usergroup/${request.name}`;
  const result = await requestAndWait(ROTATION_REQUEST, request, deps);
  switch (result.kind) {
    case 'refused':
      return 1;
    case 'requested':
      io.out(`${ref} rotation requested (${ROTATION_REQUEST.annotation}=${result.value})\n`);
      return 0;
    case 'timeout': {
      // With no failure to show, the request may be waiting for its namespace's budget: the Event says so.
      const hint = result.last.blocker ? '' : `; rotation requests wait their turn beyond a namespace's budget (see kubectl events -n ${request.namespace})`;
      io.err(
        `error: timed out after ${formatGoDuration(request.timeoutMs)} waiting for ${ref} ${ROTATION_REQUEST.awaited} (request "${result.value}"): ${describeWait(ROTATION_REQUEST, result.last)}${hint}\n`,
      );
      return 1;
    }
    case 'decided': {
      const { outcome } = result;
      if (outcome.kind === 'rotated') {
        io.out(`${ref} token rotated at ${outcome.at}\n`);
        return 0;
      }
      io.err(`error: ${ref} rotation failed: ${outcome.reason}: ${outcome.message}\n`);
      return 1;
    }
  }
}
