// `kubectl usergroup`: dispatches to rotate, sync, status or migrate-storage and prints failures as kubectl does.
import { ApiError, isUnauthorized } from '../../kube/api-error.js';
import { KubeClient } from '../../kube/http.js';
import { parsePluginArgs, type ClusterFlags } from './args.js';
import type { Io } from './io.js';
import { resolveCluster, type ResolvedCluster } from './kubeconfig.js';
import { migrateStorageCommand } from './migrate-storage.js';
import { rotateCommand } from './rotate.js';
import { statusCommand } from './status.js';
import { KubeStorageAccess } from './storage-api.js';
import { syncCommand } from './sync.js';
import { usage } from './usage.js';
import { KubeUserGroupAccess } from './usergroup-api.js';
import { errorText } from '../../platform/error-text.js';

/**
 * `kubectl usergroup …` (kubectl execs kubectl-usergroup with the arguments after
 * "usergroup"). Resolves with the exit code: 0 done, 1 refused/failed/timed out,
 * 2 bad usage.
 */
export async function runPlugin(argv: readonly string[], io: Io): Promise<number> {
  const parsed = parsePluginArgs(argv);
  if (!parsed.ok) {
    io.err(parsed.showUsage ? `error: ${parsed.error}\n\n${usage}` : `error: ${parsed.error}\nSee 'kubectl usergroup --help' for usage.\n`);
    return 2;
  }
  const command = parsed.command;
  if (command.kind === 'help') {
    io.out(usage);
    return 0;
  }

  let cluster: ResolvedCluster;
  let client: KubeClient;
  try {
    cluster = await resolveCluster(command.cluster);
    client = await KubeClient.create(cluster.access, 'kubectl-usergroup');
  } catch (err) {
    io.err(`error: ${errorText(err)}\n`);
    return 1;
  }
  const deps = { api: new KubeUserGroupAccess(client), io, now: () => Date.now() };
  try {
    if (command.kind === 'migrate-storage') {
      return await migrateStorageCommand({ rewrite: command.rewrite, timeoutMs: command.timeoutMs }, { ...deps, api: new KubeStorageAccess(client) });
    }
    if (command.kind === 'status') {
      return await statusCommand({ namespace: cluster.namespace, name: command.name, allNamespaces: command.allNamespaces, wide: command.wide }, deps);
    }
    const request = { namespace: cluster.namespace, name: command.name, timeoutMs: command.timeoutMs, wait: command.wait };
    return await (command.kind === 'rotate' ? rotateCommand(request, deps) : syncCommand(request, deps));
  } catch (err) {
    io.err(`${describeFailure(err, command.cluster, cluster)}\n`);
    return 1;
  } finally {
    client.close();
  }
}

/** An apiserver refusal speaks for itself, in kubectl's words; a transport failure also says where we tried to go. */
function describeFailure(err: unknown, flags: ClusterFlags, cluster: ResolvedCluster): string {
  if (err instanceof ApiError) return serverError(err);
  const transport = err instanceof Error && (typeof (err as NodeJS.ErrnoException).code === 'string' || err.message.includes('timed out'));
  if (!transport) return `error: ${errorText(err)}`;
  const context = flags.context ?? cluster.access.context;
  return `error: cannot talk to the apiserver at ${cluster.access.server} (${context === undefined ? 'in-cluster' : `context "${context}"`}): ${errorText(err)}`;
}

/** What kubectl prints for an apiserver refusal (cmdutil.StandardErrorMessage), so the plugin reads like kubectl. */
function serverError(err: ApiError): string {
  if (isUnauthorized(err)) return `error: You must be logged in to the server (${err.serverMessage})`;
  return err.reason === 'Unknown' ? `Error from server: ${err.serverMessage}` : `Error from server (${err.reason}): ${err.serverMessage}`;
}
