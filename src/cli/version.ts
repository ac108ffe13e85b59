// The operator's version, as package.json gives it.
import { readFileSync } from 'node:fs';

/** The package version, read from package.json (present in the image next to dist/). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}
