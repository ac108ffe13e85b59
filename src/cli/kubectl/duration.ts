// kubectl's human-readable ages for tables, so our columns read like `kubectl get`'s.

/**
 * kubectl's AGE format (k8s.io/apimachinery duration.HumanDuration): precise while
 * recent, coarser with time. Up to 2 s in the future counts as now (clock skew).
 */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1_000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const days = Math.trunc(hours / 24) % 365;
    return days === 0 ? `${Math.trunc(hours / 24 / 365)}y` : `${Math.trunc(hours / 24 / 365)}y${days}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

/** The age of an RFC 3339 timestamp at `now`, or undefined when the timestamp is missing or unreadable. */
export function ageOf(timestamp: string | undefined, now: number): string | undefined {
  if (!timestamp) return undefined;
  const at = Date.parse(timestamp);
  return Number.isNaN(at) ? undefined : humanDuration(now - at);
}
