// The kubectl plugin's help text, exit codes included.
import { ROTATE_ANNOTATION, SYNC_ANNOTATION } from '../../api/constants.js';
import { DEFAULT_REQUEST_BUDGETS } from '../../controller/request-budget.js';

/** `kubectl usergroup --help`. Written for the person at the terminal, so it explains the exit codes too. */
export const usage = `Manage UserGroups (usergroup.dev) from kubectl.

Usage:
  kubectl usergroup rotate <name> [-n <namespace>] [--timeout 60s] [--no-wait]
  kubectl usergroup sync <name> [-n <namespace>] [--timeout 60s] [--no-wait]
  kubectl usergroup status [<name>] [-n <namespace> | -A] [-o wide]
  kubectl usergroup migrate-storage [--rewrite] [--timeout 30m]

Commands:
  rotate   ask the operator to rotate the group's token (sets the ${ROTATE_ANNOTATION}
           annotation to a new value) and wait until the new token is in the Secret.
           Refuses a UserGroup that does not exist or is suspended. While the service is
           unavailable or rate-limiting, the operator retries and rotate keeps waiting.
           Each namespace has a budget of rotation requests (by default ${DEFAULT_REQUEST_BUDGETS.rotation.burst} at once, then
           ${DEFAULT_REQUEST_BUDGETS.rotation.perMinute} a minute; the operator's flags set it): a request beyond it waits its turn.
  sync     ask the operator to send the group to the service again now, even if nothing
           changed (sets the ${SYNC_ANNOTATION} annotation to a new value), and
           wait until it has: repairs a group changed at the service. Refuses a UserGroup
           that does not exist or is suspended. Each namespace has a budget of sync requests
           (by default ${DEFAULT_REQUEST_BUDGETS.sync.burst} at once, then ${DEFAULT_REQUEST_BUDGETS.sync.perMinute} a minute; the operator's flags set it):
           a request beyond it waits its turn.
  status   one line per UserGroup: its id, Ready, reason, Secret, last rotation, age.
           "(pending)" marks a requested rotation not handled yet, "(sync pending)" a sync
           request; "(stale)" a status that describes an older spec. -o wide adds the Ready condition's message.
  migrate-storage
           once after upgrading from 0.2.0, after the new CRDs: has every UserGroup,
           UserGroupService and ClusterUserGroupService stored again as usergroup.dev/v1 and
           leaves each CRD's status.storedVersions [v1]. Uses a StorageVersionMigration per
           resource where the cluster serves storagemigration.k8s.io v1 or v1beta1, else an
           empty patch of every object. Needs cluster-admin. Safe to run again.

Flags:
  -n, --namespace <ns>     namespace (default: the kubeconfig context's, else "default")
  -A, --all-namespaces     status: every namespace
      --kubeconfig <path>  kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)
      --context <name>     kubeconfig context
      --timeout <d>        rotate, sync: how long to wait, a duration such as 30s or 2m (default 60s);
                           migrate-storage: for the StorageVersionMigrations (default 30m)
      --rewrite            migrate-storage: empty patches even where StorageVersionMigration is served
      --no-wait            rotate, sync: make the request and return at once
  -o, --output wide        status: add the MESSAGE column
  -h, --help               this help

Exit codes: 0 done; 1 refused, failed or timed out (the reason is printed); 2 bad usage.
The plugin never reads Secrets and never prints a token.
`;
