#!/usr/bin/env bash
# Builds krew, the kubectl plugin manager, from its Go module (the version pinned in go.mod beside this script),
# so the kubectl plugin's integration test installs the release the way its users do: `kubectl krew install`.
# Cached and printed as devtools/build-go-tool.sh says.
#
# Why krew v0.4.4 and not v0.4.5 (the newest release): the module proxy refuses v0.4.5 (403) and lists no
# versions; v0.4.4 and its whole dependency graph resolve.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../build-go-tool.sh
source "$here/../build-go-tool.sh"
# krew's release build stamps its tag the same way (`kubectl krew version` prints it); without it krew calls
# itself a development build.
build_go_tool krew sigs.k8s.io/krew sigs.k8s.io/krew/cmd/krew '-s -w -X sigs.k8s.io/krew/internal/version.gitTag={version}' "$here"
