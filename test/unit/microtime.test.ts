import { describe, expect, it } from 'vitest';
import { microTime } from '../../src/kube/event-recorder.js';

describe('microTime', () => {
  it.each<[number, string]>([
    [0, '1970-01-01T00:00:00.000000Z'],
    [1_700_000_000_123, '2023-11-14T22:13:20.123000Z'],
    [1_700_000_000_001, '2023-11-14T22:13:20.001000Z'],
    [1_700_000_000_000, '2023-11-14T22:13:20.000000Z'],
  ])('%d → %s', (ms, text) => {
    expect(microTime(ms)).toBe(text);
  });

  it('always has exactly six fractional digits and a Z', () => {
    for (const ms of [Date.now(), 1, 999, 86_399_999, 4_102_444_800_000]) {
      expect(microTime(ms)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      expect(Date.parse(microTime(ms))).toBe(ms);
    }
  });
});
