import { errorText } from '../../src/platform/error-text.js';

/** A caught value as an Error: itself when it is one, else an Error whose message describes it. */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(errorText(err));
}
