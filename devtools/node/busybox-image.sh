#!/usr/bin/env bash
# Packs Debian's static busybox (package busybox-static) into OCI image layout
# tarballs that `ctr images import` accepts, so a node can run containers with no
# registry:
#   devtools/node/busybox-image.sh OUTDIR
# writes OUTDIR/busybox.tar (name usergroup-operator.dev/e2e/busybox:1, Cmd sh) and
# OUTDIR/pause.tar (name usergroup-operator.dev/e2e/pause:1, a shell that sleeps until
# TERM/INT, for the CRI sandbox). Byte-for-byte reproducible for one busybox build.
set -euo pipefail
out=${1:?output directory}
bb=${BUSYBOX:-/bin/busybox}
file "$bb" 2>/dev/null | grep -q 'statically linked' || [ -n "${BUSYBOX:-}" ] || {
  echo "busybox-image.sh: $bb is not a static busybox; apt-get install busybox-static" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# Root filesystem: busybox and its applet links, the usual empty mount points.
r=$work/rootfs
mkdir -p "$r/bin" "$r/etc" "$r/proc" "$r/sys" "$r/dev" "$r/tmp" "$r/root" "$r/var/run"
chmod 1777 "$r/tmp"
cp "$bb" "$r/bin/busybox"
for a in $("$bb" --list); do [ "$a" = busybox ] || ln -s busybox "$r/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$r" -cf "$work/layer.tar" .

blob() { # file -> prints sha256 hex, stores the file as a blob of layout $2
  local d; d=$(sha256sum "$1" | cut -d' ' -f1)
  mkdir -p "$2/blobs/sha256"; cp "$1" "$2/blobs/sha256/$d"; echo "$d"
}
size() { stat -c %s "$1"; }

image() { # name layout-dir cmd-json
  local name=$1 l=$2 cmd=$3 ld cd md
  mkdir -p "$l"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$l/oci-layout"
  ld=$(blob "$work/layer.tar" "$l")
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"devtools/node/busybox-image.sh"}]}' \
    "$cmd" "$ld" > "$work/config.json"
  cd=$(blob "$work/config.json" "$l")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
    "$cd" "$(size "$work/config.json")" "$ld" "$(size "$work/layer.tar")" > "$work/manifest.json"
  md=$(blob "$work/manifest.json" "$l")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "$(size "$work/manifest.json")" "$name" "${name##*:}" > "$l/index.json"
}

image usergroup-operator.dev/e2e/busybox:1 "$work/busybox" '["sh"]'
image usergroup-operator.dev/e2e/pause:1 "$work/pause" \
  '["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"]'
for i in busybox pause; do
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/$i" -cf "$out/$i.tar" .
done
echo "$out/busybox.tar $out/pause.tar"
