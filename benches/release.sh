#!/usr/bin/env bash
# FROM freebsd:<release> against what a jail manager does by hand (fetch,
# sha256, `tar -xJf`), side by side. Run by hand, on a quiet machine, after
# `cargo build --release`:
#
#     bash benches/release.sh [TREE]
#
# TREE (default /usr/share) is packed into a synthetic base.txz and served
# from 127.0.0.1 by python3's http.server. It is packed as FreeBSD packs
# its sets: `tar cvf - . | ${XZ_CMD}` in Makefile.inc1's packageworld, with
# XZ_CMD = `xz -T ${XZ_THREADS}` and XZ_THREADS ?= 0 (share/mk/bsd.own.mk),
# i.e. `xz -6 -T0`: one stream of 24 MiB blocks (`xz -lv` lists them), which
# liblzma's multithreaded decoder splits across cores. BASE_TXZ=FILE uses a
# set packed before (TREE is then only named). Timed, best of 3, alternated:
#   jbuild:    jbuild build (FROM freebsd:14.3 only) — MANIFEST, download,
#              sha256, xz decode, path-safe extract, snapshot commit, and the
#              export of the layer (zstd) that every build ends with;
#   reference: curl | tee >(sha256sum) | xz -d | tar -x, then tar | zstd -3
#              (the same work with the usual tools).
# Prints wall times and the ratio reference / jbuild (above 1: jbuild faster).
# Both times end with `sync` (jbuild syncs what it commits; the writeback the
# reference leaves behind is its cost too). Trees are not deleted before a
# timed run but renamed aside, and deleted on exit: on ext4 without a
# journal, creating files within minutes of deleting many others of the
# same block groups costs a scan per inode (see benches/build.sh).
# JBUILD names the binary (default target/release/jbuild); JBUILD_BEFORE, if
# set, another one (an older commit's) timed in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:-/usr/share}
bin=${JBUILD:-$PWD/target/release/jbuild}
before=${JBUILD_BEFORE:-}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT

rel=$work/mirror/amd64/14.3-RELEASE
mkdir -p "$rel"
if [ -n "${BASE_TXZ:-}" ]; then
  cp "$BASE_TXZ" "$rel/base.txz"
else
  tar -C "$tree" -cf - . | xz -6 -T0 > "$rel/base.txz"
fi
sum=$(sha256sum "$rel/base.txz" | cut -d' ' -f1)
printf 'base.txz\t%s\t1\tbase\t"Base system"\ton\n' "$sum" > "$rel/MANIFEST"
echo "base.txz: $(du -h "$rel/base.txz" | cut -f1) compressed, $(xz -l "$rel/base.txz" | awk 'NR==2 {print $2}') blocks, $(du -sh "$tree" | cut -f1) tree"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$work/mirror" "$port" >/dev/null 2>&1 &
server=$!
sleep 1
url=http://127.0.0.1:$port
mkdir -p "$work/ctx"
echo 'FROM freebsd:14.3' > "$work/ctx/Jailfile"

now() { date +%s.%N; }
# retire TREE: out of the way without freeing an inode (see above).
retire() { if [ -e "$1" ]; then mkdir -p "$work/grave" && mv "$1" "$(mktemp -u "$work/grave/t.XXXXXX")"; fi; }
jbuild() {
  retire "$work/root"
  local t0 t1
  sync
  t0=$(now)
  JBUILD_ROOT=$work/root JBUILD_CONFIG=/dev/null "$1" -q build --compression zstd \
    --platform freebsd/amd64 --mirror "$url" "$work/ctx" >/dev/null ||
    { echo "$1 failed" >&2; exit 1; }
  sync
  t1=$(now)
  echo "$t1 - $t0" | bc
}
best_j=999999 best_r=999999 best_b=999999
for i in 1 2 3; do
  if [ -n "$before" ]; then
    b=$(jbuild "$before")
    best_b=$(echo "if ($b < $best_b) $b else $best_b" | bc)
  fi
  j=$(jbuild "$bin")
  retire "$work/ref" && retire "$work/ref.tar.zst" && mkdir -p "$work/ref"
  sync
  t2=$(now)
  curl -s "$url/amd64/14.3-RELEASE/base.txz" | tee >(sha256sum > "$work/ref.sum") | xz -d | tar -x -C "$work/ref"
  tar -C "$work/ref" -cf - . | zstd -q -T0 -3 > "$work/ref.tar.zst"
  sync
  t3=$(now)
  r=$(echo "$t3 - $t2" | bc)
  best_j=$(echo "if ($j < $best_j) $j else $best_j" | bc)
  best_r=$(echo "if ($r < $best_r) $r else $best_r" | bc)
done
[ -n "$before" ] && printf 'JBUILD_BEFORE: %.2f s (ratio %.2fx)\n' "$best_b" "$(echo "$best_r / $best_b" | bc -l)"
printf 'jbuild build FROM freebsd: %.2f s\nreference (curl|sha256|xz|tar, tar|zstd): %.2f s\nratio: %.2fx\n' \
  "$best_j" "$best_r" "$(echo "$best_r / $best_j" | bc -l)"
