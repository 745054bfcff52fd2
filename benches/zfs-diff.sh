#!/usr/bin/env bash
# Layer export through `zfs diff` against the tree walk, on real OpenZFS:
# builds the bench on the host and runs it in the qemu lane's guest (see
# benches/zfs_diff.rs for what it measures). Run by hand, not in CI.
# usage: bash benches/zfs-diff.sh        (JBUILD_BENCH_FILES=N for another size)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cargo bench --locked --no-run --bench zfs_diff --message-format=json |
  grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//' | grep -E '/zfs_diff-[0-9a-f]+$')
[ -x "$bin" ] || { echo "zfs-diff bench: no bench binary built" >&2; exit 1; }
JBUILD_TEST_ZFS_POOL=tank ZFSVM_POOL=tank ZFSVM_DISK_SIZE=${ZFSVM_DISK_SIZE:-8G} \
  ZFSVM_ENV="JBUILD_TEST_ZFS_POOL JBUILD_BENCH_FILES" \
  exec bash tests/zfs-vm/run-in-vm.sh "$PWD" "$bin"
