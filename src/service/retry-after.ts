// Parses the Retry-After header of the service's 429 answers into a delay.
/**
 * Parses a Retry-After header (RFC 9110 §10.2.3): either delay-seconds or an HTTP-date. Returns the delay
 * in milliseconds (0 for a date in the past, and for "0", which got would ignore but we honour), or
 * undefined when the header is absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) {
    return undefined;
  }
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) {
    const ms = Number(trimmed) * 1000;
    return Number.isSafeInteger(ms) ? ms : undefined;
  }
  // Date.parse reads bare numbers such as "1.5" or "-1" as years; a date always has letters in it.
  if (!/[A-Za-z]/.test(trimmed)) {
    return undefined;
  }
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) {
    return undefined;
  }
  return Math.max(0, Math.ceil(at - nowMs));
}
