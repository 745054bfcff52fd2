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
# by python3's http.server. Timed in each of ROUNDS=3 rounds, alternated:
#   limit:  every package unpacked by `zstd -dc | tar -x`, two at a time
#           (the machine's limit for this work: decompression and file
#           creation on both cores), then `sync`;
#   export limit: the limit's tree, just made, exported as jbuild exports a
#           layer: `tar --sort=name -c` (its sha256, the diff ID, beside) |
#           `zstd -3 -T2 -B2M --zstd=ovlog=8` (jbuild's level, job size and
#           overlap, two workers, a checksum) | the blob written to a file
#           and hashed (its digest), then the blob's fsync (`sync FILE`);
#   jbuild: a build of `FROM freebsd:14.3` (a small base the bench makes:
#           accounts, a FreeBSD ELF for the ABI, the repository's
#           configuration; cached by an untimed build of the FROM alone in
#           the same state root) then `PKG <the closure's top-level names>`,
#           with `--json` (the events, each stamped with the time it
#           arrived, are kept in WORKDIR/jbuild-BIN.json). Three figures:
#     PKG step:  the step's `step_done` seconds — from the step's start:
#                its key finished (the image's repositories read, the
#                catalogue fetched and hashed), resolution, fetch from
#                127.0.0.1, checks, extraction, database, and the snapshot's
#                commit (the tree's `syncfs` included) — against the limit
#                (the issue's target: at most 1.2x);
#     whole build: the command's wall time and then `sync`, against the
#                limit + the export limit of the same round (the layer's
#                export is work the limit does not do: jbuild has no
#                uncompressed layers);
#     export:    from the PKG step's `step_done` event to the command's last
#                event: the layer's export (the differ's walk, the tar, both
#                hashes, zstd, the blob written and synced), the image's
#                config and manifest, the tag — against the export limit
#                (target: at most 1.1x); and the export's own
#                `transfer_done` seconds (tar, zstd and the blob only: its
#                bar starts after the differ's walk);
#           the build's peak RSS by GNU time.
# Prints the best and the median of each row and of each ratio (each
# round's jbuild figure over the same round's limit), the peak RSS (target:
# at most 128 MiB), each row's CPU time (user + system, by GNU time: on a
# shared machine the figure that compares two binaries), and the load
# average of each round. ONLY=limit skips the jbuild rows (which need PKG to
# run jbuild's own installer: with pkg(8) it fails on Linux). JBUILD names
# the binary (default target/release/jbuild); BEFORE=BINARY adds rows for
# another binary (the code before a change), run in the same rounds.
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
for p in zstd tar python3 perl bc sha256sum /usr/bin/time; do
  command -v "$p" >/dev/null || { echo "needs $p" >&2; exit 1; }
done
if [ "$only" != limit ]; then
  [ -x "$bin" ] || { echo "build first: cargo build --release (or ONLY=limit)" >&2; exit 1; }
fi
trap 'kill $server 2>/dev/null || true; rm -rf "$work/grave" "$work/root" "$work/limit" "$work"/export.zst*' EXIT

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

# The export limit on the tree limit_round just made (in the page cache, as
# jbuild's layer is when it exports it): a sorted tar, its sha256 beside,
# zstd as jbuild's export, the blob written, hashed and fsynced.
export_round() {
  retire "$work/export.zst"
  sync
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2016 # $1 and $2 are the inner shell's
  /usr/bin/time -f '%U %S' -o "$work/rss" bash -c 'set -o pipefail
    tar --sort=name --numeric-owner -cf - -C "$1" . | tee >(sha256sum >"$2.tar.sha") |
      zstd -q -3 -T2 -B2M --zstd=ovlog=8 -c | tee "$2" | sha256sum >"$2.sha"
    wait
    sync "$2"' _ "$work/limit" "$work/export.zst"
  t1=$(now)
  echo "$t1 - $t0" | bc
}

# One timed jbuild build of the PKG step with binary $1 ($2 names its
# events file); its peak RSS (KiB) and CPU time (user + system seconds) go
# to $work/rss, its events (each line stamped with its arrival time) to
# $work/jbuild-$2.json.
jbuild_round() {
  local b=$1 events=$work/jbuild-$2.json
  retire "$work/root"
  JBUILD=$b jb "$work/ctx-base" >/dev/null || { echo "the base build failed" >&2; exit 1; }
  sync
  local t0 t1
  t0=$(now)
  # perl stamps each event as it arrives (jbuild flushes each one).
  /usr/bin/time -f '%M %U %S' -o "$work/rss" env JBUILD_ROOT="$work/root" JBUILD_CONFIG=/dev/null \
    "$b" --json build --compression zstd --platform freebsd/amd64 --mirror "$url" \
    --pkg-repos "$work/repos" "$work/ctx" 2>"$work/jbuild.err" |
    perl -MTime::HiRes=time -ne '$| = 1; printf "%.6f %s", time, $_' >"$events" ||
    { echo "jbuild failed:" >&2; tail -5 "$events" "$work/jbuild.err" >&2; exit 1; }
  sync
  t1=$(now)
  echo "$t1 - $t0" | bc
}

# From a stamped events file: the PKG step's seconds, the time from its
# step_done to the last event, and the export's transfer_done seconds.
figures() {
  python3 - "$1" <<'PY'
import json, sys
index = step = done_at = last = export = None
for line in open(sys.argv[1]):
    at, _, text = line.partition(" ")
    e, last = json.loads(text), float(at)
    if e.get("event") == "step_start" and e.get("text", "").startswith("PKG"):
        index = e["index"]
    elif e.get("event") == "step_done" and index is not None and e["index"] == index:
        step, done_at = e["seconds"], float(at)
    elif e.get("event") == "transfer_done" and e.get("id", "").startswith("export-"):
        export = (export or 0) + e["seconds"]
if step is None or export is None:
    sys.exit(f"{sys.argv[1]}: no PKG step_done or no export in the events")
print(f"{step:.3f} {last - done_at:.3f} {export:.3f}")
PY
}

# Best and median of the numbers on stdin, one a line.
best_median() {
  sort -g | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "best %.2f, median %.2f", v[1], m }'
}

# The times file: one line a figure, `ROUND KEY SECONDS [CPU [RSS]]`.
: >"$work/times"
jbuild_rows() { # $1: jbuild or before, $2: the binary, $3: the round
  local w f
  w=$(jbuild_round "$2" "$1")
  read -r rss user sys <"$work/rss"
  echo "$3 $1 $w $(echo "$user + $sys" | bc) $rss" >>"$work/times"
  f=$(figures "$work/jbuild-$1.json")
  read -r step after export <<<"$f"
  printf '%s %s-step %s\n%s %s-after %s\n%s %s-export %s\n' \
    "$3" "$1" "$step" "$3" "$1" "$after" "$3" "$1" "$export" >>"$work/times"
  cp "$work/jbuild-$1.json" "$work/jbuild-$1.round$3.json"
}
for i in $(seq "$rounds"); do
  # What the last round left goes now, untimed, with its writeback.
  rm -rf "$work/grave"
  sync
  echo "round $i: load $(cut -d' ' -f1-3 /proc/loadavg)"
  l=$(limit_round)
  echo "$i limit $l $(awk '{ print $1 + $2 }' "$work/rss")" >>"$work/times"
  x=$(export_round)
  echo "$i export-limit $x $(awk '{ print $1 + $2 }' "$work/rss")" >>"$work/times"
  if [ "$only" != limit ]; then
    jbuild_rows jbuild "$bin" "$i"
    [ -z "$before" ] || jbuild_rows before "$before" "$i"
  fi
  awk -v i="$i" '$1 == i' "$work/times" | sed 's/^/  /'
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
val() { awk -v k="$1" -v i="$2" '$1 == i && $2 == k { print $3 }' "$work/times"; }
row() { awk -v k="$1" '$2 == k { print $3 }' "$work/times" | best_median; }
cpu() { awk -v k="$1" '$2 == k { print $4 }' "$work/times" | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rss() { awk -v k="$1" '$2 == k && $5 > m { m = $5 } END { printf "%.1f", m / 1024 }' "$work/times"; }
# Each round's $1 over the same round's sum of the rows after it.
ratio() {
  local k=$1
  shift
  for i in $(seq "$rounds"); do
    local d=0
    for r in "$@"; do d="$d + $(val "$r" "$i")"; done
    echo "$(val "$k" "$i") / ($d)" | bc -l
  done | best_median
}
printf 'limit (zstd -dc | tar -x, two at a time, sync): %s s; %s MB unpacked; CPU (user + sys) median %s s\n' \
  "$(row limit)" "$(du -sm "$work/limit" | cut -f1)" "$(cpu limit)"
printf 'export limit (tar | zstd -3 -T2 -B2M, both sha256, fsync): %s s; %s MB blob; CPU median %s s\n' \
  "$(row export-limit)" "$(du -sm "$work/export.zst" | cut -f1)" "$(cpu export-limit)"
for k in jbuild before; do
  [ "$only" = limit ] && break
  [ "$k" = before ] && [ -z "$before" ] && break
  echo "$k:"
  printf '  PKG step: %s s; to the limit: %sx (target <= 1.2x)\n' "$(row "$k-step")" "$(ratio "$k-step" limit)"
  printf '  whole build (sync included): %s s; to limit + export limit: %sx; peak RSS %s MiB (target <= 128 MiB); CPU (user + sys) median %s s\n' \
    "$(row "$k")" "$(ratio "$k" limit export-limit)" "$(rss "$k")" "$(cpu "$k")"
  printf '  export (step_done to the last event): %s s; to the export limit: %sx (target <= 1.1x)\n' \
    "$(row "$k-after")" "$(ratio "$k-after" export-limit)"
  printf '  export (its transfer_done seconds: tar, zstd, blob): %s s\n' "$(row "$k-export")"
done
