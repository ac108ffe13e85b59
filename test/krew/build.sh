#!/usr/bin/env bash
# Builds krew, the kubectl plugin manager, from its Go module (the version pinned in go.mod beside this script),
# so the kubectl plugin's integration test installs the release the way its users do: `kubectl krew install`.
# Caches the binary outside the checkout, keyed by everything that decides its bytes, and prints the binary's
# path as the last line of stdout; progress goes to stderr.
#
# Why krew v0.4.4 and not v0.4.5 (the newest release): the module proxy refuses v0.4.5 (403) and lists no
# versions; v0.4.4 and its whole dependency graph resolve.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -p=2" CGO_ENABLED=0
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || {
  echo "krew/build.sh: Go is required to build krew (see README: Requirements); not found on PATH or in /usr/local/go/bin" >&2
  exit 1
}

version=$(sed -n 's#^[[:space:]]*sigs.k8s.io/krew \(v[^ ]*\).*#\1#p' "$here/go.mod" | head -1)
[ -n "$version" ] || { echo "krew/build.sh: go.mod does not require sigs.k8s.io/krew" >&2; exit 1; }
# krew's release build stamps its tag the same way (`kubectl krew version` prints it); without it krew calls
# itself a development build.
ldflags="-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$version"
key=$( { go version; echo "$GOFLAGS $CGO_ENABLED -trimpath $ldflags"; cat "$here/go.mod" "$here/go.sum"; } | sha256sum | cut -c1-16)
root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
dir="$root/krew/$version-$key"
if [ -x "$dir/krew" ]; then echo "$dir/krew"; exit 0; fi

mkdir -p "$root/krew"
exec 9>"$root/krew/.lock"
flock -n 9 || { echo "krew: another build holds $root/krew/.lock; waiting" >&2; flock 9; }
if [ -x "$dir/krew" ]; then echo "$dir/krew"; exit 0; fi

started=$SECONDS
stage=$(mktemp -d "$root/krew/.build-XXXXXX")
trap 'rm -rf "$stage"' EXIT
echo "krew: [0s] go build sigs.k8s.io/krew/cmd/krew $version (a cold build takes about a minute on 2 cores)" >&2
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$stage/krew" sigs.k8s.io/krew/cmd/krew)
rm -rf "$dir"
mv "$stage" "$dir"
trap - EXIT
echo "krew: [$(( SECONDS - started ))s] done" >&2
echo "$dir/krew"
