import { parse } from 'yaml';

/**
 * A release's version is written in three places a user sees: package.json (what `usergroup-operator version` and the
 * plugin print), the chart's version and appVersion (the image tag it installs), and the image Artifact Hub lists.
 * The release command stamps nothing: it refuses to build until they all say the version asked for, so the commit
 * that is released is the commit that names it.
 */
export function versionMismatches(wanted: string, packageJson: string, chartYaml: string): string[] {
  const problems: string[] = [];
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(wanted)) return [`${wanted} is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE])`];
  const pkg = JSON.parse(packageJson) as { version?: unknown };
  if (pkg.version !== wanted) problems.push(`package.json has version ${String(pkg.version)}`);
  const chart = parse(chartYaml) as { version?: unknown; appVersion?: unknown; annotations?: Record<string, string | undefined> };
  if (chart.version !== wanted) problems.push(`Chart.yaml has version ${String(chart.version)}`);
  if (chart.appVersion !== wanted) problems.push(`Chart.yaml has appVersion ${String(chart.appVersion)}`);
  const images = parse(chart.annotations?.['artifacthub.io/images'] ?? '[]') as { image?: unknown }[];
  const tags = images.map((i) => String(i.image).slice(String(i.image).lastIndexOf(':') + 1));
  if (tags.length === 0) problems.push('Chart.yaml has no artifacthub.io/images annotation');
  for (const tag of tags.filter((t) => t !== wanted)) problems.push(`Chart.yaml's artifacthub.io/images names tag ${tag}`);
  const prerelease = chart.annotations?.['artifacthub.io/prerelease'] === 'true';
  if (prerelease !== wanted.includes('-')) problems.push(`Chart.yaml's artifacthub.io/prerelease is ${String(prerelease)}`);
  return problems;
}
