#!/usr/bin/env bash
# Builds argocd-lua (main.go and diff.go beside this script): Argo CD's own Lua VM, settings loader, health
# path and the application controller's diff, for the tests of deploy/argocd and of the v1alpha1 manifests. Caches the binary outside the checkout, keyed by everything that decides
# its bytes, and prints the binary's path as the last line of stdout; progress goes to stderr.
#
# Why Argo CD v3.2.12 and not the newest release, v3.6.1: from v3.3 on, argo-cd's go.mod replaces its
# gitops-engine with the ./gitops-engine folder, which the module zip leaves out, so v3.3–v3.5 cannot be built
# from the module proxy. v3.6 publishes that folder as its own module (github.com/argoproj/argo-cd/gitops-engine/v3
# v3.6.1), but its go.mod says `go 1.27.0`, and this project builds with the local Go 1.26 (GOTOOLCHAIN=local);
# `go mod download -json github.com/argoproj/argo-cd/v3@v3.6.1` answers (2026-11-26, Go 1.26.8):
#   "Error": "github.com/argoproj/argo-cd/v3@v3.6.1 requires go >= 1.27.0 (running go 1.26.8; GOTOOLCHAIN=local)"
# and the same for github.com/argoproj/argo-cd/gitops-engine/v3@v3.6.1. (The proxy does hold a Go 1.27.0
# toolchain, golang.org/toolchain v0.0.1-go1.27.0.linux-amd64: the block is this project's Go 1.26, not the proxy.)
# v3.2.12 is the newest release whose whole dependency graph resolves and builds on Go 1.26. Before building, this
# script compares the code the tests exercise with the code Argo CD v3.6.1 ships: it fetches v3.6.1's module zips
# (argo-cd and gitops-engine/v3) from the proxy (Go still downloads them and checks them against the checksum
# database before refusing to unpack them; their h1: sums are pinned below) and compares util/lua (the VM, its
# safe os library, action results), the resource-override loading of util/settings, ResourceOverride.GetActions,
# gitops-engine's pkg/health/health.go, and the diff path of `argocd-lua diff` (diff.go: pkg/diff's ThreeWayDiff,
# TwoWayDiff, threeWayMergePatch, Normalize, remarshal, GetLastAppliedConfigAnnotation, and the version
# conversion, convertToVersionWithScheme and KubectlCmd.ConvertToVersion) with the same code of v3.2.12 and its
# gitops-engine. Any difference beyond argo-cd-v3.6.1.diff fails the build. What that file holds:
#   - import paths (gitops-engine moved into the argo-cd repository) and errors.AsType / reflect.TypeFor for
#     errors.As / reflect.TypeOf: equivalent;
#   - v3.6 caches compiled scripts: LoadString (or NewFunctionFromProto of a cached proto, the same function with
#     the same environment) then PCall(0, MultRet, nil), which is exactly gopher-lua's DoString that v3.2 calls:
#     equivalent;
#   - a health script that returns nil now gives no health (nil) instead of an empty one: deploy/argocd's
#     health.lua always returns a table (its last line is `return hs`), so it never takes that branch;
#   - NOT equivalent, for an object being deleted: v3.6 runs the health script first and then, unless the script
#     sets hs.deletionMessage, reports Progressing "Pending deletion; blocked by finalizers: <finalizers>"
#     (v3.2–v3.5: Progressing "Pending deletion", script not run). The tests expect v3.2's message; with v3.6 the
#     status is the same and the message names the finalizers (see deploy/argocd/README.md).
# The diff path's compared functions are identical (no entry in the file). Compared by hand only: Diff's entry
# (v3.6 adds a context argument and picks server-side diff for a target annotated ServerSideApply=true, which the
# tests' are not), argodiff.StateDiffs (v3.6 adds ignore-differences read from annotations on the target, which
# the tests' targets do not carry, and drops the structured-merge-diff option, off by default), and GetManagedLiveObjs (v3.6 snapshots the cache and keeps manifests
# compressed; the same conversion, and the same GET in the target's version when conversion fails).
# gopher-lua, the Lua engine itself, is pinned to v3.6.1's version in go.mod.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -p=2" CGO_ENABLED=0
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || {
  echo "argocd/build.sh: Go is required to build argocd-lua (see README: Requirements); not found on PATH or in /usr/local/go/bin" >&2
  exit 1
}

built_from=v3.2.12 # must match the require in go.mod
checked_against=v3.6.1
# Their module zips' sums, as the checksum database has them (go mod download checks them against it).
checked_against_sum="h1:OmhqeKiR3C//awbFrhQqFdtRI+Qiv17j8vqm3UkMj/g="
checked_against_engine_sum="h1:e9NghanU6O6PrxHq4+PaYxd6Rpe0kC48C2Opkpgx/LQ="
grep -q "github.com/argoproj/argo-cd/v3 $built_from\$" "$here/go.mod" || { echo "argocd/build.sh: go.mod does not require argo-cd $built_from" >&2; exit 1; }

ldflags="-s -w"
key=$( { go version; echo "$GOFLAGS $CGO_ENABLED -trimpath $ldflags $checked_against"; cat "$here/go.mod" "$here/go.sum" "$here"/*.go "$here/argo-cd-$checked_against.diff"; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/argocd/$built_from-$key"
if [ -x "$dir/argocd-lua" ]; then echo "$dir/argocd-lua"; exit 0; fi

mkdir -p "$root/argocd"
exec 9>"$root/argocd/.lock"
flock -n 9 || { echo "argocd-lua: another build holds $root/argocd/.lock; waiting" >&2; flock 9; }
if [ -x "$dir/argocd-lua" ]; then echo "$dir/argocd-lua"; exit 0; fi

started=$SECONDS
step() { echo "argocd-lua: [$(( SECONDS - started ))s] $*" >&2; }

module_json() { # module version → go mod download's JSON answer (the module fetched from the proxy if missing)
  (cd "$(mktemp -d)" && GOFLAGS= go mod download -json "$1@$2" || true)
}
json_field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p"; }
module_dir() { # module version → the unpacked module in the module cache
  module_json "$1" "$2" | json_field Dir
}
# v3.6.1 needs Go 1.27, so Go downloads and verifies its zips but will not unpack them: unpack them ourselves,
# from the zips whose sums are pinned above, into the cache (outside the checkout).
module_zip_dir() { # module version sum → a directory with the module's files
  local answer zip sum out
  answer=$(module_json "$1" "$2")
  zip=$(echo "$answer" | json_field Zip); sum=$(echo "$answer" | json_field Sum)
  [ -f "$zip" ] || { echo "argocd/build.sh: the module proxy gave no zip for $1@$2: $answer" >&2; return 1; }
  [ "$sum" = "$3" ] || { echo "argocd/build.sh: $1@$2's zip has sum $sum, expected $3" >&2; return 1; }
  out="$root/argocd/src/$(echo "$1" | tr / _)@$2"
  if [ ! -d "$out/pkg" ]; then
    rm -rf "$out.tmp"; mkdir -p "$out.tmp"
    unzip -qq "$zip" "$1@$2/pkg/*" "$1@$2/util/*" -d "$out.tmp" 2>/dev/null || [ $? -eq 11 ] # 11: gitops-engine has no util/
    rm -rf "$out"; mv "$out.tmp/$1@$2" "$out"; rm -rf "$out.tmp"
  fi
  echo "$out"
}
# The body of a top-level Go function, from its signature line to the closing brace.
function_body() { awk -v f="$2" 'index($0, f) == 1 { p = 1 } p { print } p && /^}/ { exit }' "$1"; }
bodies() { # file function-signature-prefix… → their bodies, each under a heading
  local file=$1 f; shift
  for f in "$@"; do
    echo "== ${file#"$m"/}: $f"; function_body "$file" "$f" | grep . || { echo "missing in $file: $f" >&2; return 1; }
  done
}
compared() { # argo-cd module dir, gitops-engine module dir → the compared code as one text
  local m=$1 f
  for f in lua.go oslib_safe.go impacted_resource.go; do echo "== util/lua/$f"; cat "$m/util/lua/$f"; done
  bodies "$m/util/settings/settings.go" 'func (mgr *SettingsManager) GetResourceOverrides(' \
    'func (mgr *SettingsManager) appendResourceOverridesFromSplitKeys(' 'func convertToOverrideKey(' 'func addStatusOverrideToGK('
  bodies "$m/pkg/apis/application/v1alpha1/types.go" 'func (ro *ResourceOverride) GetActions('
  # The diff path of `argocd-lua diff` (diff.go): the client-side three-way diff and the version conversion.
  m=$2
  echo "== pkg/health/health.go"; cat "$m/pkg/health/health.go"
  bodies "$m/pkg/diff/diff.go" 'func ThreeWayDiff(' 'func TwoWayDiff(' 'func threeWayMergePatch(' 'func Normalize(' \
    'func remarshal(' 'func GetLastAppliedConfigAnnotation('
  bodies "$m/pkg/utils/kube/convert.go" 'func convertToVersionWithScheme('
  bodies "$m/pkg/utils/kube/ctl.go" 'func (k *KubectlCmd) ConvertToVersion('
}

step "checking that argo-cd $built_from runs the same Lua, health and diff code as $checked_against"
gitops_engine=$(cd "$here" && go list -m -f '{{.Path}} {{.Version}}' github.com/argoproj/gitops-engine)
old=$(module_dir github.com/argoproj/argo-cd/v3 "$built_from"); old_engine=$(module_dir $gitops_engine) # shellcheck disable=SC2086 # module and version, split on purpose
new=$(module_zip_dir github.com/argoproj/argo-cd/v3 "$checked_against" "$checked_against_sum")
new_engine=$(module_zip_dir github.com/argoproj/argo-cd/gitops-engine/v3 "$checked_against" "$checked_against_engine_sum")
[ -d "$old" ] && [ -d "$old_engine" ] && [ -d "$new" ] && [ -d "$new_engine" ] ||
  { echo "argocd/build.sh: cannot download argo-cd $built_from / $checked_against and their gitops-engines from the module proxy" >&2; exit 1; }
old_code=$(compared "$old" "$old_engine"); new_code=$(compared "$new" "$new_engine")
if ! diff <(diff <(echo "$old_code") <(echo "$new_code") || true) "$here/argo-cd-$checked_against.diff" >&2; then
  echo "argocd/build.sh: the code of argo-cd $built_from and $checked_against differs beyond argo-cd-$checked_against.diff (shown above: '<' lines are new differences)" >&2
  exit 1
fi
lua_want=$(sed -n 's#^[[:space:]]*github.com/yuin/gopher-lua \(v[^ ]*\).*#\1#p' "$(module_json github.com/argoproj/argo-cd/v3 "$checked_against" | json_field GoMod)")
lua_have=$(cd "$here" && go list -m -f '{{.Version}}' github.com/yuin/gopher-lua)
[ "$lua_want" = "$lua_have" ] || { echo "argocd/build.sh: gopher-lua is $lua_have here but $lua_want in argo-cd $checked_against; pin it in go.mod" >&2; exit 1; }

stage=$(mktemp -d "$root/argocd/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
step "go build (argo-cd $built_from, gopher-lua $lua_have; a cold build takes a few minutes on 2 cores)"
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$stage/argocd-lua" .)
rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
mv "$stage" "$dir"
trap - EXIT
step "done"
echo "$dir/argocd-lua"
