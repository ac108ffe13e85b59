// `kubectl usergroup status`: reads one UserGroup or a list and prints the status table.
import type { UserGroup } from '../../api/usergroup.js';
import type { Io } from './io.js';
import { renderStatusTable } from './status-table.js';
import type { UserGroupAccess } from './usergroup-api.js';

export interface StatusRequest {
  readonly namespace: string;
  readonly name: string | undefined;
  readonly allNamespaces: boolean;
  readonly wide: boolean;
}

/** `kubectl usergroup status`: reads UserGroups (never their Secrets) and prints the table. Resolves with the exit code. */
export async function statusCommand(
  request: StatusRequest,
  deps: { readonly api: UserGroupAccess; readonly io: Io; readonly now: () => number },
): Promise<number> {
  const { api, io } = deps;
  let groups: UserGroup[];
  if (request.name !== undefined) {
    const ug = await api.get(request.namespace, request.name);
    if (!ug) {
      io.err(`error: usergroup "${request.name}" not found in namespace "${request.namespace}"\n`);
      return 1;
    }
    groups = [ug];
  } else {
    const listed = await api.list(request.allNamespaces ? undefined : request.namespace);
    for (const problem of listed.skipped) io.err(`warning: skipped a UserGroup that cannot be read: ${problem}\n`);
    groups = listed.items;
  }
  if (groups.length === 0) {
    // kubectl's wording, on stderr, exit 0: an empty namespace is not an error.
    io.err(request.allNamespaces ? 'No resources found\n' : `No resources found in ${request.namespace} namespace.\n`);
    return 0;
  }
  io.out(renderStatusTable(groups, { allNamespaces: request.allNamespaces, wide: request.wide, now: deps.now() }));
  return 0;
}
