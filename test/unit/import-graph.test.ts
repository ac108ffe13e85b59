import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { chainTo, importsOf, resolveRelative, staticGraph, stringLiteralsOf, tsSources } from '../support/import-graph.js';

const src = path.join(repoRoot, 'src');
const testDir = path.join(repoRoot, 'test');
const devtools = path.join(repoRoot, 'devtools');
const sim = path.join(src, 'sim');
// The controller's process: `usergroup-operator run` starts here, and commands.ts reaches run.ts statically
// while sim is a dynamic import, so the static closure of main.ts is what `run` loads at start.
const entry = path.join(src, 'cli/main.ts');

// An ES import of any of these builds node:http's module namespace, which loads undici, http2 and zlib
// (~12 MiB of RSS; see src/platform/node-http.ts): the controller requires node:http through that module instead.
const HTTP_MODULES = new Set(['node:http', 'http', 'node:https', 'https', 'node:http2', 'http2', 'undici']);
const isHttpModule = (id: string): boolean => HTTP_MODULES.has(id) || id.startsWith('undici/');
// Loaded by dynamic import at the first service call (src/service/client.ts), never at start.
const isGot = (id: string): boolean => id === 'got' || id.startsWith('got/');
const within = (dir: string, id: string): boolean => {
  if (!path.isAbsolute(id)) return false; // a package or a built-in
  const rel = path.relative(dir, id);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
};

describe("the controller's static import graph (src/cli/main.ts → run)", () => {
  const graph = staticGraph(entry);
  const offenders = (bad: (id: string) => boolean): string[] => [...graph.keys()].filter(bad).map((id) => chainTo(graph, id, repoRoot));

  it('is the real one: it reaches the controller, the service client and the require of node:http', () => {
    for (const file of ['src/cli/run.ts', 'src/controller/controller.ts', 'src/service/client.ts', 'src/service/load-got.ts', 'src/platform/node-http.ts']) {
      expect(graph.has(path.join(repoRoot, file)), `${file} on the graph`).toBe(true);
    }
  });

  it('has no ES import of node:http, node:https, node:http2 or undici (require them via src/platform/node-http.ts)', () => {
    expect(offenders(isHttpModule), 'ES import of an HTTP module on the controller path; the import chain').toEqual([]);
  });

  it('does not load the simulator (src/sim, a command of its own)', () => {
    // Only where the graph enters src/sim: what that module imports in turn adds nothing to the message.
    const entersSim = (id: string): boolean => within(sim, id) && !within(sim, graph.get(id)?.via?.from ?? '');
    expect(offenders(entersSim), 'the simulator on the controller path; the import chain').toEqual([]);
  });

  it('does not load got at start (the service client imports it at the first call)', () => {
    expect(offenders(isGot), 'static import of got on the controller path; the import chain').toEqual([]);
  });

  it('does not load the YAML parser (only a kubeconfig file needs it; in a cluster nothing does) nor the kubectl plugin', () => {
    const plugin = path.join(src, 'cli/kubectl');
    const isYamlOrPlugin = (id: string): boolean =>
      id === 'yaml' || id.startsWith('yaml/') || within(plugin, id) || id === path.join(src, 'cli/kubectl-usergroup.ts');
    expect(offenders(isYamlOrPlugin), 'the YAML parser or the plugin on the controller path; the import chain').toEqual([]);
  });
});

describe('layers point down: what the controller is made of never imports what is built on it', () => {
  // Lower first; a layer may import itself and any layer before it, types included. src/cli and src/sim sit on
  // top of all of them.
  const LAYERS = ['platform', 'api', 'kube|service', 'observability', 'controller'] as const;
  const rank = (dir: string): number => LAYERS.findIndex((layer) => layer.split('|').includes(dir));
  const layerOf = (file: string): string | undefined => {
    const rel = path.relative(src, file);
    return rel.startsWith('..') ? undefined : rel.split(path.sep)[0];
  };

  it.each(LAYERS.flatMap((layer) => layer.split('|')))('src/%s imports only from its own layer and those below it', (dir) => {
    const found: string[] = [];
    for (const file of tsSources(path.join(src, dir))) {
      for (const ref of importsOf(file, fs.readFileSync(file, 'utf8'), true)) {
        const target = resolveRelative(file, ref.specifier);
        const layer = target && layerOf(target);
        if (layer === undefined || layer === dir) continue;
        const r = rank(layer);
        if (r < 0 || r >= rank(dir)) found.push(`${path.relative(repoRoot, file)}:${ref.line} imports ${ref.specifier} (src/${layer})`);
      }
    }
    expect(found).toEqual([]);
  });
});

describe('src/controller/policies is pure: decisions from observed state, no infrastructure and no I/O', () => {
  const policies = path.join(src, 'controller/policies');
  // What a policy may import, types included, besides other policies: the parsed API objects, and pure helpers.
  const PURE = ['api', 'controller/hash.ts', 'controller/retry-policy.ts', 'service/types.ts', 'service/upsert-body.ts', 'service/secret-value.ts'];
  const pure = (target: string): boolean => within(policies, target) || PURE.some((p) => target === path.join(src, p) || within(path.join(src, p), target));
  // Packages and built-ins: node:crypto for digests and MACs; anything else only as types (erased).
  const PURE_PACKAGES = new Set(['node:crypto']);

  it('each policy imports only other policies, src/api, the retry table and pure helpers', () => {
    const found: string[] = [];
    for (const file of tsSources(policies)) {
      for (const ref of importsOf(file, fs.readFileSync(file, 'utf8'), true)) {
        const target = resolveRelative(file, ref.specifier);
        const ok = target === undefined ? PURE_PACKAGES.has(ref.specifier) || ref.kind === 'type' : pure(target);
        if (!ok) found.push(`${path.relative(repoRoot, file)}:${ref.line} imports ${ref.specifier}`);
      }
    }
    expect(found).toEqual([]);
  });
});

describe('src/controller has no import cycle', () => {
  // Types included: a circle of type imports still means neither module can be read, or moved, without the other.
  it('no module of src/controller reaches itself through its imports', () => {
    const dir = path.join(src, 'controller');
    const edges = new Map<string, string[]>();
    for (const file of tsSources(dir)) {
      const targets = importsOf(file, fs.readFileSync(file, 'utf8'), true).map((ref) => resolveRelative(file, ref.specifier));
      edges.set(
        file,
        targets.filter((t): t is string => t !== undefined && within(dir, t)),
      );
    }
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, trail: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        cycles.push([...trail.slice(trail.indexOf(file)), file].map((f) => path.relative(repoRoot, f)).join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const target of edges.get(file) ?? []) visit(target, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of edges.keys()) visit(file, []);
    expect(cycles).toEqual([]);
  });
});

describe('what ships stands alone: src/ depends on neither the tools nor the tests, the tools not on the tests', () => {
  // What ships must not read the tools' or the tests' files either, so a string naming a path under them counts too.
  const namesUnder = (dir: string, text: string): boolean => text === dir || new RegExp(`(^|/)${dir}/`).test(text);
  const offending = (root: string, banned: Record<string, string>, strings: boolean): string[] => {
    const found: string[] = [];
    for (const file of tsSources(root)) {
      const text = fs.readFileSync(file, 'utf8');
      const rel = path.relative(repoRoot, file);
      const refs = importsOf(file, text);
      for (const ref of refs) {
        const target = resolveRelative(file, ref.specifier);
        for (const dir of Object.values(banned)) if (target && within(dir, target)) found.push(`${rel}:${ref.line} imports ${ref.specifier}`);
      }
      if (!strings) continue;
      for (const s of stringLiteralsOf(file, text)) {
        if (refs.some((r) => r.line === s.line && r.specifier === s.text)) continue; // reported above
        for (const name of Object.keys(banned)) if (namesUnder(name, s.text)) found.push(`${rel}:${s.line} names "${s.text}"`);
      }
    }
    return found;
  };

  it('src/ imports nothing from devtools/ or test/ and names no path under them', () => {
    expect(offending(src, { devtools, test: testDir }, true)).toEqual([]);
  });

  it('devtools/ imports nothing from test/', () => {
    expect(offending(devtools, { test: testDir }, false)).toEqual([]);
  });

  it('the checks see a tool import and a named path (they can fail)', () => {
    const dir = fs.mkdtempSync(path.join(repoRoot, 'src/.import-graph-probe-'));
    try {
      fs.writeFileSync(path.join(dir, 'probe.ts'), "import '../../devtools/repo-root.js';\nexport const where = 'test/unit';\n");
      const found = offending(dir, { devtools, test: testDir }, true);
      expect(found).toEqual([
        `${path.relative(repoRoot, dir)}/probe.ts:1 imports ../../devtools/repo-root.js`,
        `${path.relative(repoRoot, dir)}/probe.ts:2 names "test/unit"`,
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the import-graph checks themselves', () => {
  it('count what loads a module and leave out what is erased or lazy', () => {
    const refs = importsOf(
      'x.ts',
      [
        "import type { IncomingMessage } from 'node:http';", // erased
        "import { type Server } from 'node:https';", // kept as `import {} from 'node:https'`: loads it
        "export { a } from './a.js';",
        "export type { B } from './b.js';", // erased
        "import 'undici';",
        "// import 'node:http2';", // a comment
        'const s = "import \'node:http2\'";', // a string
        "const got = await import('got');",
      ].join('\n'),
    );
    expect(refs).toEqual([
      { specifier: 'node:https', kind: 'static', line: 2 },
      { specifier: './a.js', kind: 'static', line: 3 },
      { specifier: 'undici', kind: 'static', line: 5 },
      { specifier: 'got', kind: 'dynamic', line: 8 },
    ]);
  });

  it('resolve a NodeNext ".js" specifier to its .ts source and refuse one they cannot follow', () => {
    expect(resolveRelative(entry, './commands.js')).toBe(path.join(src, 'cli/commands.ts'));
    expect(resolveRelative(entry, 'node:fs')).toBeUndefined();
    expect(() => resolveRelative(entry, './no-such-module.js')).toThrow(/cannot resolve/);
  });
});
