import { describe, expect, it } from 'vitest';
import { summariseHeap } from '../bench/heap-profile-summary.js';

interface Node {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly Node[];
}
const node = (functionName: string, url: string, selfSize: number, children: readonly Node[] = []): Node => ({
  callFrame: { functionName, url, lineNumber: 0 },
  selfSize,
  children,
});

describe('summariseHeap: live bytes of a sampling heap profile', () => {
  it("charges an allocation to the controller's nearest own function above it, not to a package that made it", () => {
    const MiB = 1024 * 1024;
    const profile = {
      head: node('(root)', '', 0, [
        node('upsert', 'file:///app/dist/kube/cache.js', MiB, [
          // Allocated inside a package, on behalf of the cache.
          node('parse', 'file:///app/node_modules/yaml/dist/parse.js', 3 * MiB),
        ]),
        node('(idle)', '', 0, [node('bootstrap', 'node:internal/main', MiB)]),
      ]),
    };
    const summary = summariseHeap(profile, 5);
    expect(summary).toContain('live at exit (sampled): 5.0 MiB');
    const causes = summary.split('\n\n')[1] ?? '';
    expect(causes).toMatch(/4\.0 MiB\s+80\.0 %\s+upsert dist\/kube\/cache:1/);
    expect(causes).toMatch(/1\.0 MiB\s+20\.0 %\s+\(no controller frame\)/);
  });
});
