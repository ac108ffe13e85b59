# Sourced by devtools/node/*-image.sh: writes a one-layer OCI image layout tarball that
# `ctr images import` accepts, with no registry and no Docker.
#   oci_image ROOTFS NAME CONFIG OUT.tar
# ROOTFS is a directory (becomes the single uncompressed layer: every file owned by root,
# mtime 0), NAME e.g.
# usergroup-operator.dev/e2e/busybox:1, CONFIG the JSON members of the image config's
# "config" object without braces (e.g. '"Cmd":["sh"],"WorkingDir":"/"').
# Reproducible: same inputs, same digests.

oci_tar() { # dir out.tar
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$1" -cf "$2" .
}

oci_image() {
  local rootfs=$1 name=$2 config=$3 out=$4 w l ld cd md
  w=$(mktemp -d)
  l=$w/layout
  mkdir -p "$l/blobs/sha256"
  _oci_blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$l/blobs/sha256/$d"; echo "$d"; }
  printf '{"imageLayoutVersion":"1.0.0"}' > "$l/oci-layout"
  oci_tar "$rootfs" "$w/layer.tar"
  ld=$(_oci_blob "$w/layer.tar")
  printf '{"architecture":"amd64","os":"linux","config":{%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"devtools/node/oci-image.sh"}]}' \
    "$config" "$ld" > "$w/config.json"
  cd=$(_oci_blob "$w/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
    "$cd" "$(stat -c %s "$w/config.json")" "$ld" "$(stat -c %s "$w/layer.tar")" > "$w/manifest.json"
  md=$(_oci_blob "$w/manifest.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "$(stat -c %s "$w/manifest.json")" "$name" "${name##*:}" > "$l/index.json"
  oci_tar "$l" "$out"
  rm -rf "$w"
}
