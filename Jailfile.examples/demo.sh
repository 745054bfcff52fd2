#!/usr/bin/env bash
# Builds jbuild, builds the static-site example on the default `dir`
# backend (no ZFS, no root needed), shows it, exports it as an OCI layout
# and an OCI archive, and reads both back with skopeo when it is installed.
# State goes to a temporary JBUILD_ROOT that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
jbuild() { ./target/release/jbuild "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export JBUILD_ROOT=$work/root

echo "== build (first time: every step runs)"
jbuild build -t site:latest --build-arg SITE_NAME=www.example.net Jailfile.examples/static-site
echo "== build again (every step cached)"
jbuild build -t site:latest --build-arg SITE_NAME=www.example.net Jailfile.examples/static-site
echo "== images"; jbuild images
echo "== history"; jbuild history site:latest
echo "== export"
jbuild export site:latest "oci:$work/site-oci:latest"
jbuild export site:latest "oci-archive:$work/site.tar"
if command -v skopeo >/dev/null; then
  skopeo inspect "oci:$work/site-oci:latest" | head -n 12
  skopeo inspect "oci-archive:$work/site.tar" >/dev/null && echo "skopeo reads the archive too"
fi
if command -v umoci >/dev/null; then
  umoci raw unpack --rootless --image "$work/site-oci:latest" "$work/rootfs" 2>/dev/null
  echo "== unpacked by umoci:"; (cd "$work/rootfs" && find . -type f | sort)
  echo "== rendered server block:"; cat "$work/rootfs/usr/local/etc/nginx/conf.d/site.conf"
fi
