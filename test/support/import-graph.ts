import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** One module specifier a source file names, as the emitted JavaScript will load it. */
export interface ImportRef {
  readonly specifier: string;
  /**
   * 'static': `import … from`, `import '…'`, `export … from`, `import x = require(…)`: loaded with the importer.
   * 'type': `import type` / `export type`, erased (only with `withTypes`: a dependency all the same).
   */
  readonly kind: 'static' | 'dynamic' | 'type';
  readonly line: number;
}

/**
 * The module specifiers of a TypeScript source, read with TypeScript's own parser (so comments and strings
 * cannot fool it). Statement-level `import type` / `export type` are left out: they are erased. `import { type X }`
 * is kept: under verbatimModuleSyntax it compiles to `import {} from '…'`, which still loads the module.
 * `withTypes` adds the erased ones as kind 'type' (which layer depends on which, not what loads).
 */
export function importsOf(fileName: string, text: string, withTypes = false): ImportRef[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const refs: ImportRef[] = [];
  const add = (node: ts.Node, literal: ts.Expression | undefined, kind: ImportRef['kind']): void => {
    if (!literal || !ts.isStringLiteralLike(literal)) return;
    refs.push({ specifier: literal.text, kind, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      if (node.importClause?.phaseModifier !== ts.SyntaxKind.TypeKeyword) add(node, node.moduleSpecifier, 'static');
      else if (withTypes) add(node, node.moduleSpecifier, 'type');
    } else if (ts.isExportDeclaration(node)) {
      if (!node.isTypeOnly) add(node, node.moduleSpecifier, 'static');
      else if (withTypes) add(node, node.moduleSpecifier, 'type');
    } else if (ts.isImportEqualsDeclaration(node) && !node.isTypeOnly && ts.isExternalModuleReference(node.moduleReference)) {
      add(node, node.moduleReference.expression, 'static');
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0], 'dynamic');
    ts.forEachChild(node, visit);
  };
  visit(source);
  return refs;
}

/** Every string literal of a source (not comments), with its line: for paths that name a folder. */
export function stringLiteralsOf(fileName: string, text: string): { readonly text: string; readonly line: number }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: { text: string; line: number }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
      found.push({ text: node.text, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Where a relative specifier of `from` points: the .ts source behind a `./x.js` (NodeNext style), or a
 * directory's index.ts. Undefined for a bare specifier (a package or a Node built-in).
 */
export function resolveRelative(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.') && !specifier.startsWith('/')) return undefined;
  const target = path.resolve(path.dirname(from), specifier);
  const candidates = [target.replace(/\.js$/, '.ts'), target, `${target}.ts`, path.join(target, 'index.ts')];
  const found = candidates.find((c) => c.endsWith('.ts') && fs.existsSync(c) && fs.statSync(c).isFile());
  // A path the walker cannot follow would hide whatever lies behind it: say so rather than skip it.
  if (!found) throw new Error(`${from}: cannot resolve "${specifier}" to a .ts source`);
  return found;
}

/** A node of the static graph: a source file, or a bare specifier (package or built-in) as a leaf. */
export interface GraphNode {
  readonly id: string;
  /** The node that first reached this one (breadth first, so the chain to it is a shortest one), and where. */
  readonly via?: { readonly from: string; readonly line: number };
}

/**
 * The modules a process loads at start when its entry is `entry`: the closure over static imports. Dynamic
 * `import()`s are not followed (they load when the code runs them). Packages and built-ins are leaves.
 */
export function staticGraph(entry: string): Map<string, GraphNode> {
  const graph = new Map<string, GraphNode>([[entry, { id: entry }]]);
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    for (const ref of importsOf(file, fs.readFileSync(file, 'utf8'))) {
      if (ref.kind !== 'static') continue;
      const id = resolveRelative(file, ref.specifier) ?? ref.specifier;
      if (graph.has(id)) continue;
      graph.set(id, { id, via: { from: file, line: ref.line } });
      if (id.endsWith('.ts')) queue.push(id);
    }
  }
  return graph;
}

/** "a.ts → b.ts:12 → node:http (b.ts:12)"-style chain from the entry to `id`, paths relative to `root`. */
export function chainTo(graph: ReadonlyMap<string, GraphNode>, id: string, root: string): string {
  const name = (p: string): string => (path.isAbsolute(p) ? path.relative(root, p) : p);
  const steps: string[] = [];
  for (let node = graph.get(id); node; node = node.via ? graph.get(node.via.from) : undefined) {
    steps.unshift(node.via ? `${name(node.id)} (imported at ${name(node.via.from)}:${node.via.line})` : name(node.id));
  }
  return steps.join('\n  → ');
}

/** The .ts files under `dir`, recursively. */
export function tsSources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? tsSources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}
