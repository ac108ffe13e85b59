// The WatchList protocol's decisions (KEP-3157): reading the initial events, their end, and a refusal (pure).
import { isRecord } from '../platform/json-value.js';
import type { WatchEnd, WatchEvent } from './watch-stream.js';

/*
 * The WatchList protocol (KEP-3157), as client-go's reflector uses it with its WatchListClient feature: one
 * watch request with sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true. The
 * apiserver sends the current state as ADDED events, then a BOOKMARK annotated k8s.io/initial-events-end
 * whose resourceVersion is that state's, then goes on as an ordinary watch on the same connection. The pure
 * decisions live here; the informer does the I/O.
 */

/** The annotation on the bookmark that ends a watch-list's initial events (metav1.InitialEventsAnnotationKey). */
export const INITIAL_EVENTS_END_ANNOTATION = 'k8s.io/initial-events-end';

/**
 * What one event of a watch-list means before its initial events have ended: an object of the state being
 * sent (ADDED; MODIFIED too, which client-go applies the same way should a server send one), an object gone
 * from it (DELETED), an ordinary bookmark (nothing to do: the end bookmark carries the resourceVersion), or
 * the end of the initial events.
 */
export type InitialEventMeaning = 'object' | 'deleted' | 'bookmark' | 'end';

export function initialEventMeaning(event: WatchEvent): InitialEventMeaning {
  switch (event.type) {
    case 'ADDED':
    case 'MODIFIED':
      return 'object';
    case 'DELETED':
      return 'deleted';
    case 'BOOKMARK':
      return isInitialEventsEnd(event) ? 'end' : 'bookmark';
  }
}

/** Whether the event is the bookmark that ends a watch-list's initial events. */
export function isInitialEventsEnd(event: WatchEvent): boolean {
  if (event.type !== 'BOOKMARK') return false;
  const metadata = event.object['metadata'];
  const annotations = isRecord(metadata) ? metadata['annotations'] : undefined;
  return isRecord(annotations) && annotations[INITIAL_EVENTS_END_ANNOTATION] === 'true';
}

/** The resourceVersion of the event's object ('' when it has none). */
export function eventResourceVersion(event: WatchEvent): string {
  const metadata = event.object['metadata'];
  const rv = isRecord(metadata) ? metadata['resourceVersion'] : undefined;
  return typeof rv === 'string' ? rv : '';
}

/** How a watch-list request went that ended before its initial-events-end bookmark. */
export interface UnfinishedWatchList {
  readonly end: WatchEnd;
  /** The resourceVersion it asked for ('' = the latest state, a consistent read). */
  readonly resourceVersion: string;
  /** How long it ran, and the timeoutSeconds it asked for (in ms). */
  readonly elapsedMs: number;
  readonly timeoutMs: number;
}

/**
 * What the informer does after a watch-list request ended before its initial events did:
 * - `latest`: ask again at once for the latest state (resourceVersion ""), as client-go does when the
 *   resourceVersion it asked for is expired (410) or ahead of this apiserver ("Too large resource version",
 *   e.g. an apiserver that restarted with an older watch cache);
 * - `backoff`: the apiserver is away or overloaded (connection refused, 429): a paged LIST now would only
 *   add load; wait and try the watch-list again (client-go's isWatchErrorRetriable);
 * - `list`: make this (re)list a paged LIST; `remember` when the apiserver does not do watch-lists at all,
 *   so later re-lists go straight to LIST.
 */
export type AfterUnfinishedWatchList =
  { readonly next: 'latest' } | { readonly next: 'backoff' } | { readonly next: 'list'; readonly remember: boolean; readonly reason: string };

export function afterUnfinishedWatchList(attempt: UnfinishedWatchList): AfterUnfinishedWatchList {
  const { end } = attempt;
  if (end.kind === 'failed' && isWatchListRefusal(end.status, end.message)) {
    return { next: 'list', remember: true, reason: 'the apiserver refused the watch-list request' };
  }
  const expired = end.kind === 'gone' || (end.kind === 'failed' && /too large resource version/i.test(end.message));
  if (expired && attempt.resourceVersion !== '') return { next: 'latest' };
  if (end.kind === 'failed' && (end.status === 429 || end.message.startsWith('ECONNREFUSED'))) return { next: 'backoff' };
  // A server that ignores sendInitialEvents (nothing that kube-apiserver >= 1.27 does: older ones and ones
  // with the feature off refuse resourceVersionMatch on a watch, which is the refusal above) would send its
  // state as ADDED events and then watch on, never sending the end bookmark. Such a watch ends at its
  // timeoutSeconds (the informer also gives up on its own a little after, should the server not end it): a
  // watch-list that ran its whole timeout without its initial events ending will not do better next time.
  // A connection that ends sooner (an apiserver shutting down, a network failure) says nothing of the kind.
  if (end.kind === 'closed' && attempt.elapsedMs >= attempt.timeoutMs) {
    return { next: 'list', remember: true, reason: 'no initial-events-end bookmark within the watch timeout' };
  }
  return { next: 'list', remember: false, reason: `the watch-list ended before its initial events did (${end.kind})` };
}

/**
 * Whether a failed watch-list request was refused for being a watch-list: a 400 or 422 (our ordinary
 * watches, which the apiserver takes, differ only by the watch-list parameters), or another client error
 * whose message names them (e.g. a 403 from something in front of the apiserver). Not 408, 410 or 429,
 * which are about the moment, not the request.
 */
export function isWatchListRefusal(status: number | undefined, message: string): boolean {
  if (status === undefined || status < 400 || status >= 500 || status === 408 || status === 410 || status === 429) return false;
  if (status === 400 || status === 422) return true;
  return /sendInitialEvents|resourceVersionMatch|watch-?list/i.test(message);
}
