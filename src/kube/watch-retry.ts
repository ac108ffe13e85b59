// After a watch ends: watch again from the same resourceVersion, or re-list (pure, as client-go's reflector).
import type { WatchEnd } from './watch-stream.js';

/** What the informer does after one watch connection ended. */
export type AfterWatch =
  | { readonly next: 'watch'; readonly backoff: boolean; readonly resetBackoff: boolean; readonly failures: number }
  | { readonly next: 'relist'; readonly because: 'gone' | 'repeated failures'; readonly backoff: boolean };

/** Failed watches in a row (none of them delivering an event) after which the resourceVersion is suspect. */
export const RELIST_AFTER_FAILURES = 3;

/**
 * Decides, as client-go's reflector does, between watching again from the same resourceVersion and
 * re-listing. `delivered` says whether this watch delivered any event (bookmarks included): a watch that
 * worked and then broke says nothing against our resourceVersion, so it starts a new count of failures
 * and a new backoff, rather than adding to failures from long before (which would make the re-list after a
 * frozen process look like "repeated failures" instead of the 410 it would meet).
 */
export function afterWatch(end: WatchEnd, delivered: boolean, failuresBefore: number): AfterWatch {
  const failures = delivered ? 0 : failuresBefore;
  switch (end.kind) {
    case 'closed':
      return { next: 'watch', backoff: false, resetBackoff: true, failures: 0 };
    case 'gone':
      return { next: 'relist', because: 'gone', backoff: false };
    case 'silent':
      return { next: 'watch', backoff: false, resetBackoff: delivered, failures };
    case 'failed': {
      // A 429 (e.g. a restarted apiserver still filling its watch cache) or a refused connection says
      // nothing about our resourceVersion: watch again from where we were.
      if (end.status === 429 || end.message.startsWith('ECONNREFUSED')) return { next: 'watch', backoff: true, resetBackoff: delivered, failures };
      if (failures + 1 >= RELIST_AFTER_FAILURES) return { next: 'relist', because: 'repeated failures', backoff: true };
      return { next: 'watch', backoff: true, resetBackoff: delivered, failures: failures + 1 };
    }
  }
}
