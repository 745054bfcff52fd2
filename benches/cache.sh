#!/usr/bin/env bash
# The registry build cache: a 20-step recipe built from nothing, against the
# same recipe built in an empty state root with --cache-from a warm local
# registry (CNCF Distribution, registry/start), in one run; and the time to
# pull the built image into an empty root, which the cached build should not
# exceed by more than 1 s. Run by hand, not in CI, as root (RUN steps run in
# the Linux namespace executor over a busybox-static root):
#
#   cargo build --release && bash benches/cache.sh [WORKDIR]
#
# The recipe: FROM scratch, COPY busybox, RUN busybox --install, then 18 RUN
# steps, each of which spins the shell for a while (WORK iterations, default
# 200000) and writes MIB (default 2) MiB of random bytes; 20 layer steps.
# Printed: wall times, the ratio, and the registry requests the cached build
# made (from the registry's access log), per step.
#
# Environment: JBUILD (default target/release/jbuild), WORK, MIB.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
jbuild=${JBUILD:-$repo/target/release/jbuild}
[ -x "$jbuild" ] || { echo "build jbuild first: cargo build --release" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: RUN steps need namespaces" >&2; exit 1; }
bb=/bin/busybox
if [ ! -x "$bb" ] || ldd "$bb" >/dev/null 2>&1; then
  echo "a static $bb is needed (apt-get install busybox-static)" >&2
  exit 1
fi
work_n=${WORK:-200000} mib=${MIB:-2}

work=${1:-$(mktemp -d /tmp/jbuild-bench-cache.XXXXXX)}
mkdir -p "$work"
export JBUILD_CONFIG=$work/jbuild.toml RUST_LOG=warn
unset SOURCE_DATE_EPOCH JBUILD_BACKEND
: > "$JBUILD_CONFIG"
reg_pid=
cleanup() { [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$repo/registry/start" "$port" "$work/registry" > "$work/registry.log" 2>&1 &
reg_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/registry.log" && break; sleep 0.1; done
reg=127.0.0.1:$port

ctx=$work/context
mkdir -p "$ctx"
cp "$bb" "$ctx/busybox"
{
  echo 'FROM --platform=linux/amd64 scratch'
  echo 'COPY busybox /bin/busybox'
  echo 'RUN ["/bin/busybox", "--install", "-s", "/bin"]'
  for i in $(seq 1 18); do
    echo "RUN i=0; while [ \$i -lt $work_n ]; do i=\$((i+1)); done; mkdir -p /data && head -c $((mib * 1048576)) /dev/urandom > /data/$i"
  done
  echo 'CMD ["/bin/ls", "/data"]'
} > "$ctx/Jailfile"
steps=20

now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }
requests() { grep -c '" [0-9][0-9][0-9] [0-9-]* "' "$work/registry.log" || true; }
manifest_gets() { grep -c '"GET /v2/cache/manifests/jbuild-v1-' "$work/registry.log" || true; }
digest_of() { grep -o '"manifest":"sha256:[0-9a-f]*"' | cut -d'"' -f4; }

echo "== 1. the recipe built from nothing (no cache)"
t0=$(now)
plain=$(JBUILD_ROOT=$work/plain "$jbuild" --json build -t bench:1 "$ctx" | digest_of)
t1=$(now)
t_plain=$(secs "$t0" "$t1")

echo "== 2. built from nothing again, with --cache-to $reg/cache (warms the registry)"
t0=$(now)
warm=$(JBUILD_ROOT=$work/a "$jbuild" --json build -t bench:1 --cache-to "$reg/cache" "$ctx" | digest_of)
t1=$(now)
t_warm=$(secs "$t0" "$t1")

echo "== 3. an empty root, --cache-from $reg/cache"
before=$(requests) lookups_before=$(manifest_gets)
t0=$(now)
out=$(JBUILD_ROOT=$work/b "$jbuild" --json build -t bench:1 --cache-from "$reg/cache" "$ctx")
t1=$(now)
t_cached=$(secs "$t0" "$t1")
cached=$(echo "$out" | digest_of)
run=$(echo "$out" | grep -o '"steps_run":[0-9]*' | cut -d: -f2)
fetched=$(echo "$out" | grep -o '"steps_fetched":[0-9]*' | cut -d: -f2)
reqs=$(( $(requests) - before )) lookups=$(( $(manifest_gets) - lookups_before ))

echo "== 4. the image pushed, then pulled into an empty root"
JBUILD_ROOT=$work/a "$jbuild" -q push bench:1 "$reg/bench/app:1" > /dev/null
t0=$(now)
JBUILD_ROOT=$work/pull "$jbuild" -q pull "$reg/bench/app:1" > /dev/null
t1=$(now)
t_pull=$(secs "$t0" "$t1")

# The steps write random bytes: two builds from nothing differ, but the
# cached build must give the image of the build that filled the cache.
[ -n "$plain" ] && [ "$warm" = "$cached" ] || {
  echo "the cached build's digest is not the one that filled the cache: $warm $cached" >&2
  exit 1
}
echo
echo "20-step recipe (18 RUN steps of $work_n shell iterations and $mib MiB each), dir backend"
printf '%-44s %8s s\n' "built from nothing" "$t_plain" \
  "built from nothing, with --cache-to" "$t_warm" \
  "empty root, --cache-from (warm registry)" "$t_cached" \
  "jbuild pull of the built image" "$t_pull"
python3 - "$t_plain" "$t_cached" "$t_pull" <<PY
import sys
plain, cached, pull = map(float, sys.argv[1:])
print(f"ratio, from nothing / cached:             {plain / cached:8.1f}x")
print(f"cached build - (pull + 1 s):              {cached - pull - 1:+8.2f} s  (target: <= 0)")
PY
echo "steps run $run, fetched $fetched; same manifest digest: $cached"
echo "registry requests of the cached build: $reqs in all, $(python3 -c "print(f'{$reqs / $steps:.2f}')") per step; manifest lookups: $lookups ($(python3 -c "print(f'{$lookups / $steps:.2f}')") per step)"
