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
. "$(dirname "$0")/oci-image.sh"
oci_image "$r" usergroup-operator.dev/e2e/busybox:1 '"Env":["PATH=/bin"],"Cmd":["sh"],"WorkingDir":"/"' "$out/busybox.tar"
oci_image "$r" usergroup-operator.dev/e2e/pause:1 \
  '"Env":["PATH=/bin"],"Cmd":["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"],"WorkingDir":"/"' \
  "$out/pause.tar"
echo "$out/busybox.tar $out/pause.tar"
