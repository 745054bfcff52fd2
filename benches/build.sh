#!/usr/bin/env bash
# jbuild against `podman build` and against the machine's limit on issue
# 16's recipe (benches/recipe.sh: FROM scratch, COPY of a 50,000-file tree of
# about 200 MB, then 19 small COPYs), in one interleaved run: each round
# times the limit (`cp -a` of the tree, then `tar | pigz -6` of the copy:
# the copy and the compression the first build cannot avoid), builds with
# jbuild on the `overlay` backend, with podman (overlay storage, --layers;
# skipped when podman is not installed), then with jbuild on the `dir`
# backend, and for each times
#
#   first   the first build, from an empty store
#   cached  the same build again, fully cached
#   push    a build from an empty store, then a push to a local Distribution
#           (jbuild `build --push`; `podman build` then `podman push`), each
#           to an empty registry
#
# and prints the medians over the rounds, their ratios to podman's and the
# first build's ratio to the limit (issue 34's target: ≤ 1.5x). Each
# time includes a final `sync` (the writeback a build leaves is its cost).
# WORKDIR should be on a journaled filesystem, as users' disks are (see
# benches/README.md: an ext4 on a loop device does).
# Run by hand, not in CI, as root (overlay mounts; podman's overlay storage):
#
#   sudo bash benches/build.sh [WORKDIR]
#
# It makes a release build of jbuild first (unless JBUILD names a binary).
# podman runs with its whole store (--root, --runroot, --tmpdir, TMPDIR)
# under WORKDIR, in a private mount namespace where WORKDIR directories are
# bound over /var/lib/containers and /run/containers, so nothing of the
# machine's podman storage or blob-info cache is read or written. The
# registry is Debian's /usr/bin/docker-registry (registry/start) on
# 127.0.0.1, its storage under WORKDIR, restarted empty before each push.
# Everything is removed on exit (KEEP=1 keeps WORKDIR).
#
# Trees are never deleted between timed runs: a finished store is renamed
# into WORKDIR/graveyard (no inode freed), deleted at the end, or after a
# round that timed `dir` (its stores are 6 GB each) and then left to age
# AGE seconds (default 370). The reason is the disk: on ext4 without a
# journal (this machine's root), creating an inode skips, one buffer lookup
# at a time, every free inode of its group deleted less than 60 s ago — 360 s
# while that part of the inode table is dirty, which the new inodes make it
# (`recently_deleted` in `find_inode_bit`). A build started right after
# deleting a 50,000-file tree spends tens of seconds of system time there:
# whoever builds next pays for whoever deleted last (profiled: `cp -a` of
# the recipe's tree, 3.0 s of system time on a quiet disk, 21 s right after
# `rm -rf` of a copy of it, 29% + 27% of its samples in
# find_get_block_common and recently_deleted). Other work deleting files on
# the same disk during the run still costs every tool the same way.
#
# Environment: JBUILD_BENCH_FILES (default 50000; 2000 for a quick try),
# AGE (default 370), ROUNDS (default 3), DIR_ROUNDS (rounds that also time `dir`, default
# ROUNDS: the dir backend copies the tree for every step), JBUILD,
# JBUILD_BEFORE (an older binary: its first build and cached rebuild are
# timed too, right before jbuild's in each round; tool "before-BACKEND"),
# NO_PUSH=1 (leave out the build-then-push case).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "run as root: overlay mounts and podman's overlay storage need it" >&2; exit 1; }
command -v pigz >/dev/null || { echo "pigz is needed for the limit row (apt-get install -y pigz)" >&2; exit 1; }
have_podman=1
command -v podman >/dev/null || { have_podman=0; echo "podman is not installed here: its rows are left out (apt-get install -y podman)" >&2; }
command -v unshare >/dev/null || { echo "unshare (util-linux) is needed" >&2; exit 1; }
[ -x /usr/bin/docker-registry ] || { echo "Distribution is needed (apt-get install -y docker-registry)" >&2; exit 1; }
if [ -z "${JBUILD:-}" ]; then
  CARGO_INCREMENTAL=0 cargo build --release --quiet
fi
jbuild=${JBUILD:-$repo/target/release/jbuild}
[ -x "$jbuild" ] || { echo "no jbuild binary at $jbuild" >&2; exit 1; }
files=${JBUILD_BENCH_FILES:-50000}
rounds=${ROUNDS:-3}
dir_rounds=${DIR_ROUNDS:-$rounds}
age=${AGE:-370}

made_work=
if [ -n "${1:-}" ]; then
  work=$1
  mkdir -p "$work"
else
  work=$(mktemp -d /var/tmp/jbuild-bench-build.XXXXXX)
  made_work=1
fi
work=$(cd "$work" && pwd)
export JBUILD_CONFIG=$work/jbuild.toml RUST_LOG=warn
unset SOURCE_DATE_EPOCH JBUILD_BACKEND JBUILD_ROOT
: > "$JBUILD_CONFIG"
log=$work/log
results=$work/results.tsv
: > "$results"
pod=$work/podman
reg_pid=

# podman with its store under $work, in a private mount namespace (see above).
podman_() {
  unshare -m --propagation private sh -c '
    mount --bind "$1/varlib" /var/lib/containers &&
    mount --bind "$1/run" /run/containers &&
    shift && exec env TMPDIR="$0/tmp" podman "$@"' "$pod" "$pod" \
    --root "$pod/root" --runroot "$pod/runroot" --tmpdir "$pod/libpod" \
    --storage-driver overlay --cgroup-manager cgroupfs --events-backend none "$@"
}
# A fresh podman store; the old one (podman keeps nothing outside $pod) is
# retired, not deleted (see above).
podman_reset() {
  unmount_under "$pod"
  retire "$pod"
  mkdir -p "$pod/varlib" "$pod/run" "$pod/tmp" "$pod/libpod"
}
# retire TREE: renames TREE into the graveyard (instant; no inode freed).
retire() {
  if [ -e "$1" ]; then
    mkdir -p "$work/graveyard"
    mv "$1" "$(mktemp -u "$work/graveyard/t.XXXXXX")"
  fi
}
# bury: deletes the graveyard, untimed, then waits until no inode it freed
# is "recently deleted" for ext4 any more (see above).
bury() {
  unmount_under "$work/graveyard"
  rm -rf "$work/graveyard"
  sync
  sleep "$age"
}
# Whatever a failed run left mounted under $1, innermost first.
unmount_under() {
  awk -v p="$1/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
registry_stop() {
  if [ -n "$reg_pid" ]; then
    kill "$reg_pid" 2>/dev/null || true
    wait "$reg_pid" 2>/dev/null || true
    reg_pid=
  fi
}
# A fresh, empty Distribution on a free port; sets $reg.
registry_start() {
  registry_stop
  rm -rf "$work/registry" "$work/registry.log"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$repo/registry/start" "$port" "$work/registry" > "$work/registry.log" 2>&1 &
  reg_pid=$!
  reg=127.0.0.1:$port
  for _ in $(seq 300); do
    curl -sf "http://$reg/v2/" > /dev/null && break
    kill -0 "$reg_pid" 2>/dev/null || break
    sleep 0.1
  done
  curl -sf "http://$reg/v2/" > /dev/null || {
    echo "the registry did not start (pid $reg_pid, port $port):" >&2
    cat "$work/registry.log" >&2
    exit 1
  }
}
# pushed REPOSITORY: the manifest of REPOSITORY:1 in the registry, or a loud
# failure; prints its layer count and size (a check that both tools pushed
# the same content, untimed).
pushed() {
  curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$reg/v2/$1/manifests/1" | python3 -c '
import json, sys
m = json.load(sys.stdin)
n = len(m["layers"]); b = sum(l["size"] for l in m["layers"])
t = ", ".join(sorted({l["mediaType"].rsplit(".", 1)[-1] for l in m["layers"]}))
print(f"  pushed {sys.argv[1]}: {n} layers, {b / 1e6:.1f} MB ({t})")' "$1" || {
    echo "no manifest $1:1 in the registry after the push" >&2
    exit 1
  }
}
cleanup() {
  local rc=$?
  registry_stop
  if [ "$have_podman" = 1 ] && [ -d "$pod/root" ]; then podman_ system reset -f >> "$log" 2>&1 || true; fi
  unmount_under "$work"
  if [ "${KEEP:-0}" = 1 ]; then
    echo "kept $work" >&2
  elif [ -n "$made_work" ]; then
    rm -rf "$work"
  else
    rm -rf "$work/ctx" "$work/root" "$pod" "$work/registry" "$work/graveyard" "$work/limit"
  fi
  exit "$rc"
}
trap cleanup EXIT

# timed TOOL CASE ROUND CMD...: runs CMD then sync, appends the wall time to
# $results; a failing CMD stops the run with its output.
timed() {
  local tool=$1 case=$2 round=$3 t0 t1 s
  shift 3
  sync
  echo "== round $round, $tool, $case: $*" >> "$log"
  t0=$(date +%s.%N)
  "$@" >> "$log" 2>&1 || {
    echo "FAILED: $tool $case (round $round): $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  }
  sync
  t1=$(date +%s.%N)
  s=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
  printf '%s\t%s\t%s\t%s\n' "$tool" "$case" "$round" "$s" >> "$results"
  printf 'round %s  %-15s %-7s %8s s\n' "$round" "$tool" "$case" "$s"
}

jbuild_round() {
  local backend=$1 round=$2 root=$work/root tag
  retire "$root"
  if [ -n "${JBUILD_BEFORE:-}" ]; then
    # An older binary, first build and cached rebuild only (a before/after).
    timed "before-$backend" first "$round" env JBUILD_ROOT="$root" "$JBUILD_BEFORE" -q --backend "$backend" build -t bench:1 "$work/ctx"
    timed "before-$backend" cached "$round" env JBUILD_ROOT="$root" "$JBUILD_BEFORE" -q --backend "$backend" build -t bench:1 "$work/ctx"
    retire "$root"
  fi
  timed "jbuild-$backend" first "$round" env JBUILD_ROOT="$root" "$jbuild" -q --backend "$backend" build -t bench:1 "$work/ctx"
  timed "jbuild-$backend" cached "$round" env JBUILD_ROOT="$root" "$jbuild" -q --backend "$backend" build -t bench:1 "$work/ctx"
  retire "$root"
  [ "${NO_PUSH:-0}" = 1 ] && return 0
  registry_start
  tag=$reg/jbuild-$backend-$round/bench:1
  timed "jbuild-$backend" push "$round" env JBUILD_ROOT="$root" "$jbuild" -q --backend "$backend" build --push -t "$tag" "$work/ctx"
  pushed "jbuild-$backend-$round/bench"
  registry_stop
  retire "$root"
}

# The machine's limit for the first build: the tree copied (`cp -a`, what
# the COPY step must do) and the copy packed and compressed as one gzip
# stream on every core (`tar | pigz -6`, what the layer's export must do).
limit_first() {
  mkdir -p "$work/limit" &&
    cp -a "$work/ctx/tree" "$work/limit/tree" &&
    tar -C "$work/limit" -cf - tree | pigz -6 > "$work/limit/tree.tar.gz"
}
limit_round() {
  retire "$work/limit"
  timed limit first "$1" limit_first
  retire "$work/limit"
}

podman_build_push() {
  podman_ build --layers -f "$work/ctx/Containerfile" -t "$1" "$work/ctx" &&
    podman_ push --tls-verify=false "$1"
}
podman_round() {
  local round=$1 tag
  podman_reset
  timed podman first "$round" podman_ build --layers -f "$work/ctx/Containerfile" -t bench:1 "$work/ctx"
  timed podman cached "$round" podman_ build --layers -f "$work/ctx/Containerfile" -t bench:1 "$work/ctx"
  podman_reset
  [ "${NO_PUSH:-0}" = 1 ] && return 0
  registry_start
  tag=$reg/podman-$round/bench:1
  timed podman push "$round" podman_build_push "$tag"
  pushed "podman-$round/bench"
  registry_stop
  podman_reset
}

. "$repo/benches/recipe.sh"
recipe_context "$work/ctx" "$files"
cp "$work/ctx/Jailfile" "$work/ctx/Containerfile"
fs=$(df -T "$work" | awk 'NR==2 {print $2}')
echo "context: $(find "$work/ctx/tree" -type f | wc -l) files, $(du -sm "$work/ctx/tree" | cut -f1) MB on $fs at $work"
echo "$([ "$have_podman" = 1 ] && podman --version || echo "no podman"); $("$jbuild" --version); $(nproc) cores; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -d "$work/graveyard" ]; then bury; fi
[ "$have_podman" = 1 ] && podman_reset && podman_ info --format 'podman storage: {{.Store.GraphDriverName}}, native overlay diff {{index .Store.GraphStatus "Native Overlay Diff"}}'

for round in $(seq 1 "$rounds"); do
  limit_round "$round"
  jbuild_round overlay "$round"
  if [ "$have_podman" = 1 ]; then podman_round "$round"; fi
  if [ "$round" -le "$dir_rounds" ]; then
    jbuild_round dir "$round"
    if [ "$round" -lt "$rounds" ]; then bury; fi
  fi
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Medians (min–max), ratios to podman's median (targets from issue 16) and
# the first build's ratio to the limit (issue 34).
python3 - "$results" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    tool, case, _, s = line.split("\t")
    t.setdefault((tool, case), []).append(float(s))
cases = [("first", "first build, empty store", 0.5),
         ("cached", "fully cached rebuild", 0.05),
         ("push", "build, then push to an empty registry", 0.5)]
tools = ["limit"] + [k for k in ("before-overlay", "jbuild-overlay", "podman", "before-dir", "jbuild-dir")
                     if any(tool == k for tool, _ in t)]
print()
print("| | " + " | ".join(tools) + " | before / limit | overlay / limit | overlay / podman | dir / podman |")
print("|---|" + "---|" * (len(tools) + 4))
for case, name, target in cases:
    med = {k: statistics.median(t[(k, case)]) for k in tools if (k, case) in t}
    if "jbuild-overlay" not in med:
        continue
    def cell(k):
        if k not in med:
            return "–"
        v = t[(k, case)]
        rng = f" ({min(v):.2f}–{max(v):.2f})" if len(v) > 1 else ""
        return f"{med[k]:.2f} s{rng}, n={len(v)}"
    def ratio(k, to):
        return f"{med[k] / med[to]:.3f}x" if k in med and to in med else "–"
    pod = ratio("jbuild-overlay", "podman")
    if "podman" in med:
        pod = f"**{pod}** (target ≤ {target}x: {'met' if med['jbuild-overlay'] / med['podman'] <= target else 'NOT met'})"
    lim = ratio("jbuild-overlay", "limit")
    if "limit" in med:
        lim = f"**{lim}** (target ≤ 1.5x: {'met' if med['jbuild-overlay'] / med['limit'] <= 1.5 else 'NOT met'})"
    print(f"| {name} | " + " | ".join(cell(k) for k in tools)
          + f" | {ratio('before-overlay', 'limit')} | {lim} | {pod} | {ratio('jbuild-dir', 'podman')} |")
PY
