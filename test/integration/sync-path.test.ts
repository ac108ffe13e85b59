// The files one sync of a new UserGroup runs, measured by V8's coverage of the in-process controller, against the
// ordered list docs/architecture.md gives ("One sync, file by file"): the list stays true and at most 30 long.
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestEnv } from '../support/operator.js';
import { repoRoot } from '../support/repo-root.js';

interface ScriptCoverage {
  readonly url: string;
  readonly functions: readonly { readonly ranges: readonly { readonly count: number }[] }[];
}

const src = path.join(repoRoot, 'src') + path.sep;
/** The simulator runs in this process too, but it stands for the service: not the controller's code. */
const sim = path.join(src, 'sim') + path.sep;

/** The section's ordered list (the files control passes through) and the links of its paragraphs (what only answers). */
export function documentedSyncPath(markdown: string): { readonly chain: string[]; readonly answering: string[] } {
  const start = markdown.indexOf('### One sync, file by file');
  if (start < 0) throw new Error('docs/architecture.md has no "One sync, file by file" section');
  const end = markdown.indexOf('\n#', start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  const link = /\]\(\.\.\/(src\/[^)#]+)(?:#[^)]*)?\)/g;
  const chain: string[] = [];
  const answering: string[] = [];
  for (const line of section.split('\n')) {
    const into = /^\d+\. /.test(line) ? chain : answering;
    for (const [, target] of line.matchAll(link)) if (target) into.push(target);
  }
  return { chain, answering };
}

describe('one sync of a new UserGroup, file by file', () => {
  let env: TestEnv;
  const session = new Session();

  beforeAll(async () => {
    env = await TestEnv.create('syncpath');
    await env.startOperator();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  });
  afterAll(async () => {
    await session.post('Profiler.stopPreciseCoverage');
    session.disconnect();
    await env.close();
  });

  /** The controller's files with code run since the last take (each take resets the counts). */
  const ran = async (): Promise<Set<string>> => {
    const { result } = (await session.post('Profiler.takePreciseCoverage')) as unknown as { result: ScriptCoverage[] };
    const files = new Set<string>();
    for (const script of result) {
      const file = script.url.startsWith('file://') ? fileURLToPath(script.url) : script.url;
      if (!file.startsWith(src) || file.startsWith(sim)) continue;
      if (script.functions.some((f) => (f.ranges[0]?.count ?? 0) > 0)) files.add(path.relative(repoRoot, file));
    }
    return files;
  };

  it('passes through the files architecture.md lists, in at most 30, and runs nothing it does not name', async () => {
    const { chain, answering } = documentedSyncPath(fs.readFileSync(path.join(repoRoot, 'docs/architecture.md'), 'utf8'));
    expect(chain.length).toBeGreaterThan(0);
    expect(chain.length).toBeLessThanOrEqual(30);
    expect(new Set(chain).size, 'a file listed twice').toBe(chain.length);

    await ran(); // what starting the controller ran
    const started = performance.now();
    await env.createUserGroup('acme', { userGroupId: `${env.namespace}.acme`, name: 'Acme' });
    await env.waitForReady('acme');
    const sync = await ran();
    // As long again with nothing to do: what runs then is the controller's own timers, not the sync.
    await sleep(performance.now() - started);
    const idle = await ran();

    const named = (file: string): boolean => chain.includes(file) || answering.some((doc) => file === doc || (doc.endsWith('/') && file.startsWith(doc)));
    expect(
      chain.filter((file) => !sync.has(file)),
      'listed but not run by the sync',
    ).toEqual([]);
    expect([...sync].filter((file) => !named(file) && !idle.has(file)).sort(), 'run by the sync but not named').toEqual([]);
  });
});

describe('the section reader', () => {
  it('tells the ordered list from the paragraphs, and directories by their slash', () => {
    const doc = [
      '### One sync, file by file',
      '',
      '1. [`a.ts`](../src/kube/a.ts): first',
      '2. [`b.ts`](../src/controller/b.ts): then',
      '',
      'Besides: [`src/api/`](../src/api/) and [`c.ts`](../src/service/c.ts#x).',
      '## Next',
      '3. [`d.ts`](../src/kube/d.ts)',
    ].join('\n');
    expect(documentedSyncPath(doc)).toEqual({ chain: ['src/kube/a.ts', 'src/controller/b.ts'], answering: ['src/api/', 'src/service/c.ts'] });
    expect(() => documentedSyncPath('# nothing')).toThrow(/One sync/);
  });
});
