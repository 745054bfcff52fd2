//! The snapshotter conformance suite on the `zfs` backend on real OpenZFS,
//! in the qemu lane (`tests/zfs-vm/lane.sh` runs this binary in the guest
//! with `--ignored` and `JBUILD_TEST_ZFS_POOL` set). On the host every check
//! is ignored with the reason "needs the qemu lane".
//!
//! Each check gets a fresh parent dataset `<pool>/suite<pid>x<n>`,
//! destroyed (with everything under it) when the check ends.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use jbuild::snapshot::testsuite::Fixture;
use jbuild::snapshot::zfs::ZfsSnapshotter;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The parent dataset of one check; destroyed on drop.
struct Dataset(String);

impl Drop for Dataset {
    fn drop(&mut self) {
        let _ = Command::new("zfs")
            .args(["destroy", "-r", "-f", &self.0])
            .status();
    }
}

fn make() -> Fixture {
    crate::support::lane::require(crate::support::lane::Lane::Qemu);
    let pool = std::env::var("JBUILD_TEST_ZFS_POOL").unwrap_or_else(|_| {
        panic!("JBUILD_TEST_ZFS_POOL is not set: this suite runs in the qemu lane, `bash tests/zfs-vm/lane.sh`")
    });
    let name = format!(
        "{pool}/suite{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let st = Command::new("zfs")
        .args(["create", &name])
        .status()
        .unwrap();
    assert!(st.success(), "zfs create {name}");
    let ds = Dataset(name);
    let sn = ZfsSnapshotter::open(&ds.0).unwrap();
    Fixture::new(Box::new(sn), ds)
}

jbuild::snapshotter_suite!(make, all: #[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]);
