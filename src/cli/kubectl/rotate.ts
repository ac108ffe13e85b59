import { ROTATE_ANNOTATION } from '../../api/constants.js';
import type { UserGroup } from '../../api/usergroup.js';
import { formatGoDuration } from '../../platform/go-duration.js';
import type { Io } from './io.js';
import { checkRotatable, judgeRotation, newRequestValue, type RotationProgress } from './rotation-outcome.js';
import type { Observation, UserGroupAccess } from './usergroup-api.js';
import { sleep } from '../../platform/sleep.js';

export interface RotateRequest {
  readonly namespace: string;
  readonly name: string;
  readonly timeoutMs: number;
  readonly wait: boolean;
}

export interface RotateDeps {
  readonly api: UserGroupAccess;
  readonly io: Io;
  readonly now: () => number;
}

/** Another writer between our read and our patch: re-read and re-check, a few times at most. */
const MAX_ANNOTATE_ATTEMPTS = 5;
/** A watch that carried no byte for this long may be dead without closing: re-read and watch again. */
const WATCH_INACTIVITY_MS = 15_000;
/** Pause before re-watching after a failed watch (e.g. no watch permission: this becomes a slow poll). */
const REWATCH_DELAY_MS = 1_000;

/** `kubectl usergroup rotate`: request a rotation, then (unless --no-wait) wait for its outcome. Resolves with the exit code. */
export async function rotateCommand(request: RotateRequest, deps: RotateDeps): Promise<number> {
  const { api, io } = deps;
  const ref = `usergroup/${request.name}`;
  let annotated: { ug: UserGroup; value: string; at: number } | undefined;
  for (let attempt = 1; attempt <= MAX_ANNOTATE_ATTEMPTS && !annotated; attempt++) {
    const ug = await api.get(request.namespace, request.name);
    if (!ug) return notFound(request, io);
    const rotatable = checkRotatable(ug);
    if (!rotatable.ok) {
      io.err(`error: ${rotatable.message}\n`);
      return 1;
    }
    const at = deps.now();
    const value = newRequestValue(at, ug);
    const result = await api.annotate(request.namespace, request.name, ROTATE_ANNOTATION, value, ug.metadata.resourceVersion);
    if (result.kind === 'not-found') return notFound(request, io);
    if (result.kind === 'annotated') annotated = { ug: result.ug, value, at };
  }
  if (!annotated) {
    io.err(`error: ${ref} kept changing while the rotation was requested (${MAX_ANNOTATE_ATTEMPTS} attempts); try again\n`);
    return 1;
  }
  if (!request.wait) {
    io.out(`${ref} rotation requested (${ROTATE_ANNOTATION}=${annotated.value})\n`);
    return 0;
  }

  const outcome = await waitForRotation(request, deps, annotated);
  switch (outcome.kind) {
    case 'rotated':
      io.out(`${ref} token rotated at ${outcome.at}\n`);
      return 0;
    case 'failed':
      io.err(`error: ${ref} rotation failed: ${outcome.reason}: ${outcome.message}\n`);
      return 1;
    case 'timeout':
      io.err(
        `error: timed out after ${formatGoDuration(request.timeoutMs)} waiting for ${ref} to rotate its token (request "${annotated.value}"): ${describeWait(outcome.last)}\n`,
      );
      return 1;
  }
}

type WaitOutcome = Exclude<RotationProgress, { kind: 'waiting' }> | { readonly kind: 'timeout'; readonly last: RotationProgress & { kind: 'waiting' } };

/**
 * Follows the object with a watch from the PATCH's resourceVersion until the request
 * is handled, fails, or the timeout passes. When a watch ends early (the server's
 * timeout, a 410, a dead connection, no watch permission) the object is read again
 * and the watch resumed, so no update is missed.
 */
async function waitForRotation(request: RotateRequest, deps: RotateDeps, annotated: { ug: UserGroup; value: string; at: number }): Promise<WaitOutcome> {
  const { api, io } = deps;
  const ref = `usergroup/${request.name}`;
  const deadline = annotated.at + request.timeoutMs;
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), Math.max(0, deadline - deps.now()));

  let last: RotationProgress & { kind: 'waiting' } = { kind: 'waiting', blocker: undefined, because: 'in-progress' };
  let lastReported = '';
  let decided: Exclude<RotationProgress, { kind: 'waiting' }> | undefined;
  /**
   * Judges one observation. A new blocking reason is reported once, so the user sees why it
   * takes long; retries that only change the message (POST, then the recovery PUT) stay quiet.
   */
  const observe = (ug: UserGroup | undefined, fresh: boolean): void => {
    const progress = judgeRotation(annotated.value, annotated.at, deps.now(), { ug, fresh });
    if (progress.kind !== 'waiting') {
      decided = progress;
      return;
    }
    last = progress;
    const key = progress.blocker ? `${progress.because}|${progress.blocker.reason}` : '';
    if (key && key !== lastReported) {
      lastReported = key;
      io.err(`${ref}: ${describeWait(progress)}; waiting up to ${formatGoDuration(request.timeoutMs)}\n`);
    }
  };

  try {
    let resourceVersion = annotated.ug.metadata.resourceVersion;
    observe(annotated.ug, false);
    while (!decided && !timeout.signal.aborted) {
      const round = new AbortController();
      const stop = (): void => round.abort();
      timeout.signal.addEventListener('abort', stop, { once: true });
      const openedAt = deps.now();
      const end = await api.watchOne(request.namespace, request.name, {
        resourceVersion,
        signal: round.signal,
        timeoutSeconds: Math.max(1, Math.ceil((deadline - deps.now()) / 1_000)),
        inactivityMs: WATCH_INACTIVITY_MS,
        onObservation: (o: Observation) => {
          if (decided) return;
          if (o.kind === 'bookmark') {
            resourceVersion = o.resourceVersion;
            return;
          }
          if (o.kind === 'object') resourceVersion = o.ug.metadata.resourceVersion;
          // Every event of a watch started at the PATCH's resourceVersion was written after it.
          observe(o.kind === 'object' ? o.ug : undefined, true);
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- observe() may have decided
          if (decided) round.abort();
        },
      });
      timeout.signal.removeEventListener('abort', stop);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the watch's callbacks and the timer
      if (decided || timeout.signal.aborted) break;
      // The server ends a watch at timeoutSeconds: resume. One that ends at once is resumed after a pause, never in a spin.
      if (end.kind === 'closed' && deps.now() - openedAt >= REWATCH_DELAY_MS) continue;
      if (end.kind === 'failed' || end.kind === 'closed') await sleep(REWATCH_DELAY_MS, timeout.signal);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the timer may have fired during the sleep
      if (timeout.signal.aborted) break;
      // 410, a failed, silent or short-lived watch: read the object and resume from what we read.
      const ug = await api.get(request.namespace, request.name);
      if (ug) resourceVersion = ug.metadata.resourceVersion;
      observe(ug, ug !== undefined && ug.metadata.resourceVersion !== annotated.ug.metadata.resourceVersion);
    }
  } finally {
    clearTimeout(timer);
  }
  return decided ?? { kind: 'timeout', last };
}

function describeWait(progress: RotationProgress & { kind: 'waiting' }): string {
  if (!progress.blocker) return 'the operator has not handled the request yet (is it running, and does it watch this namespace?)';
  const { reason, message } = progress.blocker;
  switch (progress.because) {
    case 'retrying':
      return `Ready=False ${reason}: ${message} (the operator retries)`;
    case 'predates-request':
      return `Ready=False ${reason}: ${message} (the token is rotated once that is fixed)`;
    case 'in-progress':
      return `Ready=False ${reason}: ${message}`;
  }
}

function notFound(request: RotateRequest, io: Io): number {
  io.err(`error: usergroup "${request.name}" not found in namespace "${request.namespace}"\n`);
  return 1;
}
