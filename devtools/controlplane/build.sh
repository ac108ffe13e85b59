#!/usr/bin/env bash
# Builds the pinned test control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl, helm) from the Go helper modules beside this script, and caches the
# binaries outside the checkout, keyed by everything that decides their bytes.
# Prints the directory holding the binaries as its last line of stdout; progress goes
# to stderr. A warm call only hashes a few files.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
#   KUBEBUILDER_ASSETS        a directory of prebuilt etcd, kube-apiserver and kubectl, controller-runtime envtest's
#                             convention (what `setup-envtest use -p path` prints): those it holds are used as they
#                             are, and only the binaries it lacks are built (kube-controller-manager and helm, for
#                             envtest's set). The printed directory then links both, with their versions.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../go-env.sh
source "$here/../go-env.sh"
go_env local controlplane/build.sh

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
key=$( { go version; echo "$GOFLAGS $CGO_ENABLED ${GO_BUILD_FLAGS[*]}"; echo "$kube_ldflags"; echo "$helm_ldflags"; cat "$here"/*/go.mod "$here"/*/go.sum; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/controlplane/$k8s-$key"
bins=(etcd kube-apiserver kube-controller-manager kubectl helm)

# The prebuilt binaries envtest's convention provides, when KUBEBUILDER_ASSETS names them.
assets=${KUBEBUILDER_ASSETS:-}
prebuilt=()
if [ -n "$assets" ]; then
  [ -d "$assets" ] || { echo "build.sh: KUBEBUILDER_ASSETS=$assets is not a directory" >&2; exit 1; }
  assets=$(cd "$assets" && pwd)
  for b in etcd kube-apiserver kubectl; do [ -x "$assets/$b" ] && prebuilt+=("$b"); done
fi
is_prebuilt() { local p; for p in "${prebuilt[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
wanted=()
for b in "${bins[@]}"; do is_prebuilt "$b" || wanted+=("$b"); done

# The printed directory: the cache's own when nothing is prebuilt, else one linking the prebuilt binaries and the
# cache's, with the versions the prebuilt ones report (a Kubernetes or etcd other than the pins is used as it is).
present() { [ -x "$dir/bin/$1" ]; }
finish() {
  if [ "${#prebuilt[@]}" -eq 0 ]; then echo "$dir/bin"; return; fi
  local kube=$k8s etcd_version=$etcd view
  if is_prebuilt kube-apiserver; then kube=$("$assets/kube-apiserver" --version | sed -En 's/^Kubernetes (v[^ ]+).*/\1/p'); fi
  if is_prebuilt etcd; then etcd_version=v$("$assets/etcd" --version | sed -En 's/^etcd Version: ([^ ]+).*/\1/p'); fi
  [ -n "$kube" ] && [ "$etcd_version" != v ] || { echo "build.sh: cannot read the version of a binary in KUBEBUILDER_ASSETS=$assets" >&2; exit 1; }
  view="$root/controlplane/assets-$( { echo "$assets ${prebuilt[*]} $dir"; } | sha256sum | cut -c1-16)"
  mkdir -p "$view"
  for b in "${bins[@]}"; do
    if is_prebuilt "$b"; then ln -sfn "$assets/$b" "$view/$b"; else ln -sfn "$dir/bin/$b" "$view/$b"; fi
  done
  printf 'kubernetes=%s\netcd=%s\nhelm=%s\n' "$kube" "$etcd_version" "$helm" > "$view/versions"
  [ "$kube" = "$k8s" ] || echo "control plane: KUBEBUILDER_ASSETS holds Kubernetes $kube (the pin is $k8s)" >&2
  step "using ${prebuilt[*]} from KUBEBUILDER_ASSETS=$assets"
  echo "$view"
}
started=$SECONDS
step() { echo "control plane: [$(( SECONDS - started ))s] $*" >&2; }

complete() { for b in "${wanted[@]}"; do present "$b" || return 1; done; }
if complete; then finish; exit 0; fi

mkdir -p "$root/controlplane"
exec 9>"$root/controlplane/.lock"
flock -n 9 || { echo "control plane: another build holds $root/controlplane/.lock; waiting" >&2; flock 9; }
if complete; then finish; exit 0; fi

mkdir -p "$dir/bin"
stage=$(mktemp -d "$root/controlplane/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
missing=()
for b in "${wanted[@]}"; do present "$b" || missing+=("$b"); done
step "building ${missing[*]} (kubernetes $k8s, etcd $etcd, helm $helm) into $dir (a cold build takes several minutes on 2 cores)"
build() { # binary module package ldflags: built only when wanted and not in the cache yet
  local t=$SECONDS
  present "$1" && return 0
  for b in "${wanted[@]}"; do
    [ "$b" = "$1" ] || continue
    step "go build $3"
    (cd "$here/$2" && go build "${GO_BUILD_FLAGS[@]}" -ldflags "$4" -o "$stage/$1" "$3")
    mv "$stage/$1" "$dir/bin/$1"
    step "built $1 in $(( SECONDS - t ))s"
  done
}
build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
build kubectl kube k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
build helm helm "$helm_module/cmd/helm" "$helm_ldflags"
printf 'kubernetes=%s\netcd=%s\nhelm=%s\n' "$k8s" "$etcd" "$helm" > "$dir/bin/versions"
step "done"
finish
