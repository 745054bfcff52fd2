#!/usr/bin/env bash
# Small work: copying a one-layer 2 MB image between a local registry and an
# OCI layout, jbuild side by side with crane, where per-process overhead (not
# bytes) is the cost. Run by hand, not in CI:
#
#   cargo build --release && bash benches/small.sh [ROUNDS] [WORKDIR]
#
# WORKDIR should be on a journaled filesystem, as users' disks are (a
# journal commit is what a sync waits for): benches/README.md says how to
# make one on a loop device. The script says what WORKDIR is on.
#
# One CNCF Distribution (Debian's docker-registry, through registry/start) on
# 127.0.0.1, plain HTTP. The image (2 MiB of random bytes in one gzip layer,
# made here with python3) is put in the registry once, by crane. Then ROUNDS
# (default 30) rounds, each running, in an order shuffled every round (a
# seeded shuffle: rotating one order gives each row the same neighbours
# every round, and the same binary measured 1.15x slower in one place of
# that order than in another, 100 rounds each):
#
#   pull  jbuild copy docker://127.0.0.1:PORT/src:1 oci:DIR:1
#         crane pull --format=oci 127.0.0.1:PORT/src:1 DIR
#         the same crane pull, then `sync -f DIR` (crane+sync: crane made
#         as durable as jbuild is, by syncing WORKDIR's filesystem)
#   push  jbuild copy oci:DIR:1 docker://127.0.0.1:PORT/jN/x:1
#         crane push DIR 127.0.0.1:PORT/cN/x:1
#
# A pull's destination is removed before it; a push goes to a repository new
# that round, so every blob is uploaded (Distribution does not link a blob
# into a repository without a `mount` request). Also timed each round, as the
# fixed cost of a process doing nothing: `jbuild --version`, `crane version`.
# Printed: per row median and min (seconds), jbuild ÷ crane of the medians,
# and the load average before and after.
#
# Environment: JBUILD (default target/release/jbuild), CRANE (default crane in
# $PATH or ~/go/bin), JBUILD_BEFORE (another jbuild binary, e.g. one built
# before a change: its pull is timed in the same rounds, as `before-pull`,
# and compared with JBUILD's).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
rounds=${1:-30}
jbuild=${JBUILD:-$repo/target/release/jbuild}
[ -x "$jbuild" ] || { echo "build jbuild first: cargo build --release" >&2; exit 1; }
crane=${CRANE:-$(command -v crane || true)}
if [ -z "$crane" ] && [ -x "$HOME/go/bin/crane" ]; then crane=$HOME/go/bin/crane; fi
[ -n "$crane" ] || { echo "crane is needed (go install github.com/google/go-containerregistry/cmd/crane@latest)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }

work=${2:-$(mktemp -d /tmp/jbuild-bench-small.XXXXXX)}
mkdir -p "$work"
. "$repo/benches/fs.sh"
describe_fs "$work"
# jbuild on a throwaway state root and an empty configuration: what it reads
# there is part of what is measured.
export JBUILD_ROOT=$work/root JBUILD_CONFIG=$work/jbuild.toml
: > "$JBUILD_CONFIG"
reg_pid=
cleanup() { [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sh registry/start "$port" "$work/registry" > "$work/registry.log" 2>&1 &
reg_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$port/v2/" >/dev/null || { echo "the registry did not start:" >&2; cat "$work/registry.log" >&2; exit 1; }
reg=127.0.0.1:$port

echo "== a one-layer 2 MiB image, pushed by crane to $reg/src:1"
python3 - "$work/image" <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs, exist_ok=True)
def put(data):
    d = hashlib.sha256(data).hexdigest()
    open(os.path.join(blobs, d), "wb").write(data)
    return "sha256:" + d, len(data)
tar = io.BytesIO()
with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as t:
    ti = tarfile.TarInfo("data/blob.bin"); ti.size = 2 << 20; ti.mode = 0o644
    t.addfile(ti, io.BytesIO(os.urandom(ti.size)))
raw = tar.getvalue()
layer, size = put(gzip.compress(raw, 1, mtime=0))
config = json.dumps({"architecture": "amd64", "os": "freebsd", "config": {},
                     "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}},
                    separators=(",", ":")).encode()
cd, cn = put(config)
manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cn},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": size}]},
                      separators=(",", ":")).encode()
md, mn = put(manifest)
open(os.path.join(out, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
json.dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
           "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": mn,
                          "annotations": {"org.opencontainers.image.ref.name": "1"}}]},
          open(os.path.join(out, "index.json"), "w"))
print("  layer %s, %.2f MB" % (layer[:19], size / 1e6))
PY
"$crane" push --insecure "$work/image" "$reg/src:1" >/dev/null 2>&1
# Each tool pushes from a layout it pulled itself (the same blobs).
"$jbuild" --quiet copy "docker://$reg/src:1" "oci:$work/jsrc:1" >/dev/null
"$crane" pull --insecure --format=oci "$reg/src:1" "$work/csrc"
"$jbuild" --version

# One timed run: seconds appended to $work/times/NAME.
mkdir -p "$work/times"
timed() {
  local name=$1; shift
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>"$work/last.err" || { echo "$name failed:" >&2; cat "$work/last.err" >&2; exit 1; }
  local t1=$EPOCHREALTIME
  python3 -c "print('%.6f' % ($t1 - $t0))" >> "$work/times/$name"
}
run() { # one row of one round
  case $1 in
    jbuild-pull) rm -rf "$work/jdst"; timed "$1" "$jbuild" --quiet copy "docker://$reg/src:1" "oci:$work/jdst:1" ;;
    before-pull) rm -rf "$work/bdst"; timed "$1" "$before" --quiet copy "docker://$reg/src:1" "oci:$work/bdst:1" ;;
    crane-pull) rm -rf "$work/cdst"; timed "$1" "$crane" pull --insecure --format=oci "$reg/src:1" "$work/cdst" ;;
    crane+sync-pull) rm -rf "$work/sdst"
      timed "$1" sh -c '"$0" pull --insecure --format=oci "$1" "$2" && sync -f "$2"' "$crane" "$reg/src:1" "$work/sdst" ;;
    jbuild-push) timed "$1" "$jbuild" --quiet copy "oci:$work/jsrc:1" "docker://$reg/j$2/x:1" ;;
    crane-push) timed "$1" "$crane" push --insecure "$work/csrc" "$reg/c$2/x:1" ;;
    jbuild-version) timed "$1" "$jbuild" --version ;;
    crane-version) timed "$1" "$crane" version ;;
  esac
}

rows=(jbuild-pull crane-pull crane+sync-pull jbuild-push crane-push jbuild-version crane-version)
before=${JBUILD_BEFORE:-}
if [ -n "$before" ]; then
  [ -x "$before" ] || { echo "JBUILD_BEFORE=$before is not an executable" >&2; exit 1; }
  "$before" --version
  rows=(jbuild-pull crane-pull crane+sync-pull before-pull jbuild-push crane-push jbuild-version crane-version)
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== $rounds rounds (load average before: $load_before)"
RANDOM=16
for i in $(seq "$rounds"); do
  order=("${rows[@]}")
  for ((k = ${#order[@]} - 1; k > 0; k--)); do # Fisher-Yates
    j=$((RANDOM % (k + 1)))
    t=${order[k]}; order[k]=${order[j]}; order[j]=$t
  done
  for row in "${order[@]}"; do
    run "$row" "$i"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# The pulled layouts hold the whole image.
cmp "$work/jdst/blobs/sha256/$(ls "$work/image/blobs/sha256" | head -1)" \
    "$work/image/blobs/sha256/$(ls "$work/image/blobs/sha256" | head -1)"

python3 - "$work/times" "$rounds" "$load_before" "$load_after" <<'PY'
import os, statistics, sys
d, rounds = sys.argv[1], sys.argv[2]
t = {n: [float(x) for x in open(os.path.join(d, n))] for n in os.listdir(d)}
med = {n: statistics.median(v) for n, v in t.items()}
print("%-16s %10s %10s %10s" % ("", "median s", "min s", "max s"))
for n in ("jbuild-pull", "crane-pull", "crane+sync-pull", "before-pull", "jbuild-push", "crane-push", "jbuild-version", "crane-version"):
    if n in t:
        print("%-16s %10.4f %10.4f %10.4f" % (n, med[n], min(t[n]), max(t[n])))
for what in ("pull", "push", "version"):
    print("jbuild / crane, %-8s %.2fx" % (what + ":", med["jbuild-" + what] / med["crane-" + what]))
print("jbuild / crane+sync, pull: %.2fx" % (med["jbuild-pull"] / med["crane+sync-pull"]))
if "before-pull" in t:
    print("before / crane, pull:    %.2fx" % (med["before-pull"] / med["crane-pull"]))
    print("jbuild / before, pull:   %.2fx" % (med["jbuild-pull"] / med["before-pull"]))
print("rounds %s; load average before %s, after %s" % (rounds, sys.argv[3], sys.argv[4]))
PY
