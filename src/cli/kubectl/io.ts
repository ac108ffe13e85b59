// The two output streams of a plugin command, passed in so commands are tested without a terminal.
/** Where a command writes: results to `out` (stdout), errors and progress to `err` (stderr), so scripts can capture results. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}
