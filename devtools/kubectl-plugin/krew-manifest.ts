/**
 * deploy/krew/usergroup.yaml is the krew manifest as a template a release fills in: {{version}}
 * (package.json's, as everywhere in the manifest and the download URLs) and one {{sha256.<os>_<arch>}}
 * per platform (of that platform's tarball). Text substitution keeps the template's comments and layout.
 * Strict both ways: a placeholder without a value, or a value without its placeholder (a platform built
 * but not offered), is an error rather than a manifest that quietly lacks a platform.
 */
export function fillKrewManifest(template: string, values: { readonly version: string; readonly sha256: Readonly<Record<string, string>> }): string {
  for (const [key, digest] of Object.entries(values.sha256)) {
    if (!/^[a-f0-9]{64}$/.test(digest)) throw new Error(`not a sha256 for ${key}: ${digest}`);
    if (!template.includes(`{{sha256.${key}}}`)) throw new Error(`the krew manifest template has no {{sha256.${key}}} for a platform that was built`);
  }
  const filled = template.replace(/\{\{([^}]*)\}\}/g, (placeholder, name: string) => {
    if (name === 'version') return values.version;
    const key = name.startsWith('sha256.') ? name.slice('sha256.'.length) : undefined;
    const digest = key !== undefined && Object.hasOwn(values.sha256, key) ? values.sha256[key] : undefined;
    if (digest === undefined) throw new Error(`the krew manifest template has an unknown placeholder ${placeholder}`);
    return digest;
  });
  return filled;
}
