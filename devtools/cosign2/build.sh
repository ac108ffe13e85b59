#!/usr/bin/env bash
# Builds cosign 2.x, the major most verifiers still run (Kyverno, policy-controller and many CI setups pin it), from its
# Go module (pinned in go.mod beside this script): the e2e suite verifies the release with it as well as with cosign 3
# (devtools/cosign). Cached and printed as devtools/build-go-tool.sh says.
#
# cosign v2.6.5, the newest v2 release the module proxy serves on 2026-11-28.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../build-go-tool.sh
source "$here/../build-go-tool.sh"
build_go_tool cosign2 github.com/sigstore/cosign/v2 github.com/sigstore/cosign/v2/cmd/cosign '-s -w -X sigs.k8s.io/release-utils/version.gitVersion={version}' "$here"
