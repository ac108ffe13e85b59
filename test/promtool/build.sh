#!/usr/bin/env bash
# Builds promtool, Prometheus' own rule checker and rule unit-test runner, from its Go module (the tool pinned in
# go.mod beside this script), for the tests of the chart's alert rules. Cached and printed as
# test/support/build-go-tool.sh says.
#
# Why Prometheus v0.315.0 (3.15) and not v0.316.0: promtool imports every service-discovery plugin, and 3.16's
# Nomad API client is a version the module proxy refuses (403); 3.15's whole dependency graph resolves.
#
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../support/build-go-tool.sh
source "$here/../support/build-go-tool.sh"
build_go_tool promtool github.com/prometheus/prometheus github.com/prometheus/prometheus/cmd/promtool '-s -w' "$here"
