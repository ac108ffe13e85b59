import fs from 'node:fs';
import path from 'node:path';

/**
 * THIRD-PARTY-NOTICES for the one-file plugin: it carries Node itself and every npm package esbuild
 * folded in, and their licences (MIT, ISC, Apache-2.0, BSD) ask that their texts travel with copies.
 */
export function thirdPartyNotices(nodeVersion: string, nodeLicense: string, packageDirs: readonly string[]): string {
  const sections = [`Node.js ${nodeVersion} (the runtime embedded in this executable)\n\n${nodeLicense.trim()}`];
  for (const dir of packageDirs) {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string; license?: string };
    const text = licenseText(dir);
    if (text === undefined) throw new Error(`${pkg.name ?? dir} (bundled into the plugin) ships no LICENSE file: add its licence text by hand`);
    sections.push(`${pkg.name ?? path.basename(dir)} ${pkg.version ?? ''} (${pkg.license ?? 'see below'})\n\n${text.trim()}`);
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
