# Runs inside the OpenZFS guest (see lane.sh): each test binary given before
# `--` with `--ignored` and the arguments after it. Exits non-zero if any
# binary fails. The pool ($JBUILD_TEST_ZFS_POOL) was created by the harness.
set -u
bins=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins="$bins $1"; shift; done
[ $# -gt 0 ] && shift
zfs version | sed 's/^/zfs-vm guest: /'
rc=0
for b in $bins; do
  echo "zfs-vm guest: running ${b##*/}"
  "$b" --ignored "$@" || rc=1
done
exit $rc
