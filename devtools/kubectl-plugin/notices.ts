import fs from 'node:fs';
import path from 'node:path';

/** An npm package esbuild folded into the plugin: for THIRD-PARTY-NOTICES and the release's SBOM. */
export interface BundledPackage {
  readonly name: string;
  readonly version: string;
  /** package.json's SPDX expression, as the package declares it. */
  readonly license: string;
  readonly dir: string;
}

export function bundledPackages(packageDirs: readonly string[]): BundledPackage[] {
  return packageDirs.map((dir) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string; license?: string };
    if (!pkg.name || !pkg.version) throw new Error(`${dir}/package.json (bundled into the plugin) names no name or version`);
    return { name: pkg.name, version: pkg.version, license: pkg.license ?? 'NOASSERTION', dir };
  });
}

/** The Node a single executable carries, with its own licence (it covers V8, OpenSSL, ICU and the rest it links). */
export interface EmbeddedNode {
  readonly version: string;
  readonly license: string;
}

/**
 * THIRD-PARTY-NOTICES for the plugin: every npm package esbuild folded in, and for the single executable
 * Node itself; their licences (MIT, ISC, Apache-2.0, BSD) ask that their texts travel with copies. The
 * bundle for macOS runs on the user's Node and ships none, so its notices have no Node section.
 */
export function thirdPartyNotices(node: EmbeddedNode | undefined, packages: readonly BundledPackage[]): string {
  const sections = node ? [`Node.js ${node.version} (the runtime embedded in this executable)\n\n${node.license.trim()}`] : [];
  for (const pkg of packages) {
    const text = licenseText(pkg.dir);
    if (text === undefined) throw new Error(`${pkg.name} (bundled into the plugin) ships no LICENSE file: add its licence text by hand`);
    sections.push(`${pkg.name} ${pkg.version} (${pkg.license})\n\n${text.trim()}`);
  }
  const rule = `\n\n${'='.repeat(78)}\n\n`;
  return `kubectl-usergroup contains the following third-party software.${rule}${sections.join(rule)}\n`;
}

function licenseText(dir: string): string | undefined {
  const file = fs
    .readdirSync(dir)
    .sort()
    .find((name) => /^(un)?(licen[cs]e|copying)(\.|-|$)/i.test(name));
  return file === undefined ? undefined : fs.readFileSync(path.join(dir, file), 'utf8');
}
