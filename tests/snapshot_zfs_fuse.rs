//! The snapshotter conformance suite on the `zfs` backend, on zfs-fuse:
//! each check on a fresh file-backed pool (see `zfs_fuse/mod.rs`).

mod zfs_fuse;

use jbuild::snapshot::testsuite::Fixture;
use jbuild::snapshot::zfs::ZfsSnapshotter;

fn make() -> Fixture {
    match zfs_fuse::Pool::new() {
        Some(pool) => {
            let sn = ZfsSnapshotter::open(&pool.dataset).unwrap();
            Fixture::new(Box::new(sn), pool)
        }
        // JBUILD_SKIP_ZFS_FUSE=1: the dir backend stands in, so the suite
        // still runs (and says on stderr that ZFS was skipped).
        None => {
            let tmp = tempfile::tempdir().unwrap();
            let sn = jbuild::snapshot::dir::DirSnapshotter::new(tmp.path().join("sn")).unwrap();
            Fixture::new(Box::new(sn), tmp)
        }
    }
}

jbuild::snapshotter_suite!(make);
