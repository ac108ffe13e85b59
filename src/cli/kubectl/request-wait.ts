// Writes a request annotation and follows the UserGroup until the operator handles it: `rotate` and `sync` share it.
import type { UserGroup } from '../../api/usergroup.js';
import { formatGoDuration } from '../../platform/go-duration.js';
import { sleep } from '../../platform/sleep.js';
import type { Io } from './io.js';
import type { Observation, UserGroupAccess } from './usergroup-api.js';

/**
 * The shape `rotate` and `sync` share: write a new value of a request annotation (with a resourceVersion
 * precondition, so the checks made on the object read still hold), then follow the object until the controller
 * has handled that value, failed, or the timeout passed.
 */

export interface RequestArgs {
  readonly namespace: string;
  readonly name: string;
  readonly timeoutMs: number;
  readonly wait: boolean;
}

export interface RequestDeps {
  readonly api: UserGroupAccess;
  readonly io: Io;
  readonly now: () => number;
}

/** Still waiting: the Ready condition when it is False for the current spec, and why waiting on is worth it. */
export interface Waiting {
  readonly kind: 'waiting';
  readonly blocker: { readonly reason: string; readonly message: string } | undefined;
  readonly because: 'in-progress' | 'retrying' | 'predates-request';
}

/** The request handled (`Done`), or failed: the wait ends. */
export type Decided<Done> = Done | { readonly kind: 'failed'; readonly reason: string; readonly message: string };

/** What one observation tells about the request; anything but `waiting` ends the wait. */
export type Judged<Done> = Decided<Done> | Waiting;

export interface RequestObservation {
  /** undefined: the UserGroup was deleted. */
  readonly ug: UserGroup | undefined;
  /** Written after the request (a watch event after the annotating PATCH): only a fresh failure proves the request failed. */
  readonly fresh: boolean;
}

/** One kind of request: its annotation, the checks before it, and how the controller's answer is read. */
export interface RequestKind<Done extends { readonly kind: string }> {
  readonly annotation: string;
  /** "rotation", "sync": in messages. */
  readonly noun: string;
  /** What the timeout message says was awaited: "to rotate its token". */
  readonly awaited: string;
  /** Said of a failure older than the request: "(the token is rotated once that is fixed)". */
  readonly onceFixed: string;
  check(ug: UserGroup): { ok: true } | { ok: false; message: string };
  newValue(nowMs: number, ug: UserGroup): string;
  judge(requested: string, requestedAtMs: number, nowMs: number, observation: RequestObservation): Judged<Done>;
}

export type RequestResult<Done> =
  /** Refused before the request, or the object kept changing: the message is printed already. */
  | { readonly kind: 'refused' }
  /** --no-wait: the annotation is set. */
  | { readonly kind: 'requested'; readonly value: string }
  | { readonly kind: 'decided'; readonly value: string; readonly outcome: Decided<Done> }
  | { readonly kind: 'timeout'; readonly value: string; readonly last: Waiting };

/** Another writer between our read and our patch: re-read and re-check, a few times at most. */
const MAX_ANNOTATE_ATTEMPTS = 5;
/** A watch that carried no byte for this long may be dead without closing: re-read and watch again. */
const WATCH_INACTIVITY_MS = 15_000;
/** Pause before re-watching after a failed watch (e.g. no watch permission: this becomes a slow poll). */
const REWATCH_DELAY_MS = 1_000;

/** Sets the annotation to a new value and, unless --no-wait, waits for the controller's answer. */
export async function requestAndWait<Done extends { readonly kind: string }>(
  kind: RequestKind<Done>,
  request: RequestArgs,
  deps: RequestDeps,
): Promise<RequestResult<Done>> {
  const { api, io } = deps;
  const ref = `usergroup/${request.name}`;
  let annotated: { ug: UserGroup; value: string; at: number } | undefined;
  for (let attempt = 1; attempt <= MAX_ANNOTATE_ATTEMPTS && !annotated; attempt++) {
    const ug = await api.get(request.namespace, request.name);
    if (!ug) return notFound(request, io);
    const allowed = kind.check(ug);
    if (!allowed.ok) {
      io.err(`error: ${allowed.message}\n`);
      return { kind: 'refused' };
    }
    const at = deps.now();
    const value = kind.newValue(at, ug);
    const result = await api.annotate(request.namespace, request.name, kind.annotation, value, ug.metadata.resourceVersion);
    if (result.kind === 'not-found') return notFound(request, io);
    if (result.kind === 'annotated') annotated = { ug: result.ug, value, at };
  }
  if (!annotated) {
    io.err(`error: ${ref} kept changing while the ${kind.noun} was requested (${MAX_ANNOTATE_ATTEMPTS} attempts); try again\n`);
    return { kind: 'refused' };
  }
  if (!request.wait) return { kind: 'requested', value: annotated.value };
  const waited = await waitForAnswer(kind, request, deps, annotated);
  return waited.kind === 'timeout' ? { ...waited, value: annotated.value } : { kind: 'decided', value: annotated.value, outcome: waited.outcome };
}

/**
 * Follows the object with a watch from the PATCH's resourceVersion until the request is handled, fails, or the
 * timeout passes. When a watch ends early (the server's timeout, a 410, a dead connection, no watch permission)
 * the object is read again and the watch resumed, so no update is missed.
 */
async function waitForAnswer<Done extends { readonly kind: string }>(
  kind: RequestKind<Done>,
  request: RequestArgs,
  deps: RequestDeps,
  annotated: { ug: UserGroup; value: string; at: number },
): Promise<{ kind: 'decided'; outcome: Decided<Done> } | { kind: 'timeout'; last: Waiting }> {
  const { api, io } = deps;
  const ref = `usergroup/${request.name}`;
  const deadline = annotated.at + request.timeoutMs;
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), Math.max(0, deadline - deps.now()));

  let last: Waiting = { kind: 'waiting', blocker: undefined, because: 'in-progress' };
  let lastReported = '';
  let decided: Decided<Done> | undefined;
  /**
   * Judges one observation. A new blocking reason is reported once, so the user sees why it
   * takes long; retries that only change the message stay quiet.
   */
  const observe = (ug: UserGroup | undefined, fresh: boolean): void => {
    const progress = kind.judge(annotated.value, annotated.at, deps.now(), { ug, fresh });
    if (!isWaiting(progress)) {
      decided = progress;
      return;
    }
    last = progress;
    const key = progress.blocker ? `${progress.because}|${progress.blocker.reason}` : '';
    if (key && key !== lastReported) {
      lastReported = key;
      io.err(`${ref}: ${describeWait(kind, progress)}; waiting up to ${formatGoDuration(request.timeoutMs)}\n`);
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
  return decided ? { kind: 'decided', outcome: decided } : { kind: 'timeout', last };
}

function isWaiting<Done>(progress: Judged<Done>): progress is Waiting {
  return (progress as { kind: string }).kind === 'waiting';
}

/** Why the wait goes on, for the person at the terminal. */
export function describeWait(kind: Pick<RequestKind<never>, 'onceFixed'>, progress: Waiting): string {
  if (!progress.blocker) return 'the operator has not handled the request yet (is it running, and does it watch this namespace?)';
  const { reason, message } = progress.blocker;
  switch (progress.because) {
    case 'retrying':
      return `Ready=False ${reason}: ${message} (the operator retries)`;
    case 'predates-request':
      return `Ready=False ${reason}: ${message} ${kind.onceFixed}`;
    case 'in-progress':
      return `Ready=False ${reason}: ${message}`;
  }
}

function notFound(request: RequestArgs, io: Io): { kind: 'refused' } {
  io.err(`error: usergroup "${request.name}" not found in namespace "${request.namespace}"\n`);
  return { kind: 'refused' };
}
