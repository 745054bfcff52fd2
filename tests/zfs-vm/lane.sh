#!/usr/bin/env bash
# The qemu lane: the tests that need real OpenZFS with `zfs diff`.
#
# Builds the guest test binaries on the host (`cargo test --no-run`), boots
# one OpenZFS guest (run-in-vm.sh beside this file; the kernel and module
# are built once per machine and cached), and there creates a pool on the
# blank disk and runs each binary with `--ignored` and JBUILD_TEST_ZFS_POOL
# set. On the host those tests are ignored ("needs the qemu lane"); here
# they must all run, and pass:
#
# * a binary in GUEST_TESTS that is not there (no tests/NAME/main.rs, or cargo
#   built none) fails the lane, naming it;
# * each binary must pass exactly as many tests in the guest as it lists
#   ignored on the host (`BIN --list --ignored` with the same arguments),
#   and at least one in all;
# * a guest that hangs or dies after its first test binary started is a
#   failure. Only a VM that never got that far (no "zfs-vm guest: started"
#   line: the machine's fault, seen once in emulation) is booted once more.
#
# The guest's own output is prefixed with "guest| ", so tests/run's closing
# line does not take its `test result:` lines for host runs; the lane's
# verdict is one line tests/run reads instead:
#   zfs-vm lane: counted: P passed, F failed in the guest, of H ignored on the host
#
# usage: bash tests/zfs-vm/lane.sh [extra test-binary arguments, e.g. a filter]
# Env: ZFSVM_* as in run-in-vm.sh; JBUILD_ZFS_CAPTURE_DIR to keep live
# `zfs diff` captures (for test fixtures).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
say() { echo "zfs-vm lane: $*" >&2; }
fail() { say "$*"; exit 1; }

# ---- the guest tests: the one place that names them --------------------
# Test targets (tests/NAME/main.rs) whose #[ignore]d tests are the guest's:
# the one integration binary, every test it ignores on the host being a
# guest test (tests/README.md).
GUEST_TESTS=(it)
# How many tests binary $1 ignores on the host with the lane's arguments.
host_ignored() { local b=$1; shift; "$b" --list --ignored "$@" | grep -c ': test$' || true; }
# -------------------------------------------------------------------------

targs=()
for t in "${GUEST_TESTS[@]}"; do
  [ -f "tests/$t/main.rs" ] || fail "guest test binary $t: tests/$t/main.rs is missing (lane.sh's GUEST_TESTS names it)"
  targs+=(--test "$t")
done
[ -x /usr/bin/docker-registry ] ||
  fail "/usr/bin/docker-registry is missing: install Debian's docker-registry (tests/run does); the guest runs it"
say "building ${targs[*]}"
# (cargo also lists the jbuild binary the integration tests use: only keep tests)
built=$(cargo test --locked --no-run --message-format=json "${targs[@]}" |
  grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//')
bins=()
for t in "${GUEST_TESTS[@]}"; do
  b=$(echo "$built" | grep -E "/$t-[0-9a-f]+\$" || true)
  [ -n "$b" ] && [ -x "$b" ] || fail "guest test binary $t: cargo built no executable for it"
  bins+=("$b")
done

declare -A want=()
host_total=0
for b in "${bins[@]}"; do
  n=$(host_ignored "$b" "$@")
  want[${b##*/}]=$n
  host_total=$((host_total + n))
done
[ "$host_total" -gt 0 ] || fail "the host ignores no test of ${GUEST_TESTS[*]} with these arguments: nothing would run in the guest"

# the target directory may live outside the checkout: share it too
TARGET=$(cargo metadata --format-version 1 --no-deps | grep -o '"target_directory":"[^"]*"' | sed 's/.*:"//; s/"$//')
share=${ZFSVM_SHARE:-}
case "$TARGET/" in "$ROOT"/*) ;; *) share="$share $TARGET" ;; esac
# jbuild's HTTP client loads the system's CA certificates even for the
# guest's plain-HTTP registry, and the guest has none of its own
share="$share /etc/ssl/certs"
if [ -n "${JBUILD_ZFS_CAPTURE_DIR:-}" ]; then mkdir -p "$JBUILD_ZFS_CAPTURE_DIR"; share="$share $(realpath "$JBUILD_ZFS_CAPTURE_DIR")"; fi

out=$(mktemp) accel=$(mktemp); trap 'rm -f "$out" "$accel"' EXIT
t0=$(date +%s)
# a warm run takes about 5 minutes: a hung guest must not eat the CI budget
run_guest() {
  : >"$out"
  JBUILD_TEST_ZFS_POOL=tank ZFSVM_POOL=tank ZFSVM_SHARE="$share" ZFSVM_TIMEOUT=${ZFSVM_TIMEOUT:-900} ZFSVM_ACCEL_LOG="$accel" \
    ZFSVM_ENV="JBUILD_TEST_ZFS_POOL JBUILD_ZFS_CAPTURE_DIR RUST_BACKTRACE JBUILD_LANE_LOG JBUILD_REQUIRE_LANES" ZFSVM_DISK_SIZE=${ZFSVM_DISK_SIZE:-4G} \
    ZFSVM_EXTRA_BINS="docker-registry ${ZFSVM_EXTRA_BINS:-}" \
    bash tests/zfs-vm/run-in-vm.sh "$ROOT" sh tests/zfs-vm/guest.sh "${bins[@]}" -- "$@" |
    tee "$out" | sed -u 's/^/guest| /'
}
rc=0
run_guest "$@" || rc=$?
# 124: the guest hung; 125: the VM itself failed. Before the first test
# binary started that is the machine's fault: boot once more, and say so.
# After it, a hang may be a deadlock in jbuild: never retried.
if { [ "$rc" = 124 ] || [ "$rc" = 125 ]; } && ! grep -q '^zfs-vm guest: started' "$out"; then
  say "the guest never started its first test (exit $rc): booting it once more"
  rc=0
  run_guest "$@" || rc=$?
fi
# which accelerator the (last) boot used, and why: KVM, TCG or none (run-in-vm.sh)
used=$(tail -n 1 "$accel"); used=${used:-none: run-in-vm.sh did not get as far as choosing}
say "guest finished in $(( $(date +%s) - t0 )) s (exit $rc) under ${used%%[ :]*}"
if [ "$rc" = 124 ] || [ "$rc" = 125 ]; then
  if grep -q '^zfs-vm guest: started' "$out"; then
    say "the guest hung or died after its tests started (exit $rc, ZFSVM_TIMEOUT=${ZFSVM_TIMEOUT:-900} s): a failure, not retried"
  else
    say "the guest never started its first test, twice (exit $rc): the VM does not work here"
  fi
fi

# Per binary: the `test result:` line after its "running" line.
declare -A passed=() failed=()
while read -r name p f; do passed[$name]=$p; failed[$name]=$f; done < <(
  awk '/^zfs-vm guest: running / { cur = $4 }
       /^test result:/ && cur != "" {
         for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p = $i; if ($(i+1) ~ /^failed/) f = $i }
         print cur, p, f; cur = "" }' "$out")
gp=0 gf=0 bad=0
for b in "${bins[@]}"; do
  n=${b##*/} w=${want[${b##*/}]}
  p=${passed[$n]:-} f=${failed[$n]:-}
  if [ -z "$p" ]; then
    say "$n: no test result from the guest (it did not run, or did not finish); $w tests expected"; bad=1; continue
  fi
  gp=$((gp + p)) gf=$((gf + f))
  if [ "$p" != "$w" ] || [ "$f" != 0 ]; then
    say "$n: $p passed, $f failed in the guest, but the host ignores $w: every ignored test must pass there"; bad=1
  fi
done
say "accelerator: $used"
echo "zfs-vm lane: counted: $gp passed, $gf failed in the guest, of $host_total ignored on the host"
[ "$rc" = 0 ] || exit "$rc"
[ "$bad" = 0 ] || exit 1
