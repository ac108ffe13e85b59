#!/usr/bin/env bash
# Regenerates the Go helper modules for a new pin:
#   devtools/controlplane/pin.sh <kubernetes-version> <etcd-version> <helm-version>
# e.g. pin.sh v1.37.2 v3.7.3 v4.3.1. Commit the resulting go.mod/go.sum files.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging/... paths, which Go ignores when kubernetes is a dependency. We read
# that replace list from the real go.mod and point every staging module at its
# published v0.X.Y release instead (staging v0.X.Y ships with kubernetes v1.X.Y).
set -euo pipefail
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
k8s=${1:?kubernetes version, e.g. v1.37.2}
etcd=${2:?etcd version, e.g. v3.7.3}
helm=${3:?helm version, e.g. v4.3.1}
here=$(cd "$(dirname "$0")" && pwd)
staging_version="v0.${k8s#v1.}"

gomod=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$k8s" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
mapfile -t staging < <(sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod")
[ "${#staging[@]}" -gt 20 ] || { echo "pin.sh: found only ${#staging[@]} staging modules in $gomod" >&2; exit 1; }

cd "$here/kube"
rm -f go.mod go.sum
go mod init usergroup-operator.dev/controlplane/kube >/dev/null 2>&1
go mod edit -go="$(sed -n 's/^go //p' "$gomod")"
for m in "${staging[@]}"; do go mod edit -replace "$m=$m@$staging_version"; done
go mod edit -require "k8s.io/kubernetes@$k8s"
for cmd in kube-apiserver kube-controller-manager kubectl; do
  go get -tool "k8s.io/kubernetes/cmd/$cmd@$k8s"
done
go mod tidy

cd "$here/etcd"
rm -f go.mod go.sum
go mod init usergroup-operator.dev/controlplane/etcd >/dev/null 2>&1
go get -tool "go.etcd.io/etcd/server/v3@$etcd"
go mod tidy

cd "$here/helm"
rm -f go.mod go.sum
go mod init usergroup-operator.dev/controlplane/helm >/dev/null 2>&1
major=${helm%%.*}
go get -tool "helm.sh/helm/$major/cmd/helm@$helm"
go mod tidy
echo "pinned kubernetes $k8s (staging $staging_version), etcd $etcd, helm $helm"
