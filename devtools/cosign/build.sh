#!/usr/bin/env bash
# Builds cosign, Sigstore's signer, from its Go module (the tool pinned in go.mod beside this script): the release
# command (npm run release) signs the image and the chart with it, the e2e suite verifies them from its registry.
# Cached and printed as devtools/build-go-tool.sh says.
#
# cosign v3.1.3, the newest release the module proxy serves on 2026-11-26.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../build-go-tool.sh
source "$here/../build-go-tool.sh"
# cosign's release build stamps its version the same way (`cosign version` prints it).
build_go_tool cosign github.com/sigstore/cosign/v3 github.com/sigstore/cosign/v3/cmd/cosign '-s -w -X sigs.k8s.io/release-utils/version.gitVersion={version}' "$here"
