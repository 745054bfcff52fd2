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
. "$(dirname "$0")/recipe.sh"
recipe_context "$ctx" "$files"
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
