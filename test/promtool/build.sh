#!/usr/bin/env bash
# Builds promtool, Prometheus' own rule checker and rule unit-test runner, from its Go module (the tool pinned in
# go.mod beside this script), for the tests of the chart's alert rules. Caches the binary outside the checkout,
# keyed by everything that decides its bytes, and prints the binary's path as the last line of stdout; progress
# goes to stderr.
#
# Why Prometheus v0.315.0 (3.15) and not v0.316.0: promtool imports every service-discovery plugin, and 3.16's
# Nomad API client is a version the module proxy refuses (403); 3.15's whole dependency graph resolves.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -p=2" CGO_ENABLED=0
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || {
  echo "promtool/build.sh: Go is required to build promtool (see README: Requirements); not found on PATH or in /usr/local/go/bin" >&2
  exit 1
}

version=$(sed -n 's#^[[:space:]]*github.com/prometheus/prometheus \(v[^ ]*\).*#\1#p' "$here/go.mod" | head -1)
[ -n "$version" ] || { echo "promtool/build.sh: go.mod does not require github.com/prometheus/prometheus" >&2; exit 1; }
ldflags="-s -w"
key=$( { go version; echo "$GOFLAGS $CGO_ENABLED -trimpath $ldflags"; cat "$here/go.mod" "$here/go.sum"; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/promtool/$version-$key"
if [ -x "$dir/promtool" ]; then echo "$dir/promtool"; exit 0; fi

mkdir -p "$root/promtool"
exec 9>"$root/promtool/.lock"
flock -n 9 || { echo "promtool: another build holds $root/promtool/.lock; waiting" >&2; flock 9; }
if [ -x "$dir/promtool" ]; then echo "$dir/promtool"; exit 0; fi

started=$SECONDS
stage=$(mktemp -d "$root/promtool/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
echo "promtool: [0s] go build github.com/prometheus/prometheus/cmd/promtool $version (a cold build takes a few minutes on 2 cores)" >&2
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$stage/promtool" github.com/prometheus/prometheus/cmd/promtool)
rm -rf "$dir"
mv "$stage" "$dir"
trap - EXIT
echo "promtool: [$(( SECONDS - started ))s] done" >&2
echo "$dir/promtool"
