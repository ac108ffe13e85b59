/*
 * Summarises a V8 sampling heap profile (node --heap-prof, e.g. via
 * `npm run bench -- --phases cold --controller-node-options "--heap-prof --heap-prof-dir=/tmp/hprof"`): the
 * profile is written when the controller exits and holds the sampled allocations still alive then, so after a
 * cold convergence it shows what the caches and queues keep per group. Live bytes by the controller's own
 * function nearest the allocation (what caused it), and by the allocating function itself.
 *   npx tsx test/bench/heap-profile-summary.ts /tmp/hprof/Heap.*.heapprofile [top]
 */
import fs from 'node:fs';
import { area } from './profile-summary.js';

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}
interface HeapProfile {
  readonly head: HeapNode;
}

const label = (frame: HeapNode['callFrame']): string => `${frame.functionName || '(anonymous)'} ${area(frame.url, frame.functionName)}:${frame.lineNumber + 1}`;
/** The controller's own code: dist/<layer>/…/<file>.js. */
const isOwn = (frame: HeapNode['callFrame']): boolean => !frame.url.includes('/node_modules/') && /\/dist\/(?:[^/]+\/)+[^/]+\.js$/.test(frame.url);

export function summariseHeap(profile: HeapProfile, top = 25): string {
  const bySelf = new Map<string, number>();
  const byOwn = new Map<string, number>();
  const byArea = new Map<string, number>();
  let total = 0;
  const walk = (node: HeapNode, own: string | undefined): void => {
    const here = isOwn(node.callFrame) ? label(node.callFrame) : own;
    if (node.selfSize > 0) {
      total += node.selfSize;
      const self = label(node.callFrame);
      bySelf.set(self, (bySelf.get(self) ?? 0) + node.selfSize);
      const cause = here ?? '(no controller frame)';
      byOwn.set(cause, (byOwn.get(cause) ?? 0) + node.selfSize);
      const where = area(node.callFrame.url, node.callFrame.functionName);
      byArea.set(where, (byArea.get(where) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head, undefined);
  const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  const table = (title: string, m: Map<string, number>): string =>
    [
      `${title}:`,
      ...[...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, v]) => `  ${mib(v).padStart(10)} ${((v / total) * 100).toFixed(1).padStart(5)} %  ${k}`),
    ].join('\n');
  return [
    `live at exit (sampled): ${mib(total)}`,
    table('by the nearest controller function (what caused it)', byOwn),
    table('by package or file of the allocating function', byArea),
    table('by allocating function', bySelf),
  ].join('\n\n');
}

if (/(^|\/)heap-profile-summary\.ts$/.test(process.argv[1] ?? '')) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: tsx test/bench/heap-profile-summary.ts <file.heapprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summariseHeap(JSON.parse(fs.readFileSync(file, 'utf8')) as HeapProfile, Number(top ?? 25))}\n`);
}
