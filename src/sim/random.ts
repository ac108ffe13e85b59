// A seeded random source for the simulator, so faults repeat from run to run.
/** Uniform numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

/**
 * A seeded PRNG (mulberry32), so tests get the same fault decisions on every run.
 * Not for secrets: tokens come from crypto.randomBytes.
 */
export function seededRandom(seed: number): RandomSource {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
