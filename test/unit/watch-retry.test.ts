import { describe, expect, it } from 'vitest';
import { afterWatch, RELIST_AFTER_FAILURES } from '../../src/kube/watch-retry.js';
import type { WatchEnd } from '../../src/kube/watch-stream.js';

const reset: WatchEnd = { kind: 'failed', status: undefined, message: 'ECONNRESET' };

/** Runs a series of watch endings through afterWatch, as the informer's loop does. */
function replay(ends: readonly (readonly [WatchEnd, boolean])[]): string[] {
  let failures = 0;
  const out: string[] = [];
  for (const [end, delivered] of ends) {
    const after = afterWatch(end, delivered, failures);
    if (after.next === 'relist') {
      out.push(`relist: ${after.because}`);
      failures = 0;
    } else {
      out.push(`watch${after.backoff ? ' after backoff' : ''}`);
      failures = after.failures;
    }
  }
  return out;
}

describe('afterWatch: re-watch or re-list after a watch ended', () => {
  it('410 Gone re-lists at once', () => {
    expect(afterWatch({ kind: 'gone' }, false, 0)).toEqual({ next: 'relist', because: 'gone', backoff: false });
    expect(afterWatch({ kind: 'gone' }, true, 2)).toEqual({ next: 'relist', because: 'gone', backoff: false });
  });

  it('a watch the server closed is re-opened at once, with the failure count and backoff reset', () => {
    expect(afterWatch({ kind: 'closed' }, false, 2)).toEqual({ next: 'watch', backoff: false, resetBackoff: true, failures: 0 });
  });

  it(`re-lists after ${RELIST_AFTER_FAILURES} failed watches in a row that delivered nothing`, () => {
    expect(
      replay([
        [reset, false],
        [reset, false],
        [reset, false],
      ]),
    ).toEqual(['watch after backoff', 'watch after backoff', 'relist: repeated failures']);
  });

  it('a watch that delivered events before breaking starts a new count (failures long apart never add up to a re-list)', () => {
    // Two failures during an apiserver restart, then hours of healthy watching, then a frozen process's dead
    // connection: the next watch must go to the apiserver with the old resourceVersion (and meet the 410).
    expect(
      replay([
        [reset, false],
        [reset, false],
        [reset, true],
        [{ kind: 'gone' }, false],
      ]),
    ).toEqual(['watch after backoff', 'watch after backoff', 'watch after backoff', 'relist: gone']);
    expect(afterWatch(reset, true, 2)).toEqual({ next: 'watch', backoff: true, resetBackoff: true, failures: 1 });
  });

  it('a refused connection or a 429 never counts against the resourceVersion', () => {
    const refused: WatchEnd = { kind: 'failed', status: undefined, message: 'ECONNREFUSED 127.0.0.1:6443' };
    const busy: WatchEnd = { kind: 'failed', status: 429, message: 'HTTP 429: too many requests' };
    expect(
      replay([
        [refused, false],
        [busy, false],
        [refused, false],
        [busy, false],
        [refused, false],
      ]),
    ).toEqual(Array(5).fill('watch after backoff'));
    expect(afterWatch(refused, false, 2)).toEqual({ next: 'watch', backoff: true, resetBackoff: false, failures: 2 });
  });

  it('a silent watch is re-opened without backoff and without counting as a failure', () => {
    expect(afterWatch({ kind: 'silent', ms: 3000 }, false, 1)).toEqual({ next: 'watch', backoff: false, resetBackoff: false, failures: 1 });
  });
});
