/**
 * Prints `[label] 12.3 s: <status>` every `intervalMs` while a phase runs, so a long phase never looks hung.
 * `status` is called only when a line is due.
 */
export function startProgress(label: string, status: () => string, intervalMs = 5000): { stop(final?: string): void; line(text: string): void } {
  const started = performance.now();
  const stamp = (): string => `${((performance.now() - started) / 1000).toFixed(1)} s`;
  const print = (text: string): void => {
    process.stdout.write(`[${label}] ${stamp()}: ${text}\n`);
  };
  const timer = setInterval(() => {
    let text: string;
    try {
      text = status();
    } catch (err) {
      text = `(status failed: ${String(err)})`;
    }
    print(text);
  }, intervalMs);
  return {
    line: print,
    stop: (final) => {
      clearInterval(timer);
      if (final !== undefined) print(final);
    },
  };
}

/** A line outside any phase. */
export function say(text: string): void {
  process.stdout.write(`${text}\n`);
}
