import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Pause } from '../../src/platform/sleep.js';

describe('Pause', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const settled = (p: Promise<void>): { done: boolean } => {
    const state = { done: false };
    void p.then(() => (state.done = true));
    return state;
  };

  it('lasts its period when nobody cuts it', async () => {
    const pause = new Pause();
    const state = settled(pause.for(1_000));
    await vi.advanceTimersByTimeAsync(999);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.done).toBe(true);
  });

  it('ends at once when cut', async () => {
    const pause = new Pause();
    const state = settled(pause.for(60_000));
    pause.cut();
    await vi.advanceTimersByTimeAsync(0);
    expect(state.done).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a cut while the loop is busy ends only its next pause, which then takes no time', async () => {
    const pause = new Pause();
    pause.cut();
    const next = settled(pause.for(60_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(next.done).toBe(true);
    const after = settled(pause.for(1_000));
    await vi.advanceTimersByTimeAsync(500);
    expect(after.done).toBe(false);
    await vi.advanceTimersByTimeAsync(500);
    expect(after.done).toBe(true);
  });
});
