// Plain-text tables laid out like kubectl's, for the plugin's output.
/**
 * Columns laid out as kubectl prints them (its tabwriter: minimum cell width 6,
 * padding 3, left-aligned, the last column unpadded), so our output lines up with
 * and reads like `kubectl get`.
 */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(6, ...all.map((row) => (row[i] ?? '').length + 3)));
  const last = header.length - 1;
  return all
    .map(
      (row) =>
        header
          .map((_, i) => (i === last ? (row[i] ?? '') : (row[i] ?? '').padEnd(widths[i] ?? 0)))
          .join('')
          .trimEnd() + '\n',
    )
    .join('');
}
