// Reads the service's boolean-like fields, whichever spelling it uses.
/** Reads the boolean-like values the service may use: true/false, 1/0, "true"/"false", "1"/"0". */
export function parseBooleanLike(value: unknown): boolean | undefined {
  if (value === true || value === 1) {
    return true;
  }
  if (value === false || value === 0) {
    return false;
  }
  if (typeof value === 'string') {
    const text = value.trim().toLowerCase();
    if (text === 'true' || text === '1') {
      return true;
    }
    if (text === 'false' || text === '0') {
      return false;
    }
  }
  return undefined;
}
