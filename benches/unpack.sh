#!/usr/bin/env bash
# Pull + unpack: `jbuild pull` (download, unpacked as it arrives, verified,
# committed: what `jbuild create` and `run` do for an image they lack) side
# by side with `curl BLOB-URL | gzip -dc | tar -x` (and `zstd -dc`) of the
# very same blob from the same registry, in one interleaved run. Run by
# hand, as root, not in CI:
#
#   cargo build --release && bash benches/unpack.sh [WORKDIR]
#
# WORKDIR should be on a journaled filesystem, as users' disks are (a sync
# waits for a journal commit there; benches/README.md says how to make one
# on a loop device); the script says what it is on.
#
# SMALL=1: a quick run of a few minutes (FILES=10000 BIG_MIB=256, one
# round, overlay only); FILES=2000 BIG_MIB=64 ROUNDS=1 tries the script.
# JBUILD_BEFORE=BINARY: another jbuild (say, the release binary from before
# a change) timed in the same rounds, as `jbuild-before`. BACKENDS (default
# "overlay dir"): the backends jbuild pulls into.
#
# Two layers (SETS, default "many big"):
#   many  one tar of FILES (default 50,000) files of 0-16 KiB (half random
#         bytes, half text, so it compresses as real trees do) in 50
#         directories, each directory's files together as a tree walk lists
#         them (SPREAD=1: the files dealt round-robin over the directories
#         instead); about 410 MB;
#   big   BIG_MIB (default 1024) MiB in 16 files, half random, half text:
#         the 1 GiB image of issue 34.
# Each is stored in a jbuild store twice, gzip -6 (image SET-gz:1) and zstd
# -3 (SET-zst:1), and pushed once to a local Distribution (registry/start).
# Each round then runs, for each set and compression: `jbuild pull` into an
# empty state root with `--backend dir` and `--backend overlay`, and the
# reference (curl from the registry into the decoder into tar) into an
# empty directory. The reference pays for durability too (jbuild makes the
# layer durable before it commits it).
# Every timing ends with `sync -f WORKDIR` (that filesystem only, not other
# sessions' writes). Printed: per-run wall and CPU (user + system, of all
# the run's processes) times, then medians and the ratio to the reference
# of the same set and compression (issue 34's target: ≤ 1.1x), and the load
# average before and after. Runs alternate: for each set and compression,
# reference, jbuild (each backend), before, in every round.
#
# Trees of finished runs: retired into WORKDIR/graveyard (on ext4 without a
# journal a deletion bills the next run; see build.sh), or deleted, untimed,
# before the next run with DELETE=1 (a journaled filesystem has no such
# cost, and the big set's 18 trees would not fit a small one).
#
# Disk: about 3 GiB in WORKDIR at the peak with DELETE=1 (default WORKDIR: a
# temp dir under /var/tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
jbuild=${JBUILD:-$repo/target/release/jbuild}
[ -x "$jbuild" ] || { echo "build jbuild first: cargo build --release" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root (overlay mounts, owners)" >&2; exit 1; }
command -v zstd >/dev/null || { echo "zstd is needed (apt-get install zstd)" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 1; }
before=${JBUILD_BEFORE:-}
if [ "${SMALL:-0}" = 1 ]; then
  : "${FILES:=10000}" "${BIG_MIB:=256}" "${ROUNDS:=1}" "${BACKENDS:=overlay}"
fi
files=${FILES:-50000}
big_mib=${BIG_MIB:-1024}
sets=${SETS:-many big}
rounds=${ROUNDS:-3}
backends=${BACKENDS:-overlay dir}

work=${1:-$(mktemp -d /var/tmp/jbuild-bench-unpack.XXXXXX)}
mkdir -p "$work"
. "$repo/benches/fs.sh"
describe_fs "$work"
export JBUILD_ROOT=$work/root JBUILD_CONFIG=$work/jbuild.toml
: > "$JBUILD_CONFIG"
reg_pid=
cleanup() {
  [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null
  wait 2>/dev/null || true
  for m in $(awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do umount "$m" 2>/dev/null || true; done
}
trap cleanup EXIT

mkdir -p "$JBUILD_ROOT/store"
for set in $sets; do
echo "== making the $set layer and its images in $JBUILD_ROOT/store"
FILES=$files BIG_MIB=$big_mib python3 - "$set" "$work/$set.tar" <<'PY'
import io, os, random, sys, tarfile
rnd = random.Random(16)
words = b"the quick brown fox jumps over a lazy dog while jails build images\n"
kind, path = sys.argv[1], sys.argv[2]
def text(size):
    return (words * (size // len(words) + 1))[:size]
with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
    def add_dir(name):
        ti = tarfile.TarInfo(name); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; ti.mtime = 1700000000
        t.addfile(ti)
    def add_file(name, data):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644; ti.mtime = 1700000000
        t.addfile(ti, io.BytesIO(data))
    if kind == "many":
        for d in range(50):
            add_dir("srv/d%02d" % d)
        n = int(os.environ["FILES"])
        for i in range(n):
            size = rnd.randrange(0, 16 << 10)
            data = os.urandom(size) if i % 2 else text(size)
            # A directory's files together, as a tree walk lists them (and
            # os.environ["SPREAD"] set: round-robin over the directories).
            d = i % 50 if os.environ.get("SPREAD") else i * 50 // n
            add_file("srv/d%02d/f%06d" % (d, i), data)
    else:
        add_dir("srv")
        size = int(os.environ["BIG_MIB"]) * (1 << 20) // 16
        for i in range(16):
            add_file("srv/big%02d" % i, os.urandom(size) if i % 2 else text(size))
PY
gzip -6 -n -c "$work/$set.tar" > "$work/$set.tar.gz"
zstd -q -3 -c "$work/$set.tar" > "$work/$set.tar.zst"
python3 - "$JBUILD_ROOT/store" "$work" "$set" <<'PY'
import hashlib, json, os, shutil, sys
store, work, kind = sys.argv[1], sys.argv[2], sys.argv[3]
blobs = os.path.join(store, "blobs", "sha256")
os.makedirs(blobs, exist_ok=True)
def digest_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()
def put(data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, d), "wb") as f:
        f.write(data)
    return "sha256:" + d, len(data)
diff_id = "sha256:" + digest_of(os.path.join(work, kind + ".tar"))
index_path = os.path.join(store, "index.json")
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}
if os.path.exists(index_path):
    index = json.load(open(index_path))
for ext, mt in (("gz", "gzip"), ("zst", "zstd")):
    name = "%s-%s:1" % (kind, ext)
    path = os.path.join(work, kind + ".tar." + ext)
    d = digest_of(path)
    shutil.copyfile(path, os.path.join(blobs, d))
    with open(path + ".digest", "w") as f:
        f.write("sha256:" + d)
    config = json.dumps({"architecture": "amd64", "os": "freebsd", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}},
                        separators=(",", ":"), sort_keys=True).encode()
    cd, cn = put(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cn},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+" + mt,
                                       "digest": "sha256:" + d, "size": os.path.getsize(path)}]},
                          separators=(",", ":"), sort_keys=True).encode()
    md, mn = put(manifest)
    index["manifests"].append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": mn,
                               "annotations": {"org.opencontainers.image.ref.name": name}})
    print("  %-10s layer sha256:%s…, %.1f MB" % (name, d[:12], os.path.getsize(path) / 1e6))
with open(os.path.join(store, "oci-layout"), "w") as f:
    f.write('{"imageLayoutVersion":"1.0.0"}')
with open(index_path, "w") as f:
    json.dump(index, f)
PY
printf '  tar %.1f MB\n' "$(($(stat -c %s "$work/$set.tar") / 100000))e-1"
rm -f "$work/$set.tar"
done

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$repo/registry/start" "$port" "$work/registry" >"$work/registry.log" 2>&1 &
reg_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
for set in $sets; do
  for image in gz zst; do
    "$jbuild" -q push "$set-$image:1" "127.0.0.1:$port/bench/$set-$image:1" >/dev/null
  done
done
echo "== default backend as root here: $(env JBUILD_ROOT="$work/probe" "$jbuild" info 2>/dev/null | grep -i backend | head -1)"
rm -rf "$work/probe"

results=$work/results
: > "$results"
# run NAME COMMAND...: times COMMAND then `sync -f $work`, into $results:
# wall and CPU seconds (user + system of every process it waited for).
# The last run's tree is retired (renamed into $work/graveyard), not
# deleted: on ext4 without a journal a new file skips every inode deleted in
# the last 60-360 s, so deleting before a timed run bills that run for it
# (see build.sh). The graveyard goes with $work at the end.
run() {
  local name=$1; shift
  cleanup_mounts; sync -f "$work"
  if ! /usr/bin/time -f '%e %U %S' -o "$work/time" \
      bash -c '"$@" && sync -f "$W"' run "$@" >"$work/out" 2>"$work/err"; then
    echo "  $name FAILED:"; tail -5 "$work/err"; return 0
  fi
  local wall cpu
  read -r wall cpu < <(awk '{printf "%s %.2f\n", $1, $2 + $3}' "$work/time")
  echo "$name $wall $cpu" >> "$results"
  printf '  %-26s %7.2f s  cpu %6.2f s\n' "$name" "$wall" "$cpu"
}
export W=$work
cleanup_mounts() {
  for m in $(awk -v d="$work/dest" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r); do umount "$m"; done
  if [ -e "$work/dest" ] && [ "${DELETE:-0}" = 1 ]; then
    rm -rf "$work/dest"
  elif [ -e "$work/dest" ]; then
    mkdir -p "$work/graveyard"
    mv "$work/dest" "$(mktemp -u "$work/graveyard/t.XXXXXX")"
  fi
}
# fetch_untar URL DECODER...: the reference, curl into the decoder into tar.
fetch_untar() {
  local url=$1; shift
  mkdir -p "$W/dest" && curl -sfL "$url" | "$@" | tar -x -C "$W/dest"
}
export -f fetch_untar

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$rounds"); do
  echo "== round $r/$rounds (load $(cut -d' ' -f1-3 /proc/loadavg))"
  for set in $sets; do
    for image in gz zst; do
      ref=127.0.0.1:$port/bench/$set-$image:1
      url=http://127.0.0.1:$port/v2/bench/$set-$image/blobs/$(cat "$work/$set.tar.$image.digest")
      case $image in gz) dec=(gzip -dc) ;; zst) dec=(zstd -dc) ;; esac
      run "$set-$image-reference" fetch_untar "$url" "${dec[@]}"
      for b in $backends; do
        run "$set-$image-jbuild-$b" env JBUILD_ROOT="$work/dest" "$jbuild" -q --backend "$b" pull "$ref"
        [ -z "$before" ] || run "$set-$image-before-$b" env JBUILD_ROOT="$work/dest" "$before" -q --backend "$b" pull "$ref"
      done
    done
  done
done
cleanup_mounts
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "== medians over $rounds rounds (ratio: to the reference of the same compression); load $load_before -> $load_after"
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, wall, cpu = line.split()
    runs.setdefault(name, []).append((float(wall), float(cpu)))
print("%-9s %-15s %8s %-13s %5s  %8s %5s" % ("image", "tool", "wall", "(min-max)", "ratio", "cpu", "ratio"))
for image in sorted({n.rsplit("-", 1)[0] for n in runs if n.endswith("-reference")}):
    ref = runs.get(image + "-reference", [(float("nan"),) * 2])
    ref_w = statistics.median(w for w, _ in ref)
    ref_c = statistics.median(c for _, c in ref)
    tools = sorted({n[len(image) + 1:] for n in runs if n.startswith(image + "-")},
                   key=lambda t: (t != "reference", t))
    for tool in tools:
        v = runs[image + "-" + tool]
        w = statistics.median(x for x, _ in v)
        c = statistics.median(x for _, x in v)
        ws = [x for x, _ in v]
        print("%-9s %-15s %6.2f s (%.2f-%.2f) %5.2fx  %6.2f s %5.2fx"
              % (image, tool, w, min(ws), max(ws), w / ref_w, c, c / ref_c))
PY
[ -z "${1:-}" ] && rm -rf "$work"
exit 0
