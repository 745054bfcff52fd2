#!/usr/bin/env bash
# The `dir` backend's first build of issue 16's recipe: FROM scratch, COPY a
# tree of FILES files (default 50,000 of 4 KiB: 200 MB), then 19 small COPYs,
# so 19 `prepare`s copy the whole parent tree. One run per contender, side by
# side: on ext4 (WORKDIR's filesystem, whatever it is) and on a loop-mounted
# XFS with reflinks (mkfs.xfs -m reflink=1; needs root and xfsprogs), each
# with JBUILD and, if set, JBUILD_BEFORE (e.g. a release build of an older
# commit) interleaved. Run by hand, not in CI:
#
#   cargo build --release && JBUILD_BEFORE=/path/to/old/jbuild bash benches/dircopy.sh [WORKDIR]
#
# Environment: JBUILD (default target/release/jbuild), JBUILD_BEFORE, FILES,
# XFS=0 to skip the XFS runs, FIRST=now to time JBUILD before JBUILD_BEFORE.
# Each time includes a final sync (the build's writeback).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
jbuild=${JBUILD:-$repo/target/release/jbuild}
[ -x "$jbuild" ] || { echo "build jbuild first: cargo build --release" >&2; exit 1; }
files=${FILES:-50000}
work=${1:-$(mktemp -d /tmp/jbuild-bench-dircopy.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
export JBUILD_CONFIG=$work/jbuild.toml RUST_LOG=warn
unset SOURCE_DATE_EPOCH JBUILD_BACKEND
: > "$JBUILD_CONFIG"
mnt=$work/xfs
cleanup() { mountpoint -q "$mnt" 2>/dev/null && umount -d "$mnt"; true; }
trap cleanup EXIT

# The context: FILES files of 4 KiB in directories of 100, and 19 small files.
context() {
  python3 - "$1" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "tree", "d%04d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(4096))
for i in range(19):
    with open(os.path.join(root, "small%02d" % i), "w") as f:
        f.write("small %d\n" % i)
with open(os.path.join(root, "Jailfile"), "w") as f:
    f.write("FROM scratch\nCOPY tree/ /srv/tree/\n")
    for i in range(19):
        f.write("COPY small%02d /etc/small%02d\n" % (i, i))
PY
}

# build NAME BINARY FSDIR: one first build in an empty state root on FSDIR.
build() {
  local name=$1 bin=$2 dir=$3 state=$3/state start end
  rm -rf "$state"
  sync
  start=$(date +%s.%N)
  JBUILD_ROOT=$state "$bin" -q --backend dir build -t bench:1 "$dir/ctx" > /dev/null
  # The writeback it left is its cost too, not the next contender's.
  sync
  end=$(date +%s.%N)
  printf '%-22s %8.1f s\n' "$name" "$(echo "$end - $start" | bc)"
  rm -rf "$state"
}

mkdir -p "$work/ext4/ctx"
context "$work/ext4/ctx"
echo "context: $files files of 4 KiB + 19 small COPYs; $(df -T "$work" | awk 'NR==2 {print $2}') at $work"
if [ "${XFS:-1}" = 1 ]; then
  mkdir -p "$mnt"
  truncate -s 16G "$work/xfs.img"
  mkfs.xfs -q -f -m reflink=1 "$work/xfs.img"
  mount -o loop "$work/xfs.img" "$mnt"
  mkdir -p "$mnt/ctx"
  cp -a "$work/ext4/ctx/." "$mnt/ctx/"
fi
for fs in ext4 xfs; do
  [ "$fs" = xfs ] && [ "${XFS:-1}" != 1 ] && continue
  dir=$work/ext4; [ "$fs" = xfs ] && dir=$mnt
  if [ "${FIRST:-before}" = now ]; then
    build "$fs now" "$jbuild" "$dir"
    [ -n "${JBUILD_BEFORE:-}" ] && build "$fs before" "$JBUILD_BEFORE" "$dir"
  else
    [ -n "${JBUILD_BEFORE:-}" ] && build "$fs before" "$JBUILD_BEFORE" "$dir"
    build "$fs now" "$jbuild" "$dir"
  fi
done
