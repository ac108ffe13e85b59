#!/usr/bin/env bash
# Builds argocd-lua (main.go and diff.go beside this script): Argo CD's own Lua VM, settings loader, health
# path and the application controller's diff, for the tests of deploy/argocd and of the v1alpha1 manifests.
# Caches the binary outside the checkout, keyed by everything that decides its bytes, and prints the binary's
# path as the last line of stdout; progress goes to stderr.
#
# Argo CD v3.6.1, the newest release, built from its Go modules as go.mod beside this script pins them:
#   - argo-cd's go.mod says `go 1.27.0`, and the project's Go is 1.26 (the other builds run it with
#     GOTOOLCHAIN=local). So this build alone runs Go 1.27.0: GOTOOLCHAIN=go1.27.0 makes the local go command
#     fetch that toolchain itself, through the module proxy (the module golang.org/toolchain
#     v0.0.1-go1.27.0.<os>-<arch>, checked against the checksum database), into the module cache (GOMODCACHE,
#     ~/go/pkg/mod by default), where every later build finds it, CI's included when it keeps that directory.
#   - From v3.3 on, argo-cd's go.mod replaces its gitops-engine with the ./gitops-engine folder of its
#     repository, which the module zip leaves out (so v3.3–v3.5 cannot be built from the module proxy at all).
#     v3.6 publishes that folder as its own module, github.com/argoproj/argo-cd/gitops-engine/v3, tagged with
#     the same version. A replace directive in a dependency's go.mod does not apply, so go.mod requires the
#     published module, and copies argo-cd's other replace directives (the k8s.io staging modules at v0.37.0,
#     which k8s.io/kubernetes, required by gitops-engine, asks for as v0.0.0; protobuf, grpc-gateway, x/tools,
#     yaml.v2), so every module is at the version Argo CD's own build uses.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
toolchain=go1.27.0 # the `go` line of argo-cd's go.mod (and of go.mod here); should go.mod need more, Go refuses to build
# shellcheck source=../go-env.sh
source "$here/../go-env.sh"
go_env "$toolchain" argocd/build.sh

version=v3.6.1
for module in github.com/argoproj/argo-cd/v3 github.com/argoproj/argo-cd/gitops-engine/v3; do
  grep -q "^[[:space:]]*$module $version\$" "$here/go.mod" || { echo "argocd/build.sh: go.mod does not require $module $version" >&2; exit 1; }
done

ldflags="-s -w"
# The toolchain's name fixes its bytes (Go checks the download against the checksum database), so the key needs
# no `go version`, and a cached binary is found without fetching the toolchain.
key=$( { echo "$toolchain $(uname -sm) $GOFLAGS $CGO_ENABLED ${GO_BUILD_FLAGS[*]} $ldflags"; cat "$here/go.mod" "$here/go.sum" "$here"/*.go; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/argocd/$version-$key"
if [ -x "$dir/argocd-lua" ]; then echo "$dir/argocd-lua"; exit 0; fi

mkdir -p "$root/argocd"
exec 9>"$root/argocd/.lock"
flock -n 9 || { echo "argocd-lua: another build holds $root/argocd/.lock; waiting" >&2; flock 9; }
if [ -x "$dir/argocd-lua" ]; then echo "$dir/argocd-lua"; exit 0; fi

started=$SECONDS
step() { echo "argocd-lua: [$(( SECONDS - started ))s] $*" >&2; }

step "Go toolchain $toolchain (fetched through the module proxy into the module cache unless it is there)"
(cd "$here" && go version >&2)
stage=$(mktemp -d "$root/argocd/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
step "go build (argo-cd $version; a cold build takes about 4 minutes on 2 cores)"
(cd "$here" && go build "${GO_BUILD_FLAGS[@]}" -ldflags "$ldflags" -o "$stage/argocd-lua" .)
rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
mv "$stage" "$dir"
trap - EXIT
step "done"
echo "$dir/argocd-lua"
