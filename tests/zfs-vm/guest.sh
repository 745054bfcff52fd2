# Runs inside the OpenZFS guest (see lane.sh): each test binary given before
# `--` with `--ignored` and the arguments after it. Exits non-zero if any
# binary fails. The pool ($JBUILD_TEST_ZFS_POOL) was created by the harness.
# lane.sh reads two kinds of line: "zfs-vm guest: started" (the guest got
# as far as its first test binary: a hang after it is not retried) and
# "zfs-vm guest: running NAME" before each binary's own output.
set -u
bins=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins="$bins $1"; shift; done
[ $# -gt 0 ] && shift
zfs version | sed 's/^/zfs-vm guest: /'
# the tests' registry listens on the guest's own 127.0.0.1
ip link set lo up || { echo "zfs-vm guest: cannot bring up lo"; exit 1; }
echo "zfs-vm guest: started"
rc=0
for b in $bins; do
  echo "zfs-vm guest: running ${b##*/}"
  "$b" --ignored "$@" || rc=1
done
exit $rc
