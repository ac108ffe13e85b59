import { spawn, type ChildProcess } from 'node:child_process';

/**
 * The node's teardown, run by a detached shell that holds the read end of a pipe from the launcher (the
 * Watchdog pattern of devtools/controlplane/process.ts). It waits for the pipe to close: when the launcher
 * finishes (a clean stop closes it, then waits for the shell) or dies by any means, SIGKILL included. Then it
 * stops every process in the node's network namespace (the holder, the daemons, the shims, the test runner
 * itself if it still runs), kills what is left in the node's cgroup subtree (containers live in pod network
 * namespaces of their own, and a shim killed before its container orphans it), removes those cgroups, deletes
 * the network namespace, unmounts anything under the work dir still visible on the host and removes the dir.
 * One script for both paths, so a clean stop exercises the same code as a crash.
 */
const TEARDOWN = String.raw`
trap '' INT TERM HUP
name=$1 root=$2 keep=$3
while read -r _; do :; done
say() { echo "node teardown ($name): $*" >&2; }
netns_pids() { [ -e "/run/netns/$name" ] && ip netns pids "$name" 2>/dev/null; }
cgroup_pids() {
  for d in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
    [ -d "$d" ] && find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}
pids=$(netns_pids)
[ -n "$pids" ] && kill -TERM $pids 2>/dev/null
for _ in $(seq 1 50); do [ -z "$(netns_pids)" ] && break; sleep 0.1; done
pids=$(netns_pids)
[ -n "$pids" ] && { say "SIGKILL to $(echo $pids | wc -w) processes left in the network namespace"; kill -KILL $pids 2>/dev/null; }
for _ in $(seq 1 20); do
  left=$(cgroup_pids); [ -z "$left" ] && break
  kill -KILL $left 2>/dev/null; sleep 0.2
done
[ -n "$(cgroup_pids)" ] && say "processes still in the cgroup subtree: $(cgroup_pids | tr '\n' ' ')"
for d in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  [ -d "$d" ] && say "could not remove cgroup $d"
done
for _ in $(seq 1 20); do [ -z "$(netns_pids)" ] && break; sleep 0.1; done
[ -e "/run/netns/$name" ] && { ip netns delete "$name" || say "could not delete network namespace $name"; }
if [ -n "$root" ] && [ -d "$root" ]; then
  awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m"; done
  if [ "$keep" = 1 ]; then say "kept $root"; else rm -rf --one-file-system -- "$root" || say "could not remove $root"; fi
fi
`;

export class TeardownGuard {
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;

  /** Arms the teardown of the node `name` (network namespace and cgroup parent) and its work dir `root`. */
  constructor(name: string, root: string, keep: boolean) {
    this.child = spawn('bash', ['-c', TEARDOWN, 'node-teardown', name, root, keep ? '1' : '0'], {
      stdio: ['pipe', 'ignore', 'inherit'],
      detached: true,
    });
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
    this.child.once('error', () => undefined);
  }

  /** Runs the teardown now and waits for it. */
  async finish(): Promise<void> {
    this.child.stdin?.end();
    await this.exited;
  }
}
