#!/usr/bin/env bash
# The qemu lane: the tests that need real OpenZFS with `zfs diff`.
#
# Builds the test binary (tests/it) on the host (`cargo test --no-run`),
# boots one OpenZFS guest (run-in-vm.sh beside this file; the kernel and
# module are built once per machine and cached), and there creates a pool
# on the blank disk and runs each binary with `--ignored` and
# JBUILD_TEST_ZFS_POOL set. On the host those tests are ignored ("needs the
# qemu lane"); here they must run: the lane fails when a binary did not
# report a passing `test result:` line with at least one test.
#
# usage: bash tests/zfs-vm/lane.sh [extra test-binary arguments, e.g. a filter]
# Env: ZFSVM_* as in run-in-vm.sh; JBUILD_ZFS_CAPTURE_DIR to keep live
# `zfs diff` captures (for test fixtures).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TESTS=(it)
say() { echo "zfs-vm lane: $*" >&2; }

targs=()
for t in "${TESTS[@]}"; do [ -f "tests/$t/main.rs" ] && targs+=(--test "$t"); done
say "building ${targs[*]}"
# (cargo also lists the jbuild binary the integration tests use: only keep tests)
names=$(printf '%s|' "${TESTS[@]}"); names=${names%|}
mapfile -t bins < <(cargo test --locked --no-run --message-format=json "${targs[@]}" |
  grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//' | grep -E "/($names)-[0-9a-f]+\$")
[ ${#bins[@]} -eq $((${#targs[@]} / 2)) ] || { say "expected $((${#targs[@]} / 2)) test binaries, cargo built: ${bins[*]:-none}"; exit 1; }

# the target directory may live outside the checkout: share it too
TARGET=$(cargo metadata --format-version 1 --no-deps | grep -o '"target_directory":"[^"]*"' | sed 's/.*:"//; s/"$//')
share=${ZFSVM_SHARE:-}
case "$TARGET/" in "$ROOT"/*) ;; *) share="$share $TARGET" ;; esac
if [ -n "${JBUILD_ZFS_CAPTURE_DIR:-}" ]; then mkdir -p "$JBUILD_ZFS_CAPTURE_DIR"; share="$share $(realpath "$JBUILD_ZFS_CAPTURE_DIR")"; fi

out=$(mktemp); trap 'rm -f "$out"' EXIT
t0=$(date +%s)
# a warm run takes about 3 minutes: a hung guest must not eat the CI budget
run_guest() {
  JBUILD_TEST_ZFS_POOL=tank ZFSVM_POOL=tank ZFSVM_SHARE="$share" ZFSVM_TIMEOUT=${ZFSVM_TIMEOUT:-900} \
    ZFSVM_ENV="JBUILD_TEST_ZFS_POOL JBUILD_ZFS_CAPTURE_DIR RUST_BACKTRACE JBUILD_LANE_LOG JBUILD_REQUIRE_LANES" ZFSVM_DISK_SIZE=${ZFSVM_DISK_SIZE:-4G} \
    bash tests/zfs-vm/run-in-vm.sh "$ROOT" sh tests/zfs-vm/guest.sh "${bins[@]}" -- "$@" | tee "$out"
}
rc=0
run_guest "$@" || rc=$?
# 124: the guest hung (seen once in emulation); 125: the VM itself failed.
# Those are the machine's faults, not the tests': boot once more, and say so.
# A test failure (any other code) is never retried.
if [ "$rc" = 124 ] || [ "$rc" = 125 ]; then
  say "the guest did not finish (exit $rc): booting it once more"
  rc=0
  run_guest "$@" || rc=$?
fi
say "guest finished in $(( $(date +%s) - t0 )) s (exit $rc)"
[ "$rc" = 0 ] || exit "$rc"
ran=$(grep -c '^test result: ok\. [1-9][0-9]* passed' "$out" || true)
if [ "$ran" != "${#bins[@]}" ]; then
  say "only $ran of ${#bins[@]} guest test binaries reported passing tests: the lane did not run"
  exit 1
fi
