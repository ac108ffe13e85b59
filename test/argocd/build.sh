#!/usr/bin/env bash
# Builds argocd-lua (main.go beside this script): Argo CD's own Lua VM, settings loader and health path,
# for the tests of deploy/argocd. Caches the binary outside the checkout, keyed by everything that decides
# its bytes, and prints the binary's path as the last line of stdout; progress goes to stderr.
#
# Why Argo CD v3.2.12 and not v3.5: from v3.3 on, argo-cd's go.mod replaces its gitops-engine with the
# ./gitops-engine folder, which the module zip leaves out, so v3.3–v3.5 cannot be built from the module
# proxy (v3.6 can again, but needs Go 1.27). v3.2.12 is the newest release whose whole dependency graph
# resolves from the proxy. Before building, this script proves that the code the tests exercise is the
# code Argo CD v3.5.7 ships: it downloads v3.5.7 from the proxy and compares util/lua (the VM, its safe os
# library, action results), the resource-override loading of util/settings, and ResourceOverride.GetActions
# with the same files of v3.2.12; the only difference allowed is argo-cd-v3.5.7.diff (an import path and an
# equivalent reflect call). gopher-lua, the Lua engine itself, is pinned to v3.5.7's version in go.mod.
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
checked_against=v3.5.7
grep -q "github.com/argoproj/argo-cd/v3 $built_from\$" "$here/go.mod" || { echo "argocd/build.sh: go.mod does not require argo-cd $built_from" >&2; exit 1; }

ldflags="-s -w"
key=$( { go version; echo "$GOFLAGS $CGO_ENABLED -trimpath $ldflags $checked_against"; cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/argo-cd-$checked_against.diff"; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/argocd/$built_from-$key"
if [ -x "$dir/argocd-lua" ]; then echo "$dir/argocd-lua"; exit 0; fi

mkdir -p "$root/argocd"
exec 9>"$root/argocd/.lock"
flock -n 9 || { echo "argocd-lua: another build holds $root/argocd/.lock; waiting" >&2; flock 9; }
if [ -x "$dir/argocd-lua" ]; then echo "$dir/argocd-lua"; exit 0; fi

started=$SECONDS
step() { echo "argocd-lua: [$(( SECONDS - started ))s] $*" >&2; }

module_dir() { # version → the unpacked module in the module cache (downloaded from the proxy if missing)
  (cd "$(mktemp -d)" && GOFLAGS= go mod download -json "github.com/argoproj/argo-cd/v3@$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
# The body of a top-level Go function, from its signature line to the closing brace.
function_body() { awk -v f="$2" 'index($0, f) == 1 { p = 1 } p { print } p && /^}/ { exit }' "$1"; }
compared() { # module dir → the compared code as one text
  local m=$1 f
  for f in lua.go oslib_safe.go impacted_resource.go; do echo "== util/lua/$f"; cat "$m/util/lua/$f"; done
  for f in 'func (mgr *SettingsManager) GetResourceOverrides(' 'func (mgr *SettingsManager) appendResourceOverridesFromSplitKeys(' \
    'func convertToOverrideKey(' 'func addStatusOverrideToGK('; do
    echo "== util/settings/settings.go: $f"; function_body "$m/util/settings/settings.go" "$f" | grep . || { echo "missing: $f" >&2; return 1; }
  done
  echo "== pkg/apis/application/v1alpha1/types.go: GetActions"
  function_body "$m/pkg/apis/application/v1alpha1/types.go" 'func (ro *ResourceOverride) GetActions(' | grep . || { echo "missing: GetActions" >&2; return 1; }
}

step "checking that argo-cd $built_from runs the same Lua code as $checked_against"
old=$(module_dir "$built_from"); new=$(module_dir "$checked_against")
[ -d "$old" ] && [ -d "$new" ] || { echo "argocd/build.sh: cannot download argo-cd $built_from / $checked_against from the module proxy" >&2; exit 1; }
old_code=$(compared "$old"); new_code=$(compared "$new")
if ! diff <(diff <(echo "$old_code") <(echo "$new_code") || true) "$here/argo-cd-$checked_against.diff" >&2; then
  echo "argocd/build.sh: the Lua code of argo-cd $built_from and $checked_against differs beyond argo-cd-$checked_against.diff (shown above: '<' lines are new differences)" >&2
  exit 1
fi
lua_want=$(sed -n 's#^[[:space:]]*github.com/yuin/gopher-lua \(v[^ ]*\).*#\1#p' "$new/go.mod")
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
