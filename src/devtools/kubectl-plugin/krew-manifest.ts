/**
 * deploy/krew/usergroup.yaml is the krew manifest with two placeholders a release fills in:
 * {{version}} (package.json's, as everywhere in the manifest and the download URL) and {{sha256}}
 * (of the linux/amd64 tarball). Text substitution keeps the template's comments and layout.
 */
export function fillKrewManifest(template: string, values: { readonly version: string; readonly sha256: string }): string {
  if (!/^[a-f0-9]{64}$/.test(values.sha256)) throw new Error(`not a sha256: ${values.sha256}`);
  const filled = template.replaceAll('{{version}}', values.version).replaceAll('{{sha256}}', values.sha256);
  const left = /\{\{[^}]*\}\}/.exec(filled);
  if (left) throw new Error(`the krew manifest template has an unknown placeholder ${left[0]}`);
  return filled;
}
