#!/usr/bin/env bash
# Builds crane, go-containerregistry's registry client, from its Go module (pinned in go.mod beside this script): the
# release command pushes its OCI layouts with it (`crane push --index`) and copies the signed artifacts between
# registries. Cached and printed as devtools/build-go-tool.sh says.
#
# go-containerregistry v0.22.1, the newest release the module proxy serves on 2026-11-26.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../build-go-tool.sh
source "$here/../build-go-tool.sh"
build_go_tool crane github.com/google/go-containerregistry github.com/google/go-containerregistry/cmd/crane '-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version={version}' "$here"
