/**
 * `npm run test:reliability` runs every scenario at full size (RELIABILITY_SCALE=full);
 * `npm run test:reliability:reduced` (CI) runs the same scenarios reduced, so CI keeps guarding them within its time budget.
 */
export type Scale = 'full' | 'reduced';

export const SCALE: Scale = process.env['RELIABILITY_SCALE'] === 'full' ? 'full' : 'reduced';

/** The full-size value, or the reduced one. */
export function sized<T>(full: T, reduced: T): T {
  return SCALE === 'full' ? full : reduced;
}
