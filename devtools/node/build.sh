#!/usr/bin/env bash
# Builds the pieces of a one-node cluster (for the e2e suite) that the test control plane lacks:
# kubelet, kube-proxy and kube-scheduler (same pinned Kubernetes as devtools/controlplane), containerd
# with its runc shim and ctr, and the CNI plugins bridge, host-local, loopback and
# portmap, from the Go helper modules beside this script. Caches the binaries outside
# the checkout, keyed by everything that decides their bytes, like
# devtools/controlplane/build.sh. Prints the directory holding the binaries as its last
# line of stdout (CNI plugins in its cni/ subdirectory); progress goes to stderr.
#
# runc is not built here (it needs cgo and libseccomp): install Debian's `runc`.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../go-env.sh
source "$here/../go-env.sh"
go_env local node/build.sh

modversion() { sed -En "s#^(require )?[[:space:]]*$2 (v[^ ]*).*#\2#p" "$here/$1/go.mod" | head -n1; }
k8s=$(modversion kube k8s.io/kubernetes)
containerd=$(modversion containerd github.com/containerd/containerd/v2)
cni=$(modversion cni github.com/containernetworking/plugins)
cp_k8s=$(modversion ../controlplane/kube k8s.io/kubernetes)
[ -n "$k8s" ] && [ -n "$containerd" ] && [ -n "$cni" ] || { echo "node/build.sh: cannot read the pinned versions from the go.mod files" >&2; exit 1; }
[ "$k8s" = "$cp_k8s" ] || echo "node/build.sh: warning: node kubernetes $k8s differs from the control plane's $cp_k8s" >&2
minor=${k8s#v1.}; minor=${minor%%.*}

kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
containerd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd -X github.com/containerd/containerd/v2/version.Revision=module"
containerd_tags="no_btrfs no_devmapper no_zfs"
cni_ldflags="-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$cni"

key=$( { go version; echo "$GOFLAGS $CGO_ENABLED ${GO_BUILD_FLAGS[*]} $containerd_tags"; echo "$kube_ldflags"; echo "$containerd_ldflags"; echo "$cni_ldflags"; cat "$here"/*/go.mod "$here"/*/go.sum; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/node/$k8s-$key"
bins=(kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr cni/bridge cni/host-local cni/loopback cni/portmap)

complete() { for b in "${bins[@]}"; do [ -x "$dir/bin/$b" ] || return 1; done; }
if complete; then echo "$dir/bin"; exit 0; fi

mkdir -p "$root/node"
exec 9>"$root/node/.lock"
flock -n 9 || { echo "node: another build holds $root/node/.lock; waiting" >&2; flock 9; }
if complete; then echo "$dir/bin"; exit 0; fi

stage=$(mktemp -d "$root/node/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/cni"
started=$SECONDS
step() { echo "node: [$(( SECONDS - started ))s] $*" >&2; }
step "building kubernetes $k8s (kubelet, kube-proxy, kube-scheduler), containerd $containerd, CNI plugins $cni into $dir"
build() { # module package output ldflags [tags]
  local t=$SECONDS
  step "go build $2"
  (cd "$here/$1" && go build "${GO_BUILD_FLAGS[@]}" ${5:+-tags "$5"} -ldflags "$4" -o "$stage/$3" "$2")
  step "built $3 in $(( SECONDS - t ))s"
}
build kube k8s.io/kubernetes/cmd/kubelet kubelet "$kube_ldflags"
build kube k8s.io/kubernetes/cmd/kube-proxy kube-proxy "$kube_ldflags"
build kube k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$kube_ldflags"
for c in containerd containerd-shim-runc-v2 ctr; do
  build containerd "github.com/containerd/containerd/v2/cmd/$c" "$c" "$containerd_ldflags" "$containerd_tags"
done
for p in main/bridge ipam/host-local main/loopback meta/portmap; do
  build cni "github.com/containernetworking/plugins/plugins/$p" "cni/${p#*/}" "$cni_ldflags"
done
printf 'kubernetes=%s\ncontainerd=%s\ncni-plugins=%s\n' "$k8s" "$containerd" "$cni" > "$stage/versions"

rm -rf "$dir"; mkdir -p "$dir"
mv "$stage" "$dir/bin"
trap - EXIT
step "done"
echo "$dir/bin"
