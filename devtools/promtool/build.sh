#!/usr/bin/env bash
# Builds promtool, Prometheus' own rule checker and rule unit-test runner, from its Go module (the tool pinned in
# go.mod beside this script), for the tests of the chart's alert rules. Cached and printed as
# devtools/build-go-tool.sh says.
#
# Prometheus v0.316.0 (3.16, the newest release on 2026-11-26). Its whole dependency graph resolves from the module
# proxy with Go 1.26, 3.16's Nomad API client included (github.com/hashicorp/nomad/api
# v0.0.0-20261016150620-df630b26e78a).
#
# Built with Prometheus' own build tag remove_all_sd, which leaves out the service-discovery plugins (the cloud SDKs
# of AWS, GCE, Azure and the rest: 1,364 packages → 1,117): rule checks and rule unit tests never discover targets.
# promtool still imports its Kubernetes discovery itself, for `promtool check config`.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../build-go-tool.sh
source "$here/../build-go-tool.sh"
build_go_tool promtool github.com/prometheus/prometheus github.com/prometheus/prometheus/cmd/promtool '-s -w' "$here" remove_all_sd
