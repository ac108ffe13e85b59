#!/usr/bin/env bash
# Packs the operator as an OCI image layout tarball without Docker or a registry, for
# the one-node cluster of devtools/node (issue 19):
#   devtools/node/operator-image.sh OUT.tar [NAME]
# NAME defaults to usergroup-operator.dev/e2e/usergroup-operator:dev. The runtime stage of
# the Dockerfile, approximated from this machine: the project's Node binary
# (node_modules/node) at /nodejs/bin/node with the shared libraries ldd lists, /app with
# package.json, dist/ (npm run build), crds/ and the production packages of
# package-lock.json; ENTRYPOINT, CMD and ENV read from the Dockerfile; user 65532.
# Not the distroless base: only a stand-in until images can be built here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?output tarball}
name=${2:-usergroup-operator.dev/e2e/usergroup-operator:dev}
node=$repo/node_modules/node/bin/node
[ -x "$node" ] || { echo "operator-image.sh: $node missing (npm ci first)" >&2; exit 1; }

entrypoint=$(sed -n 's/^ENTRYPOINT \(\[.*\]\)$/\1/p' "$repo/Dockerfile" | tail -n1)
cmd=$(sed -n 's/^CMD \(\[.*\]\)$/\1/p' "$repo/Dockerfile" | tail -n1)
env=$(sed -n 's/^ENV //p' "$repo/Dockerfile" | tail -n1)
[ -n "$entrypoint" ] && [ -n "$cmd" ] || { echo "operator-image.sh: no ENTRYPOINT/CMD JSON arrays in the Dockerfile" >&2; exit 1; }
grep -q '^WORKDIR /app$' "$repo/Dockerfile" && grep -q '^USER 65532:65532$' "$repo/Dockerfile" ||
  echo "operator-image.sh: warning: the Dockerfile's WORKDIR/USER changed; this script assumes /app and 65532" >&2
envjson=$(printf '%s\n' $env | sed 's/.*/"&"/' | paste -sd, -)

echo "operator-image.sh: npm run build" >&2
(cd "$repo" && PATH="$repo/node_modules/node/bin:$PATH" npm run --silent build >&2)

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
r=$work/rootfs
mkdir -p "$r/nodejs/bin" "$r/app/node_modules" "$r/etc/ssl/certs" "$r/tmp" "$r/proc" "$r/sys" "$r/dev"
chmod 1777 "$r/tmp"
cp "$node" "$r/nodejs/bin/node"
for lib in $(ldd "$node" | grep -o '/[^ ]*'); do
  mkdir -p "$r$(dirname "$lib")"; cp -L "$lib" "$r$lib"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$r/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$r/etc/group"
[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/"
cp "$repo/package.json" "$r/app/"
cp -r "$repo/dist" "$repo/crds" "$r/app/"
# Production packages: every node_modules/ entry of the lockfile not marked dev (and present).
"$node" -e '
  const lock = require(process.argv[1]);
  for (const [p, v] of Object.entries(lock.packages)) if (p.startsWith("node_modules/") && !v.dev) console.log(p);
' "$repo/package-lock.json" | while read -r p; do
  [ -e "$repo/$p" ] && [ ! -e "$r/app/$p" ] || continue
  mkdir -p "$r/app/$(dirname "$p")"; cp -rL "$repo/$p" "$r/app/$p"
done

. "$here/oci-image.sh"
oci_image "$r" "$name" "\"User\":\"65532:65532\",\"Env\":[$envjson],\"Entrypoint\":$entrypoint,\"Cmd\":$cmd,\"WorkingDir\":\"/app\"" "$out"
echo "operator-image.sh: $name, $(du -h "$out" | cut -f1)" >&2
echo "$out"
