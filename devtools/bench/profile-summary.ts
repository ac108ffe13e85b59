/*
 * Summarises a V8 .cpuprofile (node --cpu-prof, e.g. via
 * `npm run bench -- --controller-node-options "--cpu-prof --cpu-prof-dir=/tmp/prof"`):
 * self time by function and by package/file, and total (inclusive) time of the controller's own functions.
 *   npx tsx devtools/bench/profile-summary.ts /tmp/prof/CPU.*.cpuprofile [top]
 */
import fs from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

/** node_modules/<pkg>, src/<dir>, node:internal, or the V8 pseudo-frames ((garbage collector), (idle), …). */
export function area(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1] ?? url;
  const own = /\/dist\/([^/]+\/[^/]+)\.js$/.exec(url);
  if (own) return `dist/${own[1] ?? ''}`;
  if (url.startsWith('node:')) return url.replace(/^node:internal\/([^/]+).*/, 'node:internal/$1');
  return url;
}

export function summarise(profile: Profile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fnSelf = new Map<string, number>();
  const areaSelf = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const name = `${functionName || '(anonymous)'} ${area(url, functionName)}:${lineNumber + 1}`;
    fnSelf.set(name, (fnSelf.get(name) ?? 0) + us);
    const a = area(url, functionName);
    areaSelf.set(a, (areaSelf.get(a) ?? 0) + us);
    // Inclusive time per own (dist/) function, each counted once per stack.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)?.callFrame;
      if (!f?.url.includes('/dist/')) continue;
      const key = `${f.functionName || '(anonymous)'} ${area(f.url, f.functionName)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    }
  }
  const pct = (us: number): string => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1e6).toFixed(2).padStart(7)} s`;
  const list = (m: Map<string, number>, k: number): string =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(([n, us]) => `  ${pct(us)}  ${n}`)
      .join('\n');
  return [
    `profile: ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s wall, ${(total / 1e6).toFixed(2)} s sampled`,
    'self time by area:',
    list(areaSelf, 15),
    'self time by function:',
    list(fnSelf, top),
    "inclusive time of the controller's own functions:",
    list(inclusive, top),
  ].join('\n');
}

if (process.argv[1]?.endsWith('profile-summary.ts')) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: tsx devtools/bench/profile-summary.ts <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summarise(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile, Number(top ?? 25))}\n`);
}
