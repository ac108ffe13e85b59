/*
 * Summarises a V8 heap snapshot (npm run bench -- --heap-snapshots): self size and count by node type and by
 * constructor / string kind, so the bulk of the controller's heap can be named.
 *   npx tsx devtools/bench/heap-summary.ts <file.heapsnapshot> [top]
 */
import fs from 'node:fs';

interface HeapSnapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: readonly string[]; readonly node_types: readonly (readonly string[] | string)[] } };
  readonly nodes: readonly number[];
  readonly strings: readonly string[];
}

export function summariseHeap(heap: HeapSnapshot, top = 30): string {
  const fields = heap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = heap.snapshot.meta.node_types[typeAt] as readonly string[];
  const byType = new Map<string, { size: number; count: number }>();
  const byName = new Map<string, { size: number; count: number }>();
  let total = 0;
  const add = (m: Map<string, { size: number; count: number }>, k: string, size: number): void => {
    const e = m.get(k) ?? { size: 0, count: 0 };
    e.size += size;
    e.count++;
    m.set(k, e);
  };
  for (let i = 0; i < heap.nodes.length; i += width) {
    const type = types[heap.nodes[i + typeAt] ?? 0] ?? '?';
    const size = heap.nodes[i + sizeAt] ?? 0;
    total += size;
    add(byType, type, size);
    const name = heap.strings[heap.nodes[i + nameAt] ?? 0] ?? '';
    // Objects and closures by constructor/function name; strings and code by type only.
    const key =
      type === 'object' || type === 'closure' || type === 'native'
        ? `${type} ${name.slice(0, 60)}`
        : type === 'array'
          ? `array ${name.slice(0, 40)}`
          : `(${type})`;
    add(byName, key, size);
  }
  const mb = (b: number): string => `${(b / 1048576).toFixed(1).padStart(7)} MiB`;
  const list = (m: Map<string, { size: number; count: number }>, k: number): string =>
    [...m]
      .sort((a, b) => b[1].size - a[1].size)
      .slice(0, k)
      .map(([n, e]) => `  ${mb(e.size)} ${String(e.count).padStart(9)}×  ${n}`)
      .join('\n');
  return [`heap: ${mb(total)} in ${heap.nodes.length / width} nodes`, 'by type:', list(byType, 15), 'by constructor / kind:', list(byName, top)].join('\n');
}

if (process.argv[1]?.endsWith('heap-summary.ts')) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: tsx devtools/bench/heap-summary.ts <file.heapsnapshot> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summariseHeap(JSON.parse(fs.readFileSync(file, 'utf8')) as HeapSnapshot, Number(top ?? 30))}\n`);
}
