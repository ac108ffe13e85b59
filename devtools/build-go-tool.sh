# Sourced by devtools/promtool/build.sh and devtools/krew/build.sh: builds one tool from its Go module, pinned in the go.mod
# beside the calling script. Caches the binary outside the checkout, keyed by everything that decides its bytes, and
# prints the binary's path as the last line of stdout; progress goes to stderr.
#
#   build_go_tool <name> <module> <package> <ldflags> <dir of go.mod> [build tags, comma-separated]
#   USERGROUP_OPERATOR_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/usergroup-operator)
build_go_tool() {
  local name=$1 module=$2 package=$3 ldflags=$4 here=$5 tags=${6:-}
  # shellcheck source=go-env.sh
  source "$here/../go-env.sh"
  go_env local "$name/build.sh"
  local version
  version=$(sed -n "s#^[[:space:]]*$module \\(v[^ ]*\\).*#\\1#p" "$here/go.mod" | head -1)
  [ -n "$version" ] || { echo "$name/build.sh: go.mod does not require $module" >&2; exit 1; }
  ldflags=${ldflags//'{version}'/$version}
  local key root dir
  key=$( { go version; echo "$GOFLAGS $CGO_ENABLED ${GO_BUILD_FLAGS[*]} $tags $ldflags"; cat "$here/go.mod" "$here/go.sum"; } | sha256sum | cut -c1-16)
  root=${USERGROUP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set (or set USERGROUP_OPERATOR_CACHE)}/.cache}/usergroup-operator}
  dir="$root/$name/$version-$key"
  if [ -x "$dir/$name" ]; then echo "$dir/$name"; exit 0; fi

  mkdir -p "$root/$name"
  exec 9>"$root/$name/.lock"
  flock -n 9 || { echo "$name: another build holds $root/$name/.lock; waiting" >&2; flock 9; }
  if [ -x "$dir/$name" ]; then echo "$dir/$name"; exit 0; fi

  local started=$SECONDS stage
  stage=$(mktemp -d "$root/$name/.build-XXXXXX")
  # shellcheck disable=SC2064 # the stage directory is fixed now
  trap "rm -rf '$stage'" EXIT
  echo "$name: [0s] go build $package $version (a cold build takes a minute or more on 2 cores)" >&2
  (cd "$here" && go build "${GO_BUILD_FLAGS[@]}" ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$stage/$name" "$package")
  rm -rf "$dir"
  mv "$stage" "$dir"
  trap - EXIT
  echo "$name: [$(( SECONDS - started ))s] done" >&2
  echo "$dir/$name"
}
