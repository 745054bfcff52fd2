#!/usr/bin/env bash
# PKG on Linux against the machine's limit for the same work. Run by hand,
# on a quiet machine, as root (package owners), after
# `cargo build --release`:
#
#     bash benches/pkg.sh [WORKDIR]
#
# WORKDIR (default a fresh directory under /var/tmp) must be on a journaled
# filesystem (ext4 with its journal, xfs): on ext4 without one, creating
# files soon after deleting many others costs a scan per inode (see
# benches/build.sh), which neither row should pay. Trees are renamed aside,
# never deleted, before a timed run.
#
# benches/pkg_repo.py writes a synthetic repository shaped like a real
# jail's closure (PACKAGES=150 packages, MEGABYTES=400 MB unpacked, many
# small files and a few large, a dependency graph), served from 127.0.0.1
# by python3's http.server. Timed, best of ROUNDS=3, alternated:
#   limit:  every package unpacked by `zstd -dc | tar -x`, two at a time
#           (the machine's limit for this work: decompression and file
#           creation on both cores), then `sync`;
#   jbuild: a build of `FROM freebsd:14.3` (a small base the bench makes:
#           accounts, a FreeBSD ELF for the ABI, the repository's
#           configuration; cached by an untimed build of the FROM alone in
#           the same state root) then `PKG <the closure's top-level names>`:
#           catalogue, resolution, fetch from 127.0.0.1, checks,
#           extraction, database, snapshot commit and the layer's export
#           (zstd -3: jbuild has no uncompressed layers; the limit compresses
#           nothing, so this row pays for it), then `sync`;
#           its peak RSS by GNU time.
# Prints the best and the median of each row, jbuild ÷ limit (the issue's
# target: at most 1.2x) and the peak RSS (target: at most 128 MiB), each
# row's CPU time (user + system, by GNU time: on a shared machine the
# figure that compares two binaries), and the load average of each round. ONLY=limit skips
# the jbuild row (which needs PKG to run jbuild's own installer: with
# pkg(8) it fails on Linux). JBUILD names the binary (default
# target/release/jbuild); BEFORE=BINARY adds a row for another binary (the
# code before a change), run in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${JBUILD:-$PWD/target/release/jbuild}
packages=${PACKAGES:-150}
megabytes=${MEGABYTES:-400}
rounds=${ROUNDS:-3}
only=${ONLY:-}
before=${BEFORE:-}
work=${1:-$(mktemp -d /var/tmp/jbuild-pkg-bench.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
fs=$(stat -f -c %T "$work")
echo "workdir $work ($fs)"
for p in zstd tar python3 bc /usr/bin/time; do
  command -v "$p" >/dev/null || { echo "needs $p" >&2; exit 1; }
done
if [ "$only" != limit ]; then
  [ -x "$bin" ] || { echo "build first: cargo build --release (or ONLY=limit)" >&2; exit 1; }
fi
trap 'kill $server 2>/dev/null || true; rm -rf "$work/grave" "$work/root" "$work/limit"' EXIT

repo=$work/mirror/repo/FreeBSD:14:amd64
if [ ! -f "$repo/data.pkg" ]; then
  python3 benches/pkg_repo.py "$repo" "$packages" "$megabytes" 31
fi
top=$(tr '\n' ' ' < "$repo/top-level")
echo "repository: $(find "$repo/All" -name '*.pkg' | wc -l) packages," \
  "$(du -sm "$repo/All" | cut -f1) MB of packages; $(wc -w <<< "$top") top-level names"

# The base: a release set of a few files (python3 writes the ELF whose
# FreeBSD ABI note says 14.3), with accounts and the repository's
# configuration, as FROM freebsd:14.3 downloads it.
rel=$work/mirror/amd64/14.3-RELEASE
if [ ! -f "$rel/MANIFEST" ]; then
  base=$work/base-tree
  mkdir -p "$base"/{bin,etc/pkg,usr/local/etc/pkg/repos,var/db/pkg,tmp} "$rel"
  python3 - "$base/bin/sh" <<'EOF'
import struct, sys
# ELF64, little-endian, ELFOSABI_FREEBSD, x86-64, one PT_NOTE: the
# NT_FREEBSD_ABI_TAG note ("FreeBSD", 1403000) that pkg reads the ABI from.
name = b"FreeBSD\0"
note = struct.pack("<III", len(name), 4, 1) + name + struct.pack("<I", 1403000)
head = b"\x7fELF" + bytes([2, 1, 1, 9]) + bytes(8)
head += struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
ph = struct.pack("<IIQQQQQQ", 4, 4, 120, 0, 0, len(note), len(note), 4)
open(sys.argv[1], "wb").write(head + ph + note)
EOF
  chmod 755 "$base/bin/sh"
  printf 'root:*:0:0::0:0:Charlie &:/root:/bin/sh\n' > "$base/etc/master.passwd"
  printf 'root:*:0:0:Charlie &:/root:/bin/sh\n' > "$base/etc/passwd"
  printf 'wheel:*:0:root\n' > "$base/etc/group"
  tar -C "$base" --owner=0 --group=0 -cf - . | xz -1 > "$rel/base.txz"
  printf 'base.txz\t%s\t1\tbase\t"Base system"\ton\n' "$(sha256sum "$rel/base.txz" | cut -d' ' -f1)" \
    > "$rel/MANIFEST"
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$work/mirror" "$port" >/dev/null 2>&1 &
server=$!
sleep 1
url=http://127.0.0.1:$port
mkdir -p "$work/repos" "$work/ctx-base" "$work/ctx"
# shellcheck disable=SC2016 # ${ABI} is pkg's variable, expanded by jbuild
printf 'FreeBSD: { enabled: no }\nbench: { url: "%s/repo/${ABI}", signature_type: "none", mirror_type: "none" }\n' \
  "$url" > "$work/repos/bench.conf"
echo 'FROM freebsd:14.3' > "$work/ctx-base/Jailfile"
printf 'FROM freebsd:14.3\nPKG %s\n' "$top" > "$work/ctx/Jailfile"

now() { date +%s.%N; }
retire() { if [ -e "$1" ]; then mkdir -p "$work/grave" && mv "$1" "$(mktemp -u "$work/grave/t.XXXXXX")"; fi; }
jb() {
  JBUILD_ROOT=$work/root JBUILD_CONFIG=/dev/null "${JBUILD:-$bin}" -q build --compression zstd \
    --platform freebsd/amd64 --mirror "$url" --pkg-repos "$work/repos" "$@"
}

limit_round() {
  retire "$work/limit"
  mkdir -p "$work/limit"
  sync
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2016 # $1 and $2 are the inner shells'
  /usr/bin/time -f '%U %S' -o "$work/rss" sh -c 'find "$1" -name "*.pkg" -print0 |
    xargs -0 -P2 -I{} sh -c '"'"'zstd -dc "$1" | tar -x -C "$2" --exclude="+*" 2>/dev/null'"'"' _ {} "$2"' \
    _ "$repo/All" "$work/limit"
  sync
  t1=$(now)
  echo "$t1 - $t0" | bc
}

# One timed jbuild build of the PKG step with binary $1; its peak RSS (KiB)
# and CPU time (user + system seconds) go to $work/rss.
jbuild_round() {
  local b=$1
  retire "$work/root"
  JBUILD=$b jb "$work/ctx-base" >/dev/null || { echo "the base build failed" >&2; exit 1; }
  sync
  local t0 t1
  t0=$(now)
  /usr/bin/time -f '%M %U %S' -o "$work/rss" env JBUILD_ROOT="$work/root" JBUILD_CONFIG=/dev/null \
    "$b" -q build --compression zstd --platform freebsd/amd64 --mirror "$url" \
    --pkg-repos "$work/repos" "$work/ctx" >"$work/jbuild.out" 2>&1 ||
    { echo "jbuild failed:" >&2; tail -20 "$work/jbuild.out" >&2; exit 1; }
  sync
  t1=$(now)
  echo "$t1 - $t0" | bc
}

# Best and median of the numbers on stdin, one a line.
best_median() {
  sort -g | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "best %.2f s, median %.2f s", v[1], m }'
}

: >"$work/times"
for i in $(seq "$rounds"); do
  # What the last round left goes now, untimed, with its writeback.
  rm -rf "$work/grave"
  sync
  echo "round $i: load $(cut -d' ' -f1-3 /proc/loadavg)"
  l=$(limit_round)
  echo "limit $l 0 $(tail -1 "$work/rss" | awk '{ print $1 + $2 }')" >>"$work/times"
  if [ "$only" != limit ]; then
    j=$(jbuild_round "$bin")
    echo "jbuild $j $(tail -1 "$work/rss" | awk '{ print $1, $2 + $3 }')" >>"$work/times"
    if [ -n "$before" ]; then
      j=$(jbuild_round "$before")
      echo "before $j $(tail -1 "$work/rss" | awk '{ print $1, $2 + $3 }')" >>"$work/times"
    fi
  fi
  grep -v '^#' "$work/times" | tail -n "$([ -n "$before" ] && echo 3 || echo 2)" | sed 's/^/  /'
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
row() { awk -v k="$1" '$1 == k { print $2 }' "$work/times" | best_median; }
rss() { awk -v k="$1" '$1 == k && $3 > m { m = $3 } END { printf "%.1f", m / 1024 }' "$work/times"; }
best() { awk -v k="$1" '$1 == k { print $2 }' "$work/times" | sort -g | head -1; }
cpu() { awk -v k="$1" '$1 == k { print $4 }' "$work/times" | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
median() { awk -v k="$1" '$1 == k { print $2 }' "$work/times" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf 'limit (zstd -dc | tar -x, two at a time): %s; %s MB unpacked; CPU (user + sys) median %s s\n' \
  "$(row limit)" "$(du -sm "$work/limit" | cut -f1)" "$(cpu limit)"
for k in jbuild before; do
  [ "$only" = limit ] && break
  [ "$k" = before ] && [ -z "$before" ] && break
  printf '%s PKG: %s; ratio to the limit: best %.2fx, median %.2fx (target <= 1.2x); peak RSS %s MiB (target <= 128 MiB); CPU (user + sys) median %s s\n' \
    "$k" "$(row "$k")" "$(echo "$(best "$k") / $(best limit)" | bc -l)" \
    "$(echo "$(median "$k") / $(median limit)" | bc -l)" "$(rss "$k")" "$(cpu "$k")"
done
