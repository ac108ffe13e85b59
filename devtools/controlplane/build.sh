#!/usr/bin/env bash
# Builds the pinned test control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl, helm) from the Go helper modules beside this script, and caches the
# binaries outside the checkout, keyed by everything that decides their bytes.
# Prints the directory holding the binaries as its last line of stdout; progress goes
# to stderr. A warm call only hashes a few files.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -p=2" CGO_ENABLED=0
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || {
  echo "build.sh: Go is required to build the test control plane (see README: Requirements); not found on PATH or in /usr/local/go/bin" >&2
  exit 1
}

modversion() { sed -En "s#^(require )?[[:space:]]*$2 (v[^ ]*).*#\2#p" "$here/$1/go.mod" | head -n1; }
k8s=$(modversion kube k8s.io/kubernetes)
etcd=$(modversion etcd go.etcd.io/etcd/server/v3)
helm_module=$(sed -n 's#^tool \(helm.sh/helm/v[0-9]*\)/cmd/helm#\1#p' "$here/helm/go.mod")
helm=$(modversion helm "$helm_module")
[ -n "$k8s" ] && [ -n "$etcd" ] && [ -n "$helm" ] || { echo "build.sh: cannot read the pinned versions from the go.mod files" >&2; exit 1; }
minor=${k8s#v1.}; minor=${minor%%.*}

kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
helm_ldflags="-s -w -X $helm_module/internal/version.version=$helm -X $helm_module/internal/version.gitTreeState=clean"

# Everything that decides the binaries' bytes: toolchain, build flags, pinned modules.
key=$( { go version; echo "$GOFLAGS $CGO_ENABLED -trimpath"; echo "$kube_ldflags"; echo "$helm_ldflags"; cat "$here"/*/go.mod "$here"/*/go.sum; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/controlplane/$k8s-$key"
bins=(etcd kube-apiserver kube-controller-manager kubectl helm)

complete() { for b in "${bins[@]}"; do [ -x "$dir/bin/$b" ] || return 1; done; }
if complete; then echo "$dir/bin"; exit 0; fi

mkdir -p "$root/controlplane"
exec 9>"$root/controlplane/.lock"
flock -n 9 || { echo "control plane: another build holds $root/controlplane/.lock; waiting" >&2; flock 9; }
if complete; then echo "$dir/bin"; exit 0; fi

stage=$(mktemp -d "$root/controlplane/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
started=$SECONDS
step() { echo "control plane: [$(( SECONDS - started ))s] $*" >&2; }
step "building kubernetes $k8s, etcd $etcd, helm $helm into $dir (a cold build takes several minutes on 2 cores)"
build() { # module package output ldflags
  local t=$SECONDS
  step "go build $2"
  (cd "$here/$1" && go build -trimpath -ldflags "$4" -o "$stage/$3" "$2")
  step "built $3 in $(( SECONDS - t ))s"
}
build etcd go.etcd.io/etcd/server/v3 etcd "-s -w"
build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kube_ldflags"
build kube k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$kube_ldflags"
build kube k8s.io/kubernetes/cmd/kubectl kubectl "$kube_ldflags"
build helm "$helm_module/cmd/helm" helm "$helm_ldflags"
printf 'kubernetes=%s\netcd=%s\nhelm=%s\n' "$k8s" "$etcd" "$helm" > "$stage/versions"

rm -rf "$dir"; mkdir -p "$dir"
mv "$stage" "$dir/bin"
trap - EXIT
step "done"
echo "$dir/bin"
