# Sourced by the benches: says what filesystem a work directory is on, and
# warns when it has no journal. A sync's cost is a journal commit on the
# disks users have (ext4, XFS, ZFS); on a filesystem without one (this
# project's CI machines' root is ext4 without a journal) or on tmpfs it is
# another cost, and the figures do not answer for users' machines.
# benches/README.md ("A journaled filesystem") says how to make one on a
# loop device.
describe_fs() {
  local dir=$1 fstype source journal=unknown
  fstype=$(findmnt -no FSTYPE -T "$dir" 2>/dev/null || stat -f -c %T "$dir")
  source=$(findmnt -no SOURCE -T "$dir" 2>/dev/null || echo '?')
  case $fstype in
    ext4|ext3)
      if dumpe2fs -h "$source" 2>/dev/null | grep -q has_journal; then journal=yes; else journal=no; fi ;;
    xfs|zfs|btrfs|f2fs) journal=yes ;;
    tmpfs|ramfs|ext2) journal=no ;;
  esac
  echo "== $dir is on $fstype ($source), journal: $journal"
  if [ "$journal" = no ]; then
    echo "   warning: no journal here; syncs cost what they cost on users' disks only on a journaled filesystem" >&2
  fi
}
