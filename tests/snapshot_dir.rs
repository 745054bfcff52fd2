//! The snapshotter conformance suite on the `dir` backend.

use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::testsuite::Fixture;

fn make() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let sn = DirSnapshotter::new(tmp.path().join("snapshots")).unwrap();
    Fixture::new(Box::new(sn), tmp)
}

jbuild::snapshotter_suite!(make);

/// The same suite on the `overlay` backend (Linux, as root).
mod overlay {
    use jbuild::snapshot::overlay::OverlaySnapshotter;
    use jbuild::snapshot::testsuite::{Fixture, UnmountOnDrop};

    fn make() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let sn = OverlaySnapshotter::new(tmp.path().join("snapshots")).unwrap();
        Fixture::new(Box::new(sn), (UnmountOnDrop(tmp.path().to_path_buf()), tmp))
    }

    jbuild::snapshotter_suite!(make);
}
