// The e2e suite's dead-token window (test/e2e/support/token-window.ts) on timelines written out by hand.
import { describe, expect, it } from 'vitest';
import { percentile, summary, tokenWindows, type Issued } from '../e2e/support/token-window.js';

const tokens: Issued[] = [
  { at: 0, sha: 't0' },
  { at: 10_000, sha: 't1' },
  { at: 20_000, sha: 't2' },
];

describe('tokenWindows', () => {
  it('a mounted file: from the POST to the first and to the last Pod reading the new token', () => {
    const pods = [
      {
        pod: 'a',
        seen: [
          { at: 100, sha: 't0' },
          { at: 10_400, sha: 't1' },
          { at: 20_300, sha: 't2' },
        ],
      },
      {
        pod: 'b',
        seen: [
          { at: 200, sha: 't0' },
          { at: 11_500, sha: 't1' },
          { at: 20_900, sha: 't2' },
        ],
      },
    ];
    expect(tokenWindows(tokens, pods)).toEqual([
      { rotation: 1, firstMs: 400, lastMs: 1_500 },
      { rotation: 2, firstMs: 300, lastMs: 900 },
    ]);
  });

  it('a Pod that skips a token (read only a later one) closes the earlier window when it reads the later one', () => {
    const pods = [
      {
        pod: 'slow',
        seen: [
          { at: 100, sha: 't0' },
          { at: 25_000, sha: 't2' },
        ],
      },
    ];
    expect(tokenWindows(tokens, pods)).toEqual([
      { rotation: 1, firstMs: 15_000, lastMs: 15_000 },
      { rotation: 2, firstMs: 5_000, lastMs: 5_000 },
    ]);
  });

  it('restarted Pods: the first new Pod opens the service again, the last old Pod stopping closes the window', () => {
    const pods = [
      { pod: 'old-1', seen: [{ at: 100, sha: 't0' }], stoppedAt: 13_000 },
      { pod: 'old-2', seen: [{ at: 100, sha: 't0' }], stoppedAt: 16_000 },
      { pod: 'new-1', seen: [{ at: 12_000, sha: 't1' }], stoppedAt: 21_500 },
      { pod: 'new-2', seen: [{ at: 15_000, sha: 't1' }], stoppedAt: 23_000 },
      { pod: 'newer-1', seen: [{ at: 21_000, sha: 't2' }] },
      { pod: 'newer-2', seen: [{ at: 22_500, sha: 't2' }] },
    ];
    expect(tokenWindows(tokens, pods)).toEqual([
      { rotation: 1, firstMs: 2_000, lastMs: 6_000 },
      { rotation: 2, firstMs: 1_000, lastMs: 3_000 },
    ]);
  });

  it('a Pod still on an old token at the end of its log is an incomplete measurement, not a figure', () => {
    expect(() =>
      tokenWindows(tokens, [
        {
          pod: 'stuck',
          seen: [
            { at: 100, sha: 't0' },
            { at: 10_500, sha: 't1' },
          ],
        },
      ]),
    ).toThrow(/stuck still holds/);
    expect(() => tokenWindows(tokens.slice(0, 2), [{ pod: 'never', seen: [{ at: 100, sha: 't0' }], stoppedAt: 11_000 }])).toThrow(/no Pod logged/);
  });
});

describe('percentile and summary', () => {
  it('nearest rank, in seconds with one decimal', () => {
    const values = Array.from({ length: 20 }, (_, i) => (i + 1) * 100);
    expect(percentile(values, 50)).toBe(1_000);
    expect(percentile(values, 99)).toBe(2_000);
    expect(summary([1_240, 360, 2_050])).toEqual({ p50: 1.2, p99: 2.1, max: 2.1 });
  });
});
