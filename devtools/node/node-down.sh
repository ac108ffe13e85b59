#!/usr/bin/env bash
# Tears down what devtools/node/node-up.sh started under ROOT (default /tmp/ugo-e2e-node):
# kills only the PIDs it recorded in ROOT/pids (newest first), the containerd shims that
# live in its network namespace and the container processes left in its cgroup subtree, removes its cgroups, the
# network namespace and the mount points it created on the host. Safe to run twice.
#   devtools/node/node-down.sh [ROOT]
set -uo pipefail
root=${1:-/tmp/ugo-e2e-node}
ns=$(cat "$root/netns" 2>/dev/null || echo ugo-e2e)
cg=$(cat "$root/cgroup" 2>/dev/null || echo ugo-e2e)

# Processes in our network namespace (shims, pods, anything a daemon forked): all ours.
if [ -e "/run/netns/$ns" ]; then
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -n "$pids" ] && kill $pids 2>/dev/null
fi
if [ -f "$root/pids" ]; then
  tac "$root/pids" | while read -r pid name; do
    kill "$pid" 2>/dev/null && echo "node-down: stopped $name ($pid)" >&2
  done
fi
for _ in $(seq 1 50); do
  alive=0
  [ -f "$root/pids" ] && while read -r pid _; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$root/pids"
  [ -e "/run/netns/$ns" ] && [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && alive=1
  [ $alive = 0 ] && break
  sleep 0.2
done
[ -e "/run/netns/$ns" ] && { pids=$(ip netns pids "$ns" 2>/dev/null); [ -n "$pids" ] && kill -9 $pids 2>/dev/null; }
[ -f "$root/pids" ] && while read -r pid _; do kill -9 "$pid" 2>/dev/null; done < "$root/pids"
rm -f "$root/pids" "$root/holder.pid"

# Containers live in pod network namespaces of their own, but all in our cgroup subtree:
# whatever is left there (a shim killed before its container, say) is ours.
ours() { [ -n "$cg" ] && [ -d "/sys/fs/cgroup/pids/$cg" ] && find "/sys/fs/cgroup/pids/$cg" -name cgroup.procs -exec cat {} + 2>/dev/null; }
for _ in 1 2 3 4 5; do
  left=$(ours); [ -z "$left" ] && break
  kill -9 $left 2>/dev/null; sleep 0.3
done

# Cgroups made by us or by the kubelet/runc below our cgroup root (deepest first).
if [ -n "$cg" ]; then
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h$cg" ] || continue
    find "$h$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
fi
ip netns delete "$ns" 2>/dev/null && echo "node-down: deleted netns $ns" >&2
# Overlay/bind mounts live only in the private mount namespace, which died with its
# last process; the host mount table is checked anyway.
grep -q " $root" /proc/self/mounts && grep " $root" /proc/self/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l
if [ -f "$root/host-dirs" ]; then
  while read -r d; do rmdir "$d" 2>/dev/null; done < "$root/host-dirs"
  rm -f "$root/host-dirs"
fi
exit 0
