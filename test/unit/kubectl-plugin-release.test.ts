import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { repoRoot } from '../support/repo-root.js';
import { fillKrewManifest } from '../../devtools/kubectl-plugin/krew-manifest.js';
import { PLUGIN_PLATFORMS, platformKey, tarballName } from '../../devtools/kubectl-plugin/platforms.js';
import { KREW_TEMPLATE } from '../../devtools/kubectl-plugin/release.js';
import { NODE_MAJOR, pluginScript } from '../../devtools/kubectl-plugin/script.js';

const template = fs.readFileSync(path.join(repoRoot, KREW_TEMPLATE), 'utf8');
// A distinct digest per platform, so a manifest entry with another platform's sha256 shows.
const digests = Object.fromEntries(PLUGIN_PLATFORMS.map((p, i) => [platformKey(p), String(i + 1).repeat(64)]));

interface KrewPlatform {
  selector: { matchLabels: Record<string, string> };
  uri: string;
  sha256: string;
  bin: string;
}

describe('the krew manifest for four platforms', () => {
  it("fills each platform's entry with its os/arch selector, its tarball's uri and its sha256", () => {
    const manifest = parseYaml(fillKrewManifest(template, { version: '1.2.3', sha256: digests })) as {
      spec: { version: string; platforms: KrewPlatform[]; caveats: string; description: string };
    };
    expect(manifest.spec.version).toBe('v1.2.3');
    expect(manifest.spec.platforms).toEqual(
      PLUGIN_PLATFORMS.map((p) => ({
        selector: { matchLabels: { os: p.os, arch: p.arch } },
        uri: `https://github.com/usergroup-operator/usergroup-operator/releases/download/v1.2.3/${tarballName(p)}`,
        sha256: digests[platformKey(p)],
        bin: 'kubectl-usergroup',
      })),
    );
    // macOS users get a script for their own Node: the manifest tells them before and after installing.
    for (const text of [manifest.spec.description, manifest.spec.caveats]) expect(text).toMatch(/macOS[\s\S]*Node\.js[\s\S]*26 or newer/);
  });

  it('the template holds exactly the version and one sha256 placeholder per platform', () => {
    const names = [...template.matchAll(/\{\{([^}]*)\}\}/g)].map((m) => m[1]);
    expect(new Set(names)).toEqual(new Set(['version', ...PLUGIN_PLATFORMS.map((p) => `sha256.${platformKey(p)}`)]));
  });

  it('refuses a platform without a sha256: the placeholder stays unknown', () => {
    const three = Object.fromEntries(Object.entries(digests).filter(([key]) => key !== 'linux_arm64'));
    expect(() => fillKrewManifest(template, { version: '1.2.3', sha256: three })).toThrow(
      'the krew manifest template has an unknown placeholder {{sha256.linux_arm64}}',
    );
  });

  it('refuses a sha256 for a platform the template does not offer', () => {
    expect(() => fillKrewManifest(template, { version: '1.2.3', sha256: { ...digests, windows_amd64: 'a'.repeat(64) } })).toThrow(
      'the krew manifest template has no {{sha256.windows_amd64}} for a platform that was built',
    );
  });

  it('refuses an unknown placeholder, also one named like an Object property, and a value that is not a sha256', () => {
    for (const extra of ['{{sha256}}', '{{Version}}', '{{sha256.constructor}}', '{{sha256.__proto__}}']) {
      expect(() => fillKrewManifest(`${template}# ${extra}\n`, { version: '1.2.3', sha256: digests })).toThrow(
        `the krew manifest template has an unknown placeholder ${extra}`,
      );
    }
    expect(() => fillKrewManifest(template, { version: '1.2.3', sha256: { ...digests, darwin_arm64: 'A'.repeat(64) } })).toThrow(
      `not a sha256 for darwin_arm64: ${'A'.repeat(64)}`,
    );
  });
});

describe('the script for macOS', () => {
  it('keeps the shebang on top and checks the Node version before the bundle runs', () => {
    const script = pluginScript('#!/usr/bin/env node\nconsole.log("plugin");\n');
    const lines = script.split('\n');
    expect(lines[0]).toBe('#!/usr/bin/env node');
    expect(lines[1]).toBe(`if (Number(process.versions.node.split('.')[0]) < ${NODE_MAJOR}) {`);
    expect(script.endsWith('}\nconsole.log("plugin");\n')).toBe(true);
    expect(script.match(/#!/g)).toHaveLength(1);
  });

  it('refuses a bundle without the shebang (the entry lost its first line)', () => {
    expect(() => pluginScript('console.log("plugin");\n')).toThrow('the bundle does not start with');
  });

  it('NODE_MAJOR is the engines range of package.json', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe(`>=${NODE_MAJOR}`);
  });
});
