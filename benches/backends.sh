#!/usr/bin/env bash
# The first build of issue 16's recipe on the `dir` and `overlay` backends,
# side by side in one run: FROM scratch, COPY of a 50,000-file tree (about
# 200 MB), then 19 small COPYs; then a fully cached rebuild on each.
#
#   cargo build --release && sudo bash benches/backends.sh [WORKDIR]
#
# JBUILD_BENCH_FILES changes the number of files; JBUILD is the binary
# (default target/release/jbuild). Needs root (overlay mounts).
set -euo pipefail
jb=$(realpath "${JBUILD:-target/release/jbuild}")
work=${1:-$(mktemp -d /var/tmp/jbuild-backends.XXXXXX)}
files=${JBUILD_BENCH_FILES:-50000}
ctx=$work/ctx
mkdir -p "$ctx/tree"
python3 - "$ctx/tree" "$files" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
r = random.Random(16)
for i in range(n):
    d = os.path.join(root, "d%02d/s%02d" % (i % 20, (i // 20) % 25))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d" % i), "wb") as f:
        f.write(r.randbytes(r.randrange(0, 8193)))
PY
{
  echo "FROM scratch"
  echo "COPY tree /srv/tree"
  for i in $(seq 1 19); do
    echo "small $i" > "$ctx/small$i"
    echo "COPY small$i /etc/small$i"
  done
} > "$ctx/Jailfile"
echo "tree: $(find "$ctx/tree" -type f | wc -l) files, $(du -sm "$ctx/tree" | cut -f1) MB"

secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
declare -A first cached
for backend in dir overlay; do
  root=$work/root-$backend
  rm -rf "$root"
  sync
  first[$backend]=$(secs env JBUILD_ROOT="$root" "$jb" --backend "$backend" -q build -t bench:1 "$ctx")
  cached[$backend]=$(secs env JBUILD_ROOT="$root" "$jb" --backend "$backend" -q build -t bench:1 "$ctx")
  echo "$backend: first build ${first[$backend]} s, cached rebuild ${cached[$backend]} s, snapshots $(du -sm "$root/snapshots" | cut -f1) MB"
done
echo "overlay / dir, first build: $(echo "scale=3; ${first[overlay]} / ${first[dir]}" | bc)"
rm -rf "$work"
