import type { Platform } from '../platform-node.js';

/**
 * The platforms a release offers the plugin for, in the krew manifest's order. Linux gets the single
 * executable (Node built in); macOS gets the bundle as a script for the user's own Node, because no
 * Node 26 for darwin/arm64 is on npm and a darwin executable made here could be neither run nor
 * re-signed (macOS checks the signature the injection breaks) before it ships.
 */
export const PLUGIN_PLATFORMS: readonly Platform[] = [
  { os: 'linux', arch: 'amd64' },
  { os: 'linux', arch: 'arm64' },
  { os: 'darwin', arch: 'amd64' },
  { os: 'darwin', arch: 'arm64' },
];

/** 'sea': a single executable with Node in it; 'bundle': one ES module file run by the Node on PATH. */
export type PluginKind = 'sea' | 'bundle';

export const kindOf = (p: Platform): PluginKind => (p.os === 'linux' ? 'sea' : 'bundle');

/** `linux_amd64`: the tarball's name part and the krew template's `{{sha256.linux_amd64}}` key. */
export const platformKey = (p: Platform): string => `${p.os}_${p.arch}`;

export const tarballName = (p: Platform): string => `kubectl-usergroup_${platformKey(p)}.tar.gz`;
