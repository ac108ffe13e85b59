// A kubeconfig with nothing but a ServiceAccount's token (TokenRequest API), and kubectl run with it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { run, type CommandResult } from './kube.js';

export interface ServiceAccountAccess {
  readonly path: string;
  as(args: readonly string[], input?: string): Promise<CommandResult>;
}

/** kubectl with the control plane's admin kubeconfig issues the token; `as` runs kubectl with only that token. */
export async function serviceAccountKubeconfig(
  cp: { readonly kubeconfigPath: string; readonly binaries: { readonly kubectl: string } },
  namespace: string,
  serviceAccount: string,
): Promise<ServiceAccountAccess> {
  const token = await run(cp.binaries.kubectl, ['--kubeconfig', cp.kubeconfigPath, 'create', 'token', serviceAccount, '-n', namespace, '--duration=1h']);
  if (token.code !== 0) throw new Error(`kubectl create token ${serviceAccount}: ${token.stderr}`);
  const adminConfig = parseYaml(fs.readFileSync(cp.kubeconfigPath, 'utf8')) as { clusters: { name: string; cluster: Record<string, unknown> }[] };
  const cluster = adminConfig.clusters[0];
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ug-sa-kc-')), 'kubeconfig');
  fs.writeFileSync(
    file,
    stringifyYaml({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [cluster],
      users: [{ name: serviceAccount, user: { token: token.stdout.trim() } }],
      contexts: [{ name: serviceAccount, context: { cluster: cluster.name, user: serviceAccount } }],
      'current-context': serviceAccount,
    }),
    { mode: 0o600 },
  );
  return { path: file, as: (args, input) => run(cp.binaries.kubectl, ['--kubeconfig', file, ...args], input === undefined ? {} : { input }) };
}
