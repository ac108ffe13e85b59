import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { versionMismatches } from '../../devtools/release/versions.js';

const chart = (version: string, appVersion: string, tag: string, prerelease = 'false'): string => `
apiVersion: v2
name: usergroup-operator
version: ${version}
appVersion: "${appVersion}"
annotations:
  artifacthub.io/prerelease: "${prerelease}"
  artifacthub.io/images: |
    - name: usergroup-operator
      image: ghcr.io/usergroup-operator/usergroup-operator:${tag}
`;

describe('the release version check', () => {
  it('accepts a tree whose package.json, chart version, appVersion and image annotation name the version', () => {
    expect(versionMismatches('1.2.3', '{"version":"1.2.3"}', chart('1.2.3', '1.2.3', '1.2.3'))).toEqual([]);
  });

  it('names every place that says another version', () => {
    expect(versionMismatches('1.2.4', '{"version":"1.2.3"}', chart('1.2.3', '1.2.4', '1.2.2'))).toEqual([
      'package.json has version 1.2.3',
      'Chart.yaml has version 1.2.3',
      "Chart.yaml's artifacthub.io/images names tag 1.2.2",
    ]);
  });

  it('wants a prerelease marked as one on Artifact Hub, and refuses what is not a semantic version', () => {
    expect(versionMismatches('1.3.0-rc.1', '{"version":"1.3.0-rc.1"}', chart('1.3.0-rc.1', '1.3.0-rc.1', '1.3.0-rc.1'))).toEqual([
      "Chart.yaml's artifacthub.io/prerelease is false",
    ]);
    expect(versionMismatches('v1.2.3', '{}', '')).toEqual(['v1.2.3 is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE])']);
  });

  it('holds for this checkout: package.json and the chart agree, so `npm run release` can release it', () => {
    const pkg = fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8');
    const version = (JSON.parse(pkg) as { version: string }).version;
    expect(versionMismatches(version, pkg, fs.readFileSync(path.join(repoRoot, 'deploy/helm/usergroup-operator/Chart.yaml'), 'utf8'))).toEqual([]);
  });
});
