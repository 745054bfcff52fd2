#!/usr/bin/env bash
# Registry push/pull throughput: jbuild side by side with skopeo (and crane
# when installed), against one local CNCF Distribution (registry/start).
# Run by hand, not in CI:
#
#   cargo build --release && bash benches/registry.sh [WORKDIR]
#
# (BIG_MIB=16 SMALL_FILES=500 for a quick try of the script itself.)
#
# Two images, made once in a jbuild store (which is an OCI layout, so every
# tool pushes the very same blobs):
#   big    one layer of 1 GiB of incompressible bytes (gzip, stored blocks)
#   small  one layer of 50,000 files of 1 KiB each (gzip)
# Each push goes to an empty registry; each pull starts from an empty
# destination. Printed: wall time, MB/s (blob bytes moved / wall time), max
# RSS, and the time as a ratio to the fastest tool for that row.
#
# Then, per image, `copy` rows: registry → a new OCI layout, ROUNDS (3)
# rounds alternated in one order, medians printed with the load average:
#   jbuild  jbuild copy docker://REF oci:DIR:1 (durable: synced before it exits)
#   crane   crane pull --format=oci REF DIR (not synced)
#   crane+sync  the same, then `sync -f DIR`: crane made as durable as jbuild
#   before  JBUILD_BEFORE's copy, when set (another jbuild binary)
#
# Disk: about 3.5 GiB in WORKDIR at the peak (default: a temp dir). WORKDIR
# should be on a journaled filesystem, as users' disks are (a sync waits for
# a journal commit); benches/README.md says how to make one on a loop
# device, and the script says what WORKDIR is on.
# Environment: JBUILD (default target/release/jbuild), CRANE (default:
# crane in $PATH or ~/go/bin; install with
# `go install github.com/google/go-containerregistry/cmd/crane@latest`).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
jbuild=${JBUILD:-$repo/target/release/jbuild}
[ -x "$jbuild" ] || { echo "build jbuild first: cargo build --release" >&2; exit 1; }
crane=${CRANE:-$(command -v crane || true)}
if [ -z "$crane" ] && [ -x "$HOME/go/bin/crane" ]; then crane=$HOME/go/bin/crane; fi
command -v skopeo >/dev/null || { echo "skopeo is needed (apt-get install skopeo)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 1; }

work=${1:-$(mktemp -d /tmp/jbuild-bench-registry.XXXXXX)}
mkdir -p "$work"
. "$repo/benches/fs.sh"
describe_fs "$work"
free_kib=$(df -Pk "$work" | awk 'NR==2 {print $4}')
if [ "$free_kib" -lt $((4 * 1024 * 1024)) ]; then
  echo "need about 4 GiB free in $work (have $((free_kib / 1024)) MiB)" >&2
  exit 1
fi
export JBUILD_ROOT=$work/root JBUILD_CONFIG=$work/jbuild.toml
: > "$JBUILD_CONFIG"
reg_pid=
cleanup() { [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

echo "== making the images in $JBUILD_ROOT/store"
BIG_MIB=${BIG_MIB:-1024} SMALL_FILES=${SMALL_FILES:-50000} python3 - "$JBUILD_ROOT/store" <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile, zlib
store = sys.argv[1]
blobs = os.path.join(store, "blobs", "sha256")
os.makedirs(blobs, exist_ok=True)

class Hashing:
    """A file that hashes what is written to it."""
    def __init__(self, f):
        self.f, self.h, self.n = f, hashlib.sha256(), 0
    def write(self, b):
        self.h.update(b); self.n += len(b); return self.f.write(b)
    def flush(self): self.f.flush()

def put(data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, d), "wb") as f:
        f.write(data)
    return "sha256:" + d, len(data)

def layer(level, fill):
    tmp = os.path.join(blobs, ".tmp-layer")
    with open(tmp, "wb") as raw_f:
        gz_h = Hashing(raw_f)
        with gzip.GzipFile(fileobj=gz_h, mode="wb", compresslevel=level, mtime=0) as gz:
            tar_h = Hashing(gz)
            with tarfile.open(fileobj=tar_h, mode="w|", format=tarfile.PAX_FORMAT) as t:
                fill(t)
    d = gz_h.h.hexdigest()
    os.rename(tmp, os.path.join(blobs, d))
    return ("sha256:" + d, gz_h.n, "sha256:" + tar_h.h.hexdigest())

class Noise(io.RawIOBase):
    def __init__(self, n): self.left = n
    def readable(self): return True
    def readinto(self, b):
        k = min(len(b), self.left, 1 << 20)
        b[:k] = os.urandom(k); self.left -= k; return k

def big(t):
    ti = tarfile.TarInfo("data/big.bin"); ti.size = int(os.environ["BIG_MIB"]) << 20; ti.mode = 0o644
    t.addfile(ti, io.BufferedReader(Noise(ti.size), 1 << 20))

def small(t):
    for i in range(int(os.environ["SMALL_FILES"])):
        ti = tarfile.TarInfo("files/%03d/%05d" % (i // 1000, i)); ti.size = 1024; ti.mode = 0o644
        t.addfile(ti, io.BytesIO(os.urandom(1024)))

index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}
for name, level, fill in (("big:1", 0, big), ("small:1", 6, small)):
    digest, size, diff_id = layer(level, fill)
    config = json.dumps({"architecture": "amd64", "os": "freebsd", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}},
                        separators=(",", ":"), sort_keys=True).encode()
    cd, cn = put(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cn},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size}]},
                          separators=(",", ":"), sort_keys=True).encode()
    md, mn = put(manifest)
    index["manifests"].append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": mn,
                               "annotations": {"org.opencontainers.image.ref.name": name}})
    print("  %-8s layer %s, %.1f MB" % (name, digest[:19], size / 1e6))
with open(os.path.join(store, "oci-layout"), "w") as f:
    f.write('{"imageLayoutVersion":"1.0.0"}')
with open(os.path.join(store, "index.json"), "w") as f:
    json.dump(index, f)
PY
"$jbuild" images

bytes_of() { # total blob bytes of an image in the store
  python3 - "$JBUILD_ROOT/store" "$1" <<'PY'
import json, os, sys
store, name = sys.argv[1], sys.argv[2]
idx = json.load(open(os.path.join(store, "index.json")))
m = next(d for d in idx["manifests"] if d["annotations"]["org.opencontainers.image.ref.name"] == name)
man = json.load(open(os.path.join(store, "blobs/sha256", m["digest"][7:])))
print(m["size"] + man["config"]["size"] + sum(l["size"] for l in man["layers"]))
PY
}

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_registry() {
  cleanup; reg_pid=
  rm -rf "$work/registry"
  "$repo/registry/start" "$port" "$work/registry" >"$work/registry.log" 2>&1 &
  reg_pid=$!
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "registry did not start:" >&2; cat "$work/registry.log" >&2; exit 1
}

results=$work/results
: > "$results"
# measure IMAGE OP TOOL BYTES -- COMMAND...
measure() {
  local image=$1 op=$2 tool=$3 bytes=$4; shift 5
  if ! /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/out" 2>"$work/err"; then
    echo "  $tool $op $image FAILED:"; tail -5 "$work/err"; return 0
  fi
  read -r secs rss < "$work/time"
  echo "$image $op $tool $secs $rss $bytes" >> "$results"
  printf '  %-6s %-5s %-7s %7.2f s\n' "$image" "$op" "$tool" "$secs"
}

# crane pushes a layout holding one image: the same blobs, one name.
for image in big small; do
  mkdir -p "$work/layout-$image"
  cp "$JBUILD_ROOT/store/oci-layout" "$work/layout-$image/"
  ln -sfn "$JBUILD_ROOT/store/blobs" "$work/layout-$image/blobs"
  python3 - "$JBUILD_ROOT/store/index.json" "$image:1" > "$work/layout-$image/index.json" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))
i["manifests"] = [m for m in i["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == sys.argv[2]]
print(json.dumps(i))
PY
done

# copy_rounds IMAGE REF: registry → new layout, ROUNDS rounds of every row
# in one order, medians (see the head of this file).
copy_rounds() {
  local image=$1 ref=$2 rows=(jbuild crane crane+sync) r row t0 t1
  [ -n "$crane" ] || rows=(jbuild)
  [ -n "${JBUILD_BEFORE:-}" ] && rows+=(before)
  local load0; load0=$(cut -d' ' -f1-3 /proc/loadavg)
  mkdir -p "$work/copy-times"; rm -f "$work/copy-times/"*
  for r in $(seq "${ROUNDS:-3}"); do
    for row in "${rows[@]}"; do
      rm -rf "$work/copy"
      t0=$EPOCHREALTIME
      case $row in
        jbuild) "$jbuild" -q copy "docker://$ref" "oci:$work/copy:1" ;;
        before) "$JBUILD_BEFORE" -q copy "docker://$ref" "oci:$work/copy:1" ;;
        crane) "$crane" pull --insecure --format=oci "$ref" "$work/copy" ;;
        crane+sync) "$crane" pull --insecure --format=oci "$ref" "$work/copy" && sync -f "$work/copy" ;;
      esac >/dev/null 2>"$work/err" || { echo "  $row copy $image FAILED:"; tail -5 "$work/err"; }
      t1=$EPOCHREALTIME
      echo "$t1 - $t0" | bc >> "$work/copy-times/$row"
    done
  done
  rm -rf "$work/copy"
  python3 - "$work/copy-times" "$image" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" "${rows[@]}" <<'PY'
import os, statistics, sys
d, image, l0, l1, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
med = {r: statistics.median(float(x) for x in open(os.path.join(d, r))) for r in rows}
for r in rows:
    ratios = "  ".join("%.2fx %s" % (med[r] / med[p], p) for p in ("crane", "crane+sync") if p in med and p != r)
    print("  %-6s copy  %-10s median %7.3f s   %s" % (image, r, med[r], ratios))
print("  (copy registry -> new layout, medians of %d rounds; load average %s -> %s)"
      % (len(open(os.path.join(d, rows[0])).readlines()), l0, l1))
PY
}

tools=(jbuild skopeo)
[ -n "$crane" ] && tools+=(crane)
echo "== tools: ${tools[*]} (registry: $(/usr/bin/docker-registry --version))"
for image in big small; do
  bytes=$(bytes_of "$image:1")
  ref=127.0.0.1:$port/bench/$image:1
  for tool in "${tools[@]}"; do
    start_registry
    case $tool in
      jbuild) measure $image push jbuild "$bytes" -- "$jbuild" -q push "$image:1" "$ref" ;;
      skopeo) measure $image push skopeo "$bytes" -- skopeo copy -q --insecure-policy --dest-tls-verify=false \
                "oci:$JBUILD_ROOT/store:$image:1" "docker://$ref" ;;
      crane)  measure $image push crane "$bytes" -- "$crane" push --insecure "$work/layout-$image" "$ref" ;;
    esac
  done
  # The registry now holds the image (pushed by the last tool); pull it.
  for tool in "${tools[@]}"; do
    rm -rf "$work/pull"
    case $tool in
      jbuild) measure $image pull jbuild "$bytes" -- env JBUILD_ROOT="$work/pull" "$jbuild" -q pull "$ref" ;;
      skopeo) measure $image pull skopeo "$bytes" -- skopeo copy -q --insecure-policy --src-tls-verify=false \
                "docker://$ref" "oci:$work/pull:$image" ;;
      crane)  measure $image pull crane "$bytes" -- "$crane" pull --insecure --format=oci "$ref" "$work/pull" ;;
    esac
  done
  rm -rf "$work/pull"
  copy_rounds "$image" "$ref"
done
cleanup; reg_pid=

echo
echo "== results (ratio: time / fastest tool's time for that image and operation)"
printf '%-6s %-5s %-7s %9s %9s %10s %6s\n' image op tool "wall s" "MB/s" "max RSS" ratio
sort -k1,1 -k2,2 "$results" | awk '
  { key = $1 " " $2; row[NR] = $0; if (!(key in best) || $4 < best[key]) best[key] = $4 }
  END { for (i = 1; i <= NR; i++) { split(row[i], f, " "); key = f[1] " " f[2]
        printf "%-6s %-5s %-7s %9.2f %9.1f %7d MiB %6.2f\n", f[1], f[2], f[3], f[4], f[6] / 1e6 / (f[4] > 0 ? f[4] : 0.01), f[5] / 1024, f[4] / (best[key] > 0 ? best[key] : 0.01) } }'
[ -z "${1:-}" ] && rm -rf "$work"
exit 0
